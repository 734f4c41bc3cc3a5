"""The checkpoint coordinator: ABS-style (Carbone et al., the scheme behind
Flink's checkpoints) over Spark's micro-batches. No Spark, no Beam: the
Spark glue (execution/streaming_execution.py) feeds it events and gives it
a store and the side-effect actions; tests drive it with a fake clock and
an in-memory store.

Each micro-batch is an epoch; the barrier is the batch boundary itself, so
every operator's state of an epoch is consistent by construction. An epoch
goes through:

1. *pending* (`begin`): it expects one acknowledgement per keyed operator
   and key-group (the key-group's state version for the epoch is written:
   it reported its hold) and collects the side effects the batch produced
   (bundle finalizers);
2. *pre-committed* (`pre_commit`, before Spark's commit log entry): every
   acknowledgement arrived, and the side effects are in a `PendingRecord`
   written atomically to the checkpoint (the offsets of the epoch are
   already in Spark's offset log). A missing acknowledgement fails the
   batch, so Spark replays it;
3. *completed* (`committed`, after Spark wrote its commit log entry): a
   `CompletedCheckpoint` record is written; only then are side effects
   released (`release`: finalizers run), as the release policy says, and
   the pending record goes.

On restart, `recover(last_committed)` looks at the pending records: those
of epochs Spark committed are completed and released now (a commit the
crash interrupted), the others are aborted (`abort`), since Spark replays
those batches. Releasing is at least once per epoch: a side effect must be
idempotent to be exactly once.
"""

import dataclasses
import logging
from typing import Callable, FrozenSet, Optional, Tuple

from beam_spark_runner.streaming.checkpoint_policies import ReleasePolicy, RetentionPolicy, wall_clock_ms
from beam_spark_runner.streaming.checkpoint_records import (
    COMPLETED_DIR,
    PENDING_DIR,
    CompletedCheckpoint,
    PendingRecord,
    SideEffects,
    epochs_in,
    record_name,
)

_LOG = logging.getLogger(__name__)


class IncompleteCheckpoint(RuntimeError):
    """A batch ended without every acknowledgement its checkpoint needs."""


class PendingCheckpoint:
    """The acknowledgements and side effects of one epoch, in memory."""

    def __init__(self, epoch: int, expected: FrozenSet[Tuple[str, str]]):
        self.epoch = epoch
        self.expected = frozenset(expected)
        self._acknowledged = set()
        self.side_effects = SideEffects()
        self.record = None  # the PendingRecord once pre-committed

    def acknowledge(self, who: Tuple[str, str]):
        if who not in self.expected:
            raise IncompleteCheckpoint("epoch %d: unexpected acknowledgement from %s" % (self.epoch, who))
        self._acknowledged.add(who)

    def add_side_effects(self, effects: SideEffects):
        self.side_effects = self.side_effects.plus(effects)

    def missing(self):
        return sorted(self.expected - self._acknowledged)

    @property
    def fully_acknowledged(self):
        return not self.missing()


@dataclasses.dataclass(frozen=True)
class Recovery:
    """What `recover` found and did."""

    completed: Tuple[int, ...]  # interrupted commits it finished
    aborted: Tuple[int, ...]  # pre-commits of batches Spark will replay
    latest: Optional[CompletedCheckpoint]  # the newest completed checkpoint

    @property
    def finished(self):
        """The pipeline finished in an earlier run: nothing left to do."""
        return self.latest is not None and self.latest.done


