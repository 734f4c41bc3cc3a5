"""A checkpoint written by an earlier runner restores (issue 23, part 2),
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

from tests.integration import state_format_job as job

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "state_format_1_checkpoint.tar.gz")


def test_a_format_1_checkpoint_resumes_with_its_state(tmp_path):
    with tarfile.open(FIXTURE) as archive:
        archive.extractall(tmp_path, filter="data")
    out = tmp_path / "out"
    out.mkdir()
    result = job.pipeline(str(tmp_path / "checkpoint"), str(out)).run()
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


def _assert_resumed(out, ticks):
    written = set(os.listdir(out))
    for key in range(job.KEYS):
        mine = job.ticks_of(key, ticks)
        assert (out / ("pane_%d_%d" % (key, len(mine)))).read_text() == ",".join(map(str, mine))
        assert "count_%d_%d" % (key, len(mine)) in written, sorted(written)
        assert "count_%d_1" % key not in written, sorted(written)


@pytest.mark.parametrize("first_on_harness", [False, True], ids=["runner-then-harness", "harness-then-runner"])
def test_a_checkpoint_resumes_on_the_other_stateful_path(tmp_path, first_on_harness):
    """Each key's stateful DoFn record is moved between the runner's format
    (worker/user_state.py) and the SDK harness's as it is read."""
    ticks = 15
    start = int(time.time()) + 5  # a tick a second from then: the first run stops part-way
    flags = [["--sdk_harness_only"], []] if first_on_harness else [[], ["--sdk_harness_only"]]
    checkpoint, first_out, out = tmp_path / "checkpoint", tmp_path / "first", tmp_path / "out"
    first_out.mkdir()
    out.mkdir()
    stopped = job.run_until(
        job.pipeline(str(checkpoint), str(first_out), start=start, ticks=ticks, extra_args=flags[0]), str(first_out), 6
    )
    assert stopped == PipelineState.CANCELLED
    first = set(os.listdir(first_out))
    assert {"count_%d_1" % key for key in range(job.KEYS)} <= first, sorted(first)
    finals = {"count_%d_%d" % (key, len(job.ticks_of(key, ticks))) for key in range(job.KEYS)}
    assert not finals <= first, "the first run was to stop part-way: %s" % sorted(first)
    result = job.pipeline(str(checkpoint), str(out), start=start, ticks=ticks, extra_args=flags[1]).run()
    assert result.wait_until_finish() == PipelineState.DONE
    _assert_resumed(out, ticks)
