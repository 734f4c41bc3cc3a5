"""The default embedded master retries failed tasks, as a cluster does:
a Python worker that crashes once mid-bundle costs a task attempt, not the
run.

Runs in a fresh interpreter: the test process's SparkSession (one per test
process) has the test master, and a session's master cannot change.
"""

import subprocess
import sys
import textwrap

from beam_spark_runner.options import DEFAULT_MASTER

_SCRIPT = textwrap.dedent(
    """
    import os, sys
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.testing.util import assert_that, equal_to

    MARKER = sys.argv[1]
    EXTRA = sys.argv[2:]

    class CrashOnce(beam.DoFn):
        def process(self, x):
            if x == 7 and not os.path.exists(MARKER):
                open(MARKER, "w").close()
                os._exit(3)  # the Python worker dies mid-bundle
            yield x

    opts = PipelineOptions(["--runner=beam_spark_runner.SparkRunner", "--sdk_harness_only"] + EXTRA)
    with beam.Pipeline(options=opts) as p:
        out = p | beam.Create(list(range(20))) | beam.ParDo(CrashOnce()) | beam.Map(lambda x: x * 2)
        assert_that(out, equal_to([x * 2 for x in range(20)]))
    print("PIPELINE DONE")
    """
)


def _run(tmp_path, *extra):
    marker = tmp_path / ("crashed" + "".join(e.replace("/", "_") for e in extra))
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(marker), *extra],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    return proc, marker


def test_the_default_master_retries_a_task_whose_python_worker_crashed(tmp_path):
    assert DEFAULT_MASTER == "local[*,4]"
    proc, marker = _run(tmp_path)
    assert marker.exists(), "the worker never crashed: the test shows nothing\n" + proc.stderr[-3000:]
    assert proc.returncode == 0 and "PIPELINE DONE" in proc.stdout, proc.stderr[-3000:]


def test_a_master_without_retries_fails_the_run_on_the_same_crash(tmp_path):
    proc, marker = _run(tmp_path, "--spark_master=local[2]")
    assert marker.exists()
    assert proc.returncode != 0 and "PIPELINE DONE" not in proc.stdout
