"""The checkpoint coordinator without Spark: an in-memory record store, a
fake clock, scripted acknowledgements, crashes and restarts."""

import pytest

from beam_spark_runner.streaming.checkpoint_coordinator import CheckpointCoordinator, IncompleteCheckpoint
from beam_spark_runner.streaming.checkpoint_policies import (
    CheckpointSettings,
    FailurePolicy,
    ReleasePolicy,
    RetentionPolicy,
)
from beam_spark_runner.streaming.checkpoint_records import (
    COMPLETED_DIR,
    PENDING_DIR,
    CheckpointRecordError,
    SideEffects,
    epochs_in,
)

OPS = {("gbk", 0), ("gbk", 1)}


class MemoryStore:
    """The record store interface of execution/checkpoint_files.py."""

    def __init__(self):
        self.files = {}

    def read(self, path):
        return self.files.get(path)

    def write(self, path, data):
        self.files[path] = bytes(data)

    def list(self, directory):
        prefix = directory.rstrip("/") + "/"
        return sorted(p[len(prefix) :] for p in self.files if p.startswith(prefix) and "/" not in p[len(prefix) :])

    def delete(self, path):
        self.files.pop(path, None)


class Clock:
    def __init__(self):
        self.now = 0

    def __call__(self):
        return self.now


class Actions:
    def __init__(self):
        self.released, self.aborted = [], []

    def release(self, effects):
        self.released.extend(effects.finalizers)

    def abort(self, effects):
        self.aborted.extend(effects.finalizers)


def _coordinator(store, actions, clock, publish=None, retention=None):
    return CheckpointCoordinator(
        store,
        actions.release,
        actions.abort,
        release_policy=publish or ReleasePolicy(clock=clock),
        retention=retention,
        clock=clock,
    )


def _batch(coord, epoch, done=False, ack=OPS):
    pending = coord.begin(epoch, OPS)
    for who in ack:
        pending.acknowledge(who)
    pending.add_side_effects(SideEffects((b"fin-%d" % epoch,)))
    return coord.pre_commit(epoch, done)


def test_side_effects_wait_for_the_commit_and_run_once():
    store, actions, clock = MemoryStore(), Actions(), Clock()
    coord = _coordinator(store, actions, clock)
    assert coord.recover(None).latest is None
    _batch(coord, 0)
    assert actions.released == [] and epochs_in(store.list(PENDING_DIR)) == [0]
    clock.now = 42
    coord.committed(0)
    assert actions.released == [b"fin-0"]
    assert epochs_in(store.list(PENDING_DIR)) == [] and epochs_in(store.list(COMPLETED_DIR)) == [0]
    assert coord.latest.completed_at_ms == 42 and not coord.latest.done
    coord.committed(0)  # Spark may report a batch twice
    assert actions.released == [b"fin-0"]


def test_a_missing_acknowledgement_fails_the_batch_naming_who():
    coord = _coordinator(MemoryStore(), Actions(), Clock())
    with pytest.raises(IncompleteCheckpoint, match=r"batch 3 .*\('gbk', 1\)"):
        _batch(coord, 3, ack={("gbk", 0)})
    with pytest.raises(IncompleteCheckpoint, match="unexpected acknowledgement"):
        coord.begin(4, OPS).acknowledge(("other", 0))


def test_restart_finishes_interrupted_commits_and_aborts_replayed_batches():
    store, actions, clock = MemoryStore(), Actions(), Clock()
    coord = _coordinator(store, actions, clock)
    coord.recover(None)
    _batch(coord, 0)
    coord.committed(0)
    _batch(coord, 1)  # Spark committed 1, the driver died before hearing it
    _batch(coord, 2)  # the driver died before Spark committed 2
    restarted_actions = Actions()
    restarted = _coordinator(store, restarted_actions, clock)
    recovery = restarted.recover(last_committed=1)
    assert recovery.completed == (1,) and recovery.aborted == (2,)
    assert restarted_actions.released == [b"fin-1"] and restarted_actions.aborted == [b"fin-2"]
    assert recovery.latest.epoch == 1 and not recovery.finished
    assert epochs_in(store.list(PENDING_DIR)) == []
    # Recovering again changes nothing: the records are consistent now.
    again = Actions()
    assert _coordinator(store, again, clock).recover(last_committed=1).completed == ()
    assert again.released == again.aborted == []


def test_a_finished_pipeline_is_known_after_restart():
    store, actions, clock = MemoryStore(), Actions(), Clock()
    coord = _coordinator(store, actions, clock)
    coord.recover(None)
    _batch(coord, 0)
    coord.committed(0)
    _batch(coord, 1, done=True)
    coord.committed(1)
    assert coord.latest.done
    assert _coordinator(store, Actions(), clock).recover(last_committed=1).finished


