"""A checkpoint written by an earlier runner restores,
and a checkpoint written with stateful DoFns on one path (the runner's own,
or Beam's SDK harness) resumes on the other.

tests/data/state_format_1_checkpoint.tar.gz was written by commit 08edf3a
(state format 1: one pickled blob per key-group) running
tests/integration/state_format_job.py, stopped part-way. This runner
resumes it: the GroupByKey's accumulated panes and the stateful DoFn's
counts continue from where the first run left them (state moved into the
per-key layout, streaming/keyed_state.py), and what the first run had
committed is not redone."""

import os
import tarfile
import time

import pytest
from apache_beam.runners.runner import PipelineState

from beam_spark_runner.errors import CheckpointMismatchError
from tests.integration import state_format_job as job

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "state_format_1_checkpoint.tar.gz")


# Where the fixture's checkpoint was written: Spark's operator metadata
# (state/<operator>/_metadata/v2/<batch>) records its state schema files by
# absolute path, so a checkpoint read from another directory must have
# those paths moved with it.
FIXTURE_WRITTEN_AT = "file:/tmp/fmt/checkpoint/"


def _extract_fixture(tmp_path):
    """The fixture's checkpoint under `tmp_path`, its recorded schema paths
    pointing there (their checksum files dropped: Hadoop's local file
    system checks a file against its .crc only when one exists)."""
    with tarfile.open(FIXTURE) as archive:
        archive.extractall(tmp_path, filter="data")
    checkpoint = tmp_path / "checkpoint"
    moved = 0
    for metadata in checkpoint.glob("spark/state/*/_metadata/v2/*"):
        if metadata.name.startswith("."):
            continue
        text = metadata.read_text()
        if FIXTURE_WRITTEN_AT in text:
            metadata.write_text(text.replace(FIXTURE_WRITTEN_AT, "file:%s/" % checkpoint))
            (metadata.parent / (".%s.crc" % metadata.name)).unlink(missing_ok=True)
            moved += 1
    assert moved, "the fixture records no schema path under %s" % FIXTURE_WRITTEN_AT
    return checkpoint


