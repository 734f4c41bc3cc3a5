"""What a user sees on the console of a streaming run the runner starts
Spark for (the README's streaming example, in a fresh interpreter): none of
Spark's or PySpark's own chatter, and the run's own lines (Spark started
with its UI address, the query started, batches' watermarks and rows, the
end)."""

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Beam prints these when the driver script imports it, before the runner
# exists, if some Google Cloud packages are installed without the others (as
# the test extra installs them).
_BEAM_DRIVER_IMPORT = (
    re.compile(r"^Failed to import GCSFileSystem"),
    re.compile(r"^WARNING:root:apitools not found"),
)
_SPARK_INTERNALS = re.compile(
    r" WARN |log4j|incubator|Setting default log level|setLogLevel|NativeCodeLoader|"
    r"TransformWithStateInPandas|Python worker|AQE|DAGScheduler|StructType"
)


def test_the_streaming_example_prints_its_progress_and_none_of_sparks_internals(tmp_path):
    command = [
        sys.executable,
        os.path.join(ROOT, "examples", "streaming_leaderboard.py"),
        "--output",
        str(tmp_path / "out"),
        "--duration_seconds",
        "8",
        # Another test process's Spark may hold the UI's default port, which
        # Spark rightly warns about; any free port will do here.
        "--spark_conf=spark.ui.port=0",
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK", "SPARK_LOCAL"))}
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=str(tmp_path), env=env)
    assert done.returncode == 0, done.stderr[-4000:]
    printed = [
        line
        for line in (done.stdout + done.stderr).splitlines()
        if line.strip() and not any(p.search(line) for p in _BEAM_DRIVER_IMPORT)
    ]
    internals = [line for line in printed if _SPARK_INTERNALS.search(line)]
    assert internals == [], "\n".join(printed)
    text = "\n".join(printed)
    for expected in (
        r"Started Spark \(local\[\*,4\]\); its UI: http",
        r"Streaming query started: \d+ operators",
        r"Streaming batch 1 took \d+ ms; .*TeamScore/Group: watermark in .* rows \d+ -> \d+",
        r"Streaming pipeline finished",
    ):
        assert re.search(expected, text), "no line matching %r in:\n%s" % (expected, text)
    assert len(printed) < 20, text
    assert os.listdir(tmp_path / "out")  # and the example did its work


def test_a_run_cancelled_in_the_middle_of_a_batch_stops_without_a_java_error(tmp_path):
    """Cancelling stops the query while the batch's Spark job runs: Spark
    must see the foreachBatch callback's error as a stop. Said with the
    whole Java stack, Spark's stop-or-failure regex overflowed the stream
    thread's stack (StackOverflowError, printed with a long trace)."""
    marker = tmp_path / "in_the_batch"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK", "SPARK_LOCAL"))}
    done = subprocess.run(
        [sys.executable, "-m", "tests.integration.cancelled_batch_job", str(marker)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "final state: CANCELLED" in done.stdout, done.stdout + done.stderr[-4000:]
    assert marker.read_text().strip(), "the cancel came before the batch reached the DoFn"
    printed = [line for line in done.stderr.splitlines() if not any(p.search(line) for p in _BEAM_DRIVER_IMPORT)]
    errors = [
        line
        for line in printed
        if re.search(r"StackOverflowError|Exception in thread|Traceback|ERROR|Py4JJavaError", line)
    ]
    assert errors == [], "\n".join(printed[-60:])
