"""A long-lived driver (the job server) whose Spark driver JVM died: the
next run starts a new SparkSession instead of failing with a bare
"Connection refused" from PySpark's dead gateway (tests/integration/dead_jvm_job.py,
in a process of its own: the suite's own session stays alive)."""

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(300)


def test_a_run_after_the_driver_jvm_died_starts_a_new_session():
    script = os.path.join(os.path.dirname(__file__), "dead_jvm_job.py")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    done = subprocess.run([sys.executable, script], capture_output=True, text=True, env=env, timeout=240)
    out = done.stdout.splitlines()
    assert done.returncode == 0, done.stderr[-3000:]
    counts = [line for line in out if line.startswith("COUNT")]
    jvms = [line.split()[1] for line in out if line.startswith("JVM")]
    assert counts == ["COUNT 10", "COUNT 20"], out
    assert len(jvms) == 2 and jvms[0] != jvms[1], out
    assert "Spark's driver JVM is gone" in done.stderr
