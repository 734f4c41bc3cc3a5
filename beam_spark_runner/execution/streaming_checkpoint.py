"""The runner's records in a streaming checkpoint, on Spark's side of the
line: whether a checkpoint can be resumed by this pipeline, and the hold
records the source planner plans each batch with.

Checked at submission, before any Spark work starts:

- the plan record (`beam/plan.json`, streaming/plan_fingerprint.py): a new
  checkpoint gets this pipeline's; an existing one must match it where its
  state depends on the plan (CheckpointMismatchError names each operator
  and coder that differs);
- Spark's own logs: a damaged newest entry, or state schema files recorded
  where the checkpoint no longer is, cannot be resumed by Spark.

Hold records (`beam/holds/<batch>.json`): the driver writes each batch's
to the checkpoint and to its local scratch directory, where Spark's
source-planning process reads it; a restarted driver copies the latest
back into its new scratch directory.
"""

import json
import logging

from beam_spark_runner.errors import CheckpointMismatchError
from beam_spark_runner.execution import checkpoint_files, streaming_commits
from beam_spark_runner.streaming import plan_fingerprint
from beam_spark_runner.streaming.source_planner import remove_holds, write_holds

_LOG = logging.getLogger(__name__)

PLAN_FILE = checkpoint_files.join(checkpoint_files.BEAM_DIR, plan_fingerprint.FILE_NAME)
HOLDS_DIR = checkpoint_files.join(checkpoint_files.BEAM_DIR, "holds")
_OLD_HOLDS_DIR = "holds"  # where runners before the plan record kept them
# Hold records kept in the checkpoint: the planner needs the last committed
# batch's; a couple more cost nothing and help when reading a checkpoint.
HOLDS_KEPT = 3


def check_resumable(files, run_dir, fingerprint):
    """Records `fingerprint` in a new checkpoint; raises CheckpointMismatchError
    for a checkpoint this pipeline cannot resume."""
    _check_plan(files, run_dir, fingerprint)
    _check_spark_logs(files, run_dir)


def _check_plan(files, run_dir, fingerprint):
    where = files.uri(PLAN_FILE)
    recorded = files.read(PLAN_FILE)
    if recorded is None:
        if files.list(checkpoint_files.SPARK_DIR):
            _LOG.warning(
                "The checkpoint at %s has no plan record (written by an older runner); "
                "resuming it without checking that its operators match this pipeline's",
                run_dir,
            )
        files.write(PLAN_FILE, fingerprint.to_json())
        return
    recorded_print = plan_fingerprint.PlanFingerprint.from_json(recorded, where)
    problems = fingerprint.differences(recorded_print)
    if problems:
        raise CheckpointMismatchError(
            "The checkpoint at %s was written by a pipeline whose keyed operators differ from this one's, "
            "so its state cannot be resumed (start with a new --checkpoint_dir, or run the pipeline that "
            "wrote it):\n  %s\n(recorded in %s)" % (run_dir, "\n  ".join(problems), where)
        )
    if recorded_print.format_version < plan_fingerprint.FORMAT_VERSION:
        # It matched in what it records: from now on the record is checked
        # in full (coders too).
        files.write(PLAN_FILE, fingerprint.to_json())


def _check_spark_logs(files, run_dir):
    damaged = streaming_commits.damaged_spark_logs(files)
    if damaged:
        raise CheckpointMismatchError(
            "The checkpoint at %s is damaged, so the run cannot resume from it:\n  %s\n"
            "Spark cannot go back to an earlier batch by itself: with checkpoint format v2 the "
            "commit log names the state files of each batch, so deleting a damaged entry makes "
            "the state unreadable. Restore the file from a copy, or start with a new "
            "--checkpoint_dir (docs/reliability.md, 'A damaged checkpoint')." % (run_dir, "\n  ".join(damaged))
        )
    moved = streaming_commits.moved_state_schemas(files)
    if moved:
        raise CheckpointMismatchError(
            "The checkpoint at %s names state schema files that do not exist:\n  %s\n"
            "Spark records them by absolute path where the checkpoint was first written, so a "
            "checkpoint copied or moved from there cannot be resumed by Spark. Run it from its "
            "original location (docs/reliability.md, 'A moved checkpoint')." % (run_dir, "\n  ".join(moved))
        )


def _recent(names, count):
    """The `count` hold record names ("<batch>.json") of the latest batches."""
    reports = [n for n in names if n.endswith(".json") and n.split(".")[0].isdigit()]
    return sorted(reports, key=lambda n: int(n.split(".")[0]))[-count:]


class HoldFiles:
    """The hold records of one checkpoint (`files`, its CheckpointFiles)."""

    def __init__(self, files):
        self._files = files

    def restore_into(self, scratch_dir):
        """Copies the latest hold records from the checkpoint to `scratch_dir`,
        where the source planner reads them."""
        holds_dir = HOLDS_DIR if self._files.list(HOLDS_DIR) else _OLD_HOLDS_DIR
        for name in _recent(self._files.list(holds_dir), HOLDS_KEPT):
            path = checkpoint_files.join(holds_dir, name)
            try:
                holds = json.loads(self._files.read(path))
            except (TypeError, ValueError) as e:
                raise CheckpointMismatchError(
                    "%s is damaged (%s); delete it to resume from the hold reports before it"
                    % (self._files.uri(path), e)
                ) from e
            write_holds(scratch_dir, int(name.split(".")[0]), holds)

    def record(self, scratch_dir, batch, record):
        """A batch's hold record (`source_planner.hold_record`): for the source
        planner (`scratch_dir`) and in the checkpoint (a restarted driver plans
        the next batch with it); older records are pruned in both places, so
        neither grows with the run's length."""
        write_holds(scratch_dir, batch, record)
        self._files.write(checkpoint_files.join(HOLDS_DIR, "%d.json" % batch), json.dumps(record).encode())
        # Batches are numbered consecutively: dropping the one HOLDS_KEPT
        # back keeps the newest ones without listing the directory.
        self._files.delete(checkpoint_files.join(HOLDS_DIR, "%d.json" % (batch - HOLDS_KEPT)))
        remove_holds(scratch_dir, batch - HOLDS_KEPT)
