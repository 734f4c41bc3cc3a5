"""The console of a Spark JVM the runner starts (execution/jvm_console.py):
Spark's and PySpark's known chatter is dropped, every other line kept."""

import logging
import subprocess
import sys
import textwrap

from beam_spark_runner.execution.jvm_console import NoiseFilter
from beam_spark_runner.runner import show_run_progress

PYSPARK_TWS_CHATTER = [
    "Starting Streaming TransformWithStateInPandas Python worker.",
    "",
    "Streaming TransformWithStateInPandas Python worker finish init stage of Python runner. Received UDF ...",
    "",
]


def test_known_noise_and_the_blank_lines_after_it_go_everything_else_stays():
    lines = (
        ["WARNING: Using incubator modules: jdk.incubator.vector"]
        + PYSPARK_TWS_CHATTER
        + ["a user's print", "", "Traceback (most recent call last):", "ValueError: boom"]
    )
    noise = NoiseFilter()
    kept = [line for line in lines if noise.keep(line)]
    assert kept == ["a user's print", "", "Traceback (most recent call last):", "ValueError: boom"]


def test_a_child_process_started_inside_the_filter_keeps_it_and_the_driver_gets_its_stderr_back():
    script = textwrap.dedent(
        """
        import subprocess, sys
        from beam_spark_runner.execution.jvm_console import drain, filtered_stderr
        child = "import sys; sys.stderr.write(sys.argv[1]); sys.stderr.flush()"
        with filtered_stderr():
            p = subprocess.Popen([sys.executable, "-c", child, sys.argv[1]])
        p.wait()
        drain()
        sys.stderr.write("driver after\\n")
        """
    )
    child_text = "\n".join(PYSPARK_TWS_CHATTER + ["kept from the child", "WARNING: Using incubator modules: x"]) + "\n"
    done = subprocess.run([sys.executable, "-c", script, child_text], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line]
    assert "kept from the child" in lines and "driver after" in lines
    assert not any("TransformWithStateInPandas" in line or "incubator" in line for line in lines)


def test_beams_log_level_overrides_turn_the_runners_own_lines_down():
    logger = logging.getLogger("beam_spark_runner")
    before = logger.level
    try:
        show_run_progress((("beam_spark_runner", logging.WARNING), ("my.module", logging.DEBUG)))
        assert logger.getEffectiveLevel() == logging.WARNING
        assert logging.getLogger("my.module").level == logging.NOTSET  # only the runner's loggers
        show_run_progress((("beam_spark_runner", logging.INFO),))
        assert logger.isEnabledFor(logging.INFO)
    finally:
        logger.setLevel(before)
