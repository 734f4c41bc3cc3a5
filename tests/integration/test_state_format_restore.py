"""A checkpoint written by an earlier runner restores (issue 23, part 2).

tests/data/state_format_1_checkpoint.tar.gz was written by commit 08edf3a
(state format 1: one pickled blob per key-group) running
tests/integration/state_format_job.py, stopped part-way. This runner
resumes it: the GroupByKey's accumulated panes and the stateful DoFn's
counts continue from where the first run left them (state moved into the
per-key layout, streaming/keyed_state.py), and what the first run had
committed is not redone."""

import os
import tarfile

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
