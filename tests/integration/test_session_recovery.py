"""A long-lived driver whose Spark driver JVM died (a script running one
pipeline after another, tests/integration/dead_jvm_job.py; the job server):
the next run starts a new SparkSession instead of failing with a bare
"Connection refused" from PySpark's dead gateway. Each in a process of its
own: the suite's own session stays alive."""

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


def _descendants(pid):
    """Process ids under `pid` (Linux /proc)."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _spark_jvms(pid):
    jvms = []
    for child in _descendants(pid):
        try:
            with open("/proc/%d/cmdline" % child, "rb") as f:
                if b"org.apache.spark.deploy.SparkSubmit" in f.read():
                    jvms.append(child)
        except OSError:
            pass
    return jvms


def _count_through(endpoint, n):
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.runners.portability.portable_runner import PortableRunner

    options = PipelineOptions(["--job_endpoint=" + endpoint, "--environment_type=LOOPBACK"])
    p = beam.Pipeline(runner=PortableRunner(), options=options)
    _ = p | beam.Create(range(n)) | beam.combiners.Count.Globally()
    return p.run().wait_until_finish()


def test_the_job_server_runs_the_next_job_after_its_driver_jvm_died(tmp_path):
    import signal
    import time

    log = open(tmp_path / "server.log", "w+")
    server = subprocess.Popen(
        [sys.executable, "-m", "beam_spark_runner.job_server", "--port", "0", "--spark_master", "local[1]"],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    try:
        line = server.stdout.readline()
        assert "listening on" in line, line
        endpoint = "localhost:%s" % line.rsplit(":", 1)[1].strip()

        def server_log():
            log.flush()
            with open(tmp_path / "server.log") as f:
                return f.read()[-5000:]

        assert _count_through(endpoint, 10) == "DONE", server_log()
        jvms = _spark_jvms(server.pid)
        assert len(jvms) == 1, (jvms, server_log())
        os.kill(jvms[0], signal.SIGKILL)
        time.sleep(1)
        assert _count_through(endpoint, 20) == "DONE", server_log()
        assert _spark_jvms(server.pid) and jvms[0] not in _spark_jvms(server.pid), server_log()
        assert "Spark's driver JVM is gone" in server_log()
    finally:
        server.terminate()
        server.wait(30)
        log.close()
