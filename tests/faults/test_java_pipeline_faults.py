"""A streaming Beam Java pipeline through the job service under a driver
kill: examples/java/wordcount's TickCounts (Beam Java's PeriodicSequence,
a Java splittable DoFn, ticking every 200 ms from a second after the first
run's first bundle -> 5-second windows -> a Java
stateful DoFn counting each key in a ValueState and writing the count from
an event-time timer at the window's end), submitted by Beam Java's
PortableRunner with `--streaming` and the runner's `--checkpointDir`. The
job server, which is the pipeline's driver, is SIGKILLed (its process
group: its Spark JVM and the Java SDK harnesses) at a seeded moment while
ticks arrive; a fresh job server is started and the client submits the
pipeline again with the same options. The resumed run ends after the last
tick with every (key, window) holding the count of its ticks: the Java
DoFn's state and timers were neither lost nor applied twice."""

import collections
import glob
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from tests import java_example

TICKS = 200  # every 200 ms: 40 s of ticks, 5-second windows
INTERVAL_MS = 200
RUN_TIMEOUT_S = 600  # a hung run, not a slow one: every wait ends once its condition holds

pytestmark = pytest.mark.timeout(1500)


class _Driver:
    """A job server in its own process group and the Java client that
    submitted the pipeline to it."""

    def __init__(self, workdir, project, args):
        os.makedirs(workdir)
        self.log = os.path.join(workdir, "server.log")
        with open(self.log, "w") as err:
            self.server = subprocess.Popen(
                [sys.executable, "-m", "beam_spark_runner.job_server", "--port=0", "--spark_master=local[2,4]"],
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                start_new_session=True,
                env=dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p)),
            )
        line = self.server.stdout.readline()  # printed once the server listens
        assert "listening on localhost:" in line, self.tail()
        port = int(line.rsplit(":", 1)[1])
        self.client_log = os.path.join(workdir, "client.log")
        with open(self.client_log, "w") as out:
            self.client = subprocess.Popen(
                java_example.java_command(
                    project,
                    "org.example.TickCounts",
                    "--runner=PortableRunner",
                    "--jobEndpoint=localhost:%d" % port,
                    *args,
                ),
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def alive(self):
        return self.server.poll() is None and self.client.poll() is None

    def tail(self):
        text = ""
        for path in (self.log, getattr(self, "client_log", None)):
            if path and os.path.exists(path):
                with open(path, errors="replace") as f:
                    text += "\n--- %s\n%s" % (path, f.read()[-3000:])
        return text

    def kill(self):
        try:
            os.killpg(self.server.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.server.wait()
        self.client.kill()
        self.client.wait()


def _counts(out):
    found = {}
    for path in glob.glob(os.path.join(out, "*.txt")):
        key, start = os.path.basename(path)[: -len(".txt")].split("-")
        with open(path) as f:
            found[(key, int(start))] = int(f.read())
    return found


def test_a_killed_job_server_running_a_java_stateful_dofn_resumes_with_every_count_exact(tmp_path):
    project = java_example.build(tmp_path / "build")
    out = str(tmp_path / "counts")
    rng = random.Random(20261203)
    start_file = str(tmp_path / "start")
    args = [
        "--streaming",
        "--startFile=" + start_file,
        "--ticks=%d" % TICKS,
        "--output=" + out,
        "--checkpointDir=file://" + str(tmp_path / "checkpoint"),
    ]
    driver = _Driver(str(tmp_path / "run0"), project, args)
    try:
        deadline = time.time() + RUN_TIMEOUT_S
        while not _counts(out):
            assert driver.alive(), "the first run ended: %s" % driver.tail()
            assert time.time() < deadline, "the first run wrote no count: %s" % driver.tail()
            time.sleep(0.2)
        time.sleep(rng.uniform(0.2, 1.5))
        assert driver.alive(), "the first run ended before its kill: %s" % driver.tail()
    finally:
        driver.kill()
    with open(start_file) as f:
        start_ms = int(f.read())
    # PeriodicSequence ticks from its first to its last instant, both included.
    expected = collections.Counter(
        ("k%d" % ((start_ms + i * INTERVAL_MS) // INTERVAL_MS % 3), (start_ms + i * INTERVAL_MS) // 5000 * 5000)
        for i in range(TICKS + 1)
    )
    written_at_kill = _counts(out)
    assert written_at_kill and written_at_kill != expected, "killed too late to show a restart"
    driver = _Driver(str(tmp_path / "run1"), project, args)
    try:
        driver.client.wait(timeout=RUN_TIMEOUT_S)
        assert driver.client.returncode == 0, "the resumed run failed: %s" % driver.tail()
        assert _counts(out) == expected
    finally:
        driver.kill()