def test_a_format_1_checkpoint_resumes_with_its_state(tmp_path):
    checkpoint = _extract_fixture(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    result = job.pipeline(str(checkpoint), str(out)).run()
    assert result.wait_until_finish() == PipelineState.DONE
    written = set(os.listdir(out))
    for key in range(job.KEYS):
        ticks = job.ticks_of(key)
        # The last accumulating pane holds the first run's values too.
        assert (out / ("pane_%d_%d" % (key, len(ticks)))).read_text() == ",".join(map(str, ticks))
        # The count goes on from the first run's ...
        assert "count_%d_%d" % (key, len(ticks)) in written
        # ... which this run did not recount from the start.
        assert "count_%d_1" % key not in written, sorted(written)


def test_a_moved_checkpoint_is_refused_naming_where_it_was_written(tmp_path):
    """Spark records state schema files by absolute path: resumed from
    another directory, the runner says so before Spark fails on a missing
    file with no word of why."""
    written_at = _extract_fixture(tmp_path / "first")
    os.rename(tmp_path / "first", tmp_path / "moved")
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(CheckpointMismatchError) as refused:
        job.pipeline(str(tmp_path / "moved" / "checkpoint"), str(out)).run().wait_until_finish()
    message = str(refused.value)
    assert "file:%s/spark/state/0/_stateSchema/default/" % written_at in message, message
    assert "moved" in message and "original location" in message
    assert not os.listdir(out)


def _counts(directory):
    """{(key, n): the tick counted} from a run's `count_K_N` files."""
    counts = {}
    for name in os.listdir(directory):
        if name.startswith("count_"):
            key, n = map(int, name.split("_")[1:])
            counts[key, n] = int((directory / name).read_text())
    return counts


def _assert_resumed(first_out, out, ticks):
    """Each key's panes and counts cover all its ticks across both runs.

    Where the first run stopped depends on the machine's speed (a key may
    have been counted to its end before the stop), so what the second run
    must write is judged by content: across both runs, key K's counts
    are 1..N over its N ticks with each tick counted once, which holds
    only if the second run counted on from the restored state, neither
    losing a count nor counting one again."""
    first, second = _counts(first_out), _counts(out)
    assert second, "the second run counted nothing: %s" % sorted(os.listdir(out))
    for key in range(job.KEYS):
        mine = job.ticks_of(key, ticks)
        assert (out / ("pane_%d_%d" % (key, len(mine)))).read_text() == ",".join(map(str, mine))
        counted = {n: tick for (k, n), tick in first.items() if k == key}
        for (k, n), tick in second.items():
            if k == key:
                # A count the first run wrote but did not commit is redone
                # by the second with the same tick; any other clash is a
                # count started again from nothing.
                assert counted.setdefault(n, tick) == tick, (key, n, tick, sorted(first.items()))
        assert sorted(counted) == list(range(1, len(mine) + 1)), (key, sorted(first.items()), sorted(second.items()))
        assert sorted(counted.values()) == mine, (key, sorted(first.items()), sorted(second.items()))


def _wait_for(condition, what, timeout_s=300):
    deadline = time.time() + timeout_s
    while not condition():
        assert time.time() < deadline, "timed out waiting for %s" % what
        time.sleep(0.2)


def _spark_commits(checkpoint):
    commits = checkpoint / "spark" / "commits"
    return len([n for n in os.listdir(commits) if n.isdigit()]) if commits.is_dir() else 0


@pytest.mark.parametrize("first_on_harness", [False, True], ids=["runner-then-harness", "harness-then-runner"])
def test_a_checkpoint_resumes_on_the_other_stateful_path(tmp_path, first_on_harness):
    """Each key's stateful DoFn record is moved between the runner's format
    (worker/user_state.py) and the SDK harness's as it is read.

    The ticks are files the test makes: the first run sees ticks 0-7 only
    and is stopped once the batch that counted six of them committed; the
    second sees the rest. Neither depends on how fast the machine is."""
    ticks = 15
    flags = [["--sdk_harness_only"], []] if first_on_harness else [[], ["--sdk_harness_only"]]
    checkpoint, first_out, out, tick_dir = (tmp_path / n for n in ("checkpoint", "first", "out", "ticks"))
    for directory in (first_out, out, tick_dir):
        directory.mkdir()

    def build(directory, extra_args):
        return job.pipeline(str(checkpoint), str(directory), extra_args=extra_args, tick_dir=str(tick_dir))

    def counted(directory):
        return [n for n in os.listdir(directory) if n.startswith("count_")]

    for i in range(8):
        job.tick_file(str(tick_dir), i)
    result = build(first_out, flags[0]).run()
    try:
        _wait_for(lambda: len(counted(first_out)) >= 6, "six counts")
        # The batches commit in order: one committed after the counts were
        # seen means the batch that wrote them is durable.
        seen = _spark_commits(checkpoint)
        _wait_for(lambda: _spark_commits(checkpoint) > seen, "a micro-batch to commit after the counts")
    finally:
        result.cancel()
    assert result.wait_until_finish() == PipelineState.CANCELLED
    first = set(os.listdir(first_out))
    assert {"count_%d_1" % key for key in range(job.KEYS)} <= first, sorted(first)
    finals = {"count_%d_%d" % (key, len(job.ticks_of(key, ticks))) for key in range(job.KEYS)}
    assert not finals & first, sorted(first)
    for i in range(8, ticks):
        job.tick_file(str(tick_dir), i)
    result = build(out, flags[1]).run()
    try:
        _wait_for(lambda: finals <= set(os.listdir(out)), "the last counts")
        result.drain()
        assert result.wait_until_finish() == PipelineState.DRAINED
    finally:
        if not PipelineState.is_terminal(result.state):
            result.cancel()
    _assert_resumed(first_out, out, ticks)
