"""The commit half of the runner's exactly-once sinks, one contract for
batch and streaming (as Flink's two-phase `Committer` and Spark's
`StreamingWrite.commit(epoch)`).

A sink stages an epoch's rows in the task that produced them, where a
replay of the epoch overwrites its own attempt, and hands the driver a
`SinkCommit` for them (as a bundle finalization callback, or in a
micro-batch's FINALIZE row). The driver runs it once the output it
publishes is durable: in batch after the Spark job that staged it, in
streaming once the micro-batch is a completed checkpoint, and again after
a restart that interrupted it. What the contract guarantees:

- `commit(context)` is idempotent: a second call after a complete first
  one publishes nothing more;
- a commit that fails raises, naming the sink and the target, and leaves
  the staged rows for the next attempt; the execution then fails the run
  (a commit is never logged and dropped, as other finalization callbacks
  are: that would lose the epoch's rows);
- a commit needs nothing from where it was made: what it reads beyond its
  own fields (the checkpoint's files) it gets from the `CommitContext` of
  the execution that runs it.

An epoch that is abandoned (a micro-batch Spark replays) never commits:
its replay stages over its files and hands over its own commit.
"""

import abc
import dataclasses
from typing import Any, Callable, List, Sequence, Tuple


@dataclasses.dataclass(frozen=True)
class CommitContext:
    """What the execution running a commit provides. `open_files(root)`:
    the files of the checkpoint at `root` (execution/checkpoint_files.py),
    through the execution's own Spark session where the checkpoint is not
    local."""

    open_files: Callable[[str], Any]


class SinkCommit(abc.ABC):
    """Publishes one epoch's staged rows of one sink (the module's
    guarantees). Also a Beam bundle finalization callback: calling it with
    no context commits with `NO_EXECUTION`, for the SDK harness's
    finalizer, which knows none; a commit that needs the checkpoint's
    files then fails, naming the checkpoint."""

    @abc.abstractmethod
    def commit(self, context: CommitContext) -> None:
        """Publishes the staged rows, idempotently; raises if they cannot be."""

    def __call__(self):
        self.commit(NO_EXECUTION)


def _no_checkpoint(root):
    raise RuntimeError(
        "a sink's commit needs the files of checkpoint %s, which only the runner's execution provides; "
        "it was called as a plain finalization callback" % root
    )


# The context of a commit called outside the runner's execution.
NO_EXECUTION = CommitContext(_no_checkpoint)


def split(callbacks: Sequence[Any]) -> Tuple[List[SinkCommit], List[Any]]:
    """(the sinks' commits, the other finalization callbacks), each in order."""
    commits = [c for c in callbacks if isinstance(c, SinkCommit)]
    return commits, [c for c in callbacks if not isinstance(c, SinkCommit)]


def run_commits(commits: Sequence[SinkCommit], context: CommitContext) -> int:
    """Runs `commits` in order; the first that fails raises (the contract:
    the run fails and the staged rows stay). Returns how many ran."""
    for commit in commits:
        commit.commit(context)
    return len(commits)