class CheckpointCoordinator:
    """Orchestrates pending and completed checkpoints over a record store.

    `store`: read(path) -> bytes | None, write(path, bytes) (atomic),
    list(dir) -> names, delete(path) (execution/checkpoint_files.py).
    `release(SideEffects)` and `abort(SideEffects)` perform side effects;
    both must be idempotent.
    """

    def __init__(
        self,
        store,
        release: Callable[[SideEffects], None],
        abort: Callable[[SideEffects], None],
        release_policy: ReleasePolicy = None,
        retention: RetentionPolicy = None,
        clock=wall_clock_ms,
    ):
        self._store = store
        self._release = release
        self._abort = abort
        self._clock = clock
        self.release_policy = release_policy or ReleasePolicy(clock=clock)
        self.retention = retention or RetentionPolicy()
        self._pending = {}  # epoch -> PendingCheckpoint (this run)
        self._unreleased = []  # completed epochs whose side effects wait for the release policy
        self.latest = None  # CompletedCheckpoint

    # -- restart ---------------------------------------------------------------
    def recover(self, last_committed: Optional[int]) -> Recovery:
        """Brings the records in line with Spark's commit log, whose newest
        entry is `last_committed` (None: no batch ever committed). Called at
        start and when the query restarts after a failure: what this run held
        in memory is dropped, the records in the store decide."""
        self._pending, self._unreleased = {}, []
        completed, aborted = [], []
        for epoch in epochs_in(self._store.list(PENDING_DIR)):
            path = _path(PENDING_DIR, epoch)
            record = PendingRecord.from_bytes(self._store.read(path), self._where(path))
            if last_committed is not None and epoch <= last_committed:
                self._complete(record)
                self._release(record.side_effects)
                completed.append(epoch)
            else:
                self._abort(record.side_effects)
                aborted.append(epoch)
            self._store.delete(path)
        done = epochs_in(self._store.list(COMPLETED_DIR))
        if done:
            path = _path(COMPLETED_DIR, done[-1])
            self.latest = CompletedCheckpoint.from_bytes(self._store.read(path), self._where(path))
        self._expire()
        if completed or aborted:
            _LOG.info("Checkpoint recovery: finished the commit of batches %s, aborted %s", completed, aborted)
        return Recovery(tuple(completed), tuple(aborted), self.latest)

    # -- a batch ---------------------------------------------------------------
    def begin(self, epoch: int, expected) -> PendingCheckpoint:
        pending = PendingCheckpoint(epoch, frozenset(expected))
        self._pending[epoch] = pending
        return pending

    def pre_commit(self, epoch: int, done: bool) -> PendingRecord:
        """Called when the batch's work is done, before Spark commits it."""
        pending = self._pending[epoch]
        if not pending.fully_acknowledged:
            raise IncompleteCheckpoint(
                "batch %d ended without acknowledgements from %s" % (epoch, ", ".join(map(str, pending.missing())))
            )
        record = PendingRecord(epoch, done, pending.side_effects)
        self._store.write(_path(PENDING_DIR, epoch), record.to_bytes())
        pending.record = record
        return record

    def committed(self, epoch: int):
        """Spark wrote its commit log entry for `epoch`: the checkpoint is
        complete; side effects are released as the release policy says."""
        pending = self._pending.pop(epoch, None)
        record = pending.record if pending is not None else None
        if record is None:
            # Not pre-committed by this run (or reported twice): only a
            # record in the store says there is something to complete.
            path = _path(PENDING_DIR, epoch)
            data = self._store.read(path)
            if data is None:
                if pending is not None:
                    _LOG.warning("Batch %d committed without a pre-commit record; nothing to release", epoch)
                return
            record = PendingRecord.from_bytes(data, self._where(path))
        self._complete(record)
        self._unreleased.append(record)
        self._release_if_due(finished=record.done)
        self._expire()

    def release_waits(self, epoch: int) -> bool:
        """Whether side effects would still wait for the release policy once
        the pre-committed `epoch` completes: the policy counts completed
        batches, so the query must run more (not idle) until they go."""
        pending = self._pending.get(epoch)
        records = self._unreleased + ([pending.record] if pending is not None and pending.record else [])
        if not any(record.side_effects for record in records):
            return False
        return not self.release_policy.due(len(records), finished=any(record.done for record in records))

    def flush(self):
        """Releases every completed epoch the release policy still holds
        (the run is ending)."""
        self._release_if_due(finished=True)

    # -- internals ---------------------------------------------------------------
    def _complete(self, record: PendingRecord):
        completed = CompletedCheckpoint(record.epoch, record.done, self._clock())
        self._store.write(_path(COMPLETED_DIR, record.epoch), completed.to_bytes())
        self.latest = completed

    def _release_if_due(self, finished):
        if not self.release_policy.due(len(self._unreleased), finished=finished):
            return
        held, self._unreleased = self._unreleased, []
        for record in held:
            self._release(record.side_effects)
            self._store.delete(_path(PENDING_DIR, record.epoch))
        self.release_policy.released()

    def _expire(self):
        for epoch in self.retention.expired(epochs_in(self._store.list(COMPLETED_DIR))):
            self._store.delete(_path(COMPLETED_DIR, epoch))

    def _where(self, path):
        uri = getattr(self._store, "uri", None)
        return uri(path) if uri else path


def _path(directory, epoch):
    return "%s/%s" % (directory, record_name(epoch))
