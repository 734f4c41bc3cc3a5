"""The exactly-once file sinks when the driver dies during a micro-batch's
commit: after the pending record is written and before Spark's commit log
entry (the batch is replayed, its staged files are overwritten), after
Spark's commit and before the files are published (the restart publishes
them: finalizers run after restart, never before their batch committed),
and half way through publishing a pane (the restart finishes it; this
case runs at --watermark_percentile=0.99). In every
case the files Beam's `WriteToText` and `fileio.WriteToFiles` published,
and the Parquet files `WriteToSpark` published, hold every (key, seq) once,
and no staged file is left.

Each case runs tests/faults/sink_pipeline.py twice in fresh processes (the
second in another working directory, given only the checkpoint URI) and
asserts that the first really died at its fault point."""

import glob
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.faults import sink_pipeline
from tests.faults.driver_cycles import published_lines, published_rows
from tests.faults.injection import sequence_problems

LEAD_S, TICKING_S = 4, 8  # ticks start before the run: its first batch has several windows


def _run(out, checkpoint, start, stop, cwd, fault=(), flags=()):
    os.makedirs(cwd)
    proc = subprocess.Popen(
        [sys.executable, sink_pipeline.__file__, out, checkpoint, str(start), str(stop), *fault, "--", *flags],
        cwd=cwd,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p)),
    )
    try:
        _, err = proc.communicate(timeout=600)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the Spark JVM of a driver that died
        except ProcessLookupError:
            pass
    return proc.returncode, err.decode(errors="replace")


def _staged_leftovers(out):
    text = [d for d in os.listdir(os.path.join(out, "text")) if d.startswith("beam-temp-")]
    files = glob.glob(os.path.join(out, "files", ".temp-beam-spark-*", "*"))
    spark = glob.glob(os.path.join(out, "parquet", "_beam_staging", "*", "*", "*"))
    return text + files + spark


@pytest.mark.parametrize("fault", sink_pipeline.FAULTS)
def test_published_files_are_exact_after_a_driver_crash_during_commit(tmp_path, fault):
    out = str(tmp_path / "out")
    checkpoint = "file://%s" % (tmp_path / "checkpoint")
    marker = str(tmp_path / "crashed")
    start = int(time.time()) - LEAD_S
    stop = start + LEAD_S + TICKING_S
    # One case runs both drivers at the 99% watermark: its per-step
    # summaries and percentile lanes are restored with the checkpoint.
    flags = ["--watermark_percentile=0.99"] if fault == "mid_publish" else []
    rc, err = _run(out, checkpoint, start, stop, str(tmp_path / "run1"), (fault, marker), flags)
    assert rc == 17 and os.path.exists(marker), "the driver did not die at %s (rc %s): %s" % (fault, rc, err[-3000:])
    rc, err = _run(out, checkpoint, start, stop, str(tmp_path / "run2"), flags=flags)
    assert rc == 0, err[-3000:]
    ticks = int((stop - start) / sink_pipeline.INTERVAL)
    keys = ["k%d" % i for i in range(sink_pipeline.KEYS)]
    for sink in ("text", "files"):
        problems = sequence_problems(published_lines(os.path.join(out, sink)), keys, ticks // sink_pipeline.KEYS)
        assert not problems, "%s after %s: %s" % (sink, fault, "; ".join(problems))
    problems = sequence_problems(published_rows(os.path.join(out, "parquet")), keys, ticks // sink_pipeline.KEYS)
    assert not problems, "WriteToSpark after %s: %s" % (fault, "; ".join(problems))
    assert not _staged_leftovers(out)


def test_a_damaged_commit_log_entry_is_refused_naming_the_file(tmp_path):
    """The newest entry of Spark's commit log truncated after a crash, on a
    file system without checksums (Spark would fail with a bare JSON parse
    error): the restart is refused at submission, naming the file."""
    out = str(tmp_path / "out")
    checkpoint = "file://%s" % (tmp_path / "checkpoint")
    start = int(time.time()) - LEAD_S
    stop = start + LEAD_S + TICKING_S
    fault = ("before_publish", str(tmp_path / "crashed"))
    rc, err = _run(out, checkpoint, start, stop, str(tmp_path / "run1"), fault)
    assert rc == 17, err[-3000:]
    commits = tmp_path / "checkpoint" / "spark" / "commits"
    newest = max(int(name) for name in os.listdir(commits) if name.isdigit())
    (commits / str(newest)).write_text('v2\n{"nextBatchWaterm')
    crc = commits / (".%d.crc" % newest)
    if crc.exists():
        crc.unlink()
    rc, err = _run(out, checkpoint, start, stop, str(tmp_path / "run2"))
    assert rc != 0 and "CheckpointMismatchError" in err, err[-3000:]
    assert "spark/commits/%d: line 2 is not complete JSON" % newest in err
    assert "Spark cannot go back to an earlier batch" in err