def test_release_policy_every_n_batches_or_t_ms():
    store, actions, clock = MemoryStore(), Actions(), Clock()
    coord = _coordinator(store, actions, clock, publish=ReleasePolicy(every_batches=3, every_ms=1000, clock=clock))
    coord.recover(None)
    for epoch in range(2):
        _batch(coord, epoch)
        coord.committed(epoch)
    assert actions.released == []
    # Completed but unreleased batches keep their pending records: a crash
    # now releases them at recovery.
    assert epochs_in(store.list(PENDING_DIR)) == [0, 1] and epochs_in(store.list(COMPLETED_DIR)) == [0, 1]
    _batch(coord, 2)
    coord.committed(2)
    assert actions.released == [b"fin-0", b"fin-1", b"fin-2"]
    _batch(coord, 3)
    clock.now = 999
    coord.committed(3)
    assert actions.released[-1] == b"fin-2"
    _batch(coord, 4)
    clock.now = 1000
    coord.committed(4)
    assert actions.released[-2:] == [b"fin-3", b"fin-4"]
    _batch(coord, 5)
    coord.committed(5)
    coord.flush()  # the run ends: nothing stays held
    assert actions.released[-1] == b"fin-5"


def test_a_crash_while_the_publish_policy_holds_batches_releases_them_on_restart():
    store, actions, clock = MemoryStore(), Actions(), Clock()
    coord = _coordinator(store, actions, clock, publish=ReleasePolicy(every_batches=10, clock=clock))
    coord.recover(None)
    for epoch in range(3):
        _batch(coord, epoch)
        coord.committed(epoch)
    assert actions.released == []
    after = Actions()
    recovery = _coordinator(store, after, clock).recover(last_committed=2)
    assert after.released == [b"fin-0", b"fin-1", b"fin-2"] and recovery.completed == (0, 1, 2)


def test_retention_keeps_the_newest_completed_records():
    store, actions, clock = MemoryStore(), Actions(), Clock()
    coord = _coordinator(store, actions, clock, retention=RetentionPolicy(keep=2))
    coord.recover(None)
    for epoch in range(5):
        _batch(coord, epoch)
        coord.committed(epoch)
    assert epochs_in(store.list(COMPLETED_DIR)) == [3, 4]


def test_a_damaged_record_is_named():
    store = MemoryStore()
    store.write(PENDING_DIR + "/7.json", b'{"epoch": 7, "do')
    with pytest.raises(CheckpointRecordError, match="beam/pending/7.json is damaged"):
        _coordinator(store, Actions(), Clock()).recover(7)
    store = MemoryStore()
    store.write(COMPLETED_DIR + "/7.json", b'{"format_version": 9}')
    with pytest.raises(CheckpointRecordError, match="beam/checkpoints/7.json has format version 9"):
        _coordinator(store, Actions(), Clock()).recover(7)


def test_policies_refuse_nonsense():
    with pytest.raises(ValueError, match="every_batches"):
        ReleasePolicy(every_batches=0)
    with pytest.raises(ValueError, match="keep"):
        RetentionPolicy(keep=0)


def test_a_query_restart_releases_held_batches_once():
    """--tolerable_failed_batches: the same coordinator recovers when its
    query restarts; batches the release policy held are released by the
    recovery, and not again when the run ends."""
    store, actions, clock = MemoryStore(), Actions(), Clock()
    coord = _coordinator(store, actions, clock, publish=ReleasePolicy(every_batches=10, clock=clock))
    coord.recover(None)
    for epoch in range(2):
        _batch(coord, epoch)
        coord.committed(epoch)
    _batch(coord, 2)  # pre-committed, then the query failed before Spark's commit
    recovery = coord.recover(last_committed=1)
    assert recovery.completed == (0, 1) and recovery.aborted == (2,)
    coord.flush()
    assert actions.released == [b"fin-0", b"fin-1"] and actions.aborted == [b"fin-2"]


def test_failure_policy_counts_failures_in_a_row():
    policy = FailurePolicy(tolerable_consecutive=2)
    assert policy.failed() and policy.failed()
    policy.completed()  # a batch completed: the count starts again
    assert policy.failed() and policy.failed()
    assert not policy.failed()
    assert not FailurePolicy().failed()  # default: the first failure fails the run
    with pytest.raises(ValueError, match="tolerable_consecutive"):
        FailurePolicy(tolerable_consecutive=-1)


def test_checkpoint_settings_build_the_policies():
    clock = Clock()
    settings = CheckpointSettings(publish_every_batches=3, publish_interval_ms=500, tolerable_failed_batches=2)
    release = settings.release_policy(clock)
    assert (release.every_batches, release.every_ms) == (3, 500)
    assert settings.failure_policy().tolerable_consecutive == 2


def test_the_query_may_idle_only_once_nothing_waits_for_the_release_policy():
    store, actions, clock = MemoryStore(), Actions(), Clock()
    coord = _coordinator(store, actions, clock, publish=ReleasePolicy(every_batches=2, clock=clock))
    coord.recover(None)
    _batch(coord, 0)
    assert coord.release_waits(0)  # its finalizer waits for one more completed batch
    coord.committed(0)
    pending = coord.begin(1, OPS)
    for who in OPS:
        pending.acknowledge(who)
    coord.pre_commit(1, False)  # no side effects of its own, but epoch 0's are held
    assert not coord.release_waits(1)  # its completion releases them: two batches completed
    coord.committed(1)
    assert actions.released == [b"fin-0"]
    empty = coord.begin(2, OPS)
    for who in OPS:
        empty.acknowledge(who)
    coord.pre_commit(2, False)
    assert not coord.release_waits(2)  # nothing held: the query may idle
