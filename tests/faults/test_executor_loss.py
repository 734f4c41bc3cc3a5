"""An executor JVM is SIGKILLed mid-stream on a Spark standalone cluster
(executor loss). The streaming pipeline of
tests/faults/executor_loss_pipeline.py runs in a fresh Python process
against the cluster of tests/integration/test_standalone_cluster.py (a
master and 2 workers of 1 core each, 127.0.0.1 only), with its checkpoint
in a temp dir. Once its first output is published, one of the
application's executors (a `CoarseGrainedExecutorBackend` JVM, child of a
worker, found in /proc by its --app-id; preferably one running tasks, as
the driver's REST API tells) is SIGKILLed while the pipeline runs and
output is still to come. Spark reschedules what it lost (the task retried
elsewhere, the master launches a replacement executor) and the run
finishes with exact output: Beam's `WriteToText` published every (key,
seq) once, and the counts kept per key and window (CombinePerKey) are
exactly those of the ticks.

The ticks' times are picked by the driver once its executors run (see the
pipeline's docstring): how long the first micro-batch takes depends on the
machine's load, and the ticks must outlast it for the kill to land
mid-stream.
"""

import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid

import pytest

from tests.faults import executor_loss_pipeline as pipeline
from tests.faults.injection import sequence_problems
from tests.integration.test_standalone_cluster import HOST, REPO_ROOT, StandaloneCluster, _free_port, _tail

NUM_WORKERS = 2
LEAD_S = 4  # ticks start before the query: its first batch has data
# Ticks end this long after the application is ready, at least; on a busy
# machine STARTUP_FACTOR times the driver's start-up (the first micro-batch
# is about as slow: the kill must come before the last ticks are published).
STREAM_S = 30
STARTUP_FACTOR = 3
MAX_STREAM_S = 100
APP_READY_TIMEOUT_S = 150
FIRST_OUTPUT_AFTER_STOP_S = 30
BUSY_EXECUTOR_WAIT_S = 10
PID_GONE_TIMEOUT_S = 10
REPLACEMENT_TIMEOUT_S = 30
APP_LISTED_TIMEOUT_S = 30
PIPELINE_TIMEOUT_S = 120
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"

pytestmark = [
    pytest.mark.skipif(
        shutil.which("java") is None and not os.environ.get("JAVA_HOME"), reason="a Spark standalone cluster needs Java"
    ),
    pytest.mark.timeout(360),  # 2.7-3.5 min measured with load 7-10 on 2 cores
]


@pytest.fixture(autouse=True)
def _spark():
    """Overrides tests/faults/conftest.py: the pipeline runs in its own
    process, this test needs no SparkSession of its own."""
    return None


@pytest.fixture
def cluster(tmp_path):
    c = StandaloneCluster(str(tmp_path / "spark"), NUM_WORKERS)
    try:
        c.start()
        yield c
    finally:
        c.stop()


def _published(prefix):
    """Published (not staged) files of a WriteToText with this prefix."""
    return [p for p in glob.glob(prefix + "-*") if os.path.isfile(p)]


def _lines(paths):
    lines = []
    for path in paths:
        with open(path) as f:
            lines.extend(f.read().splitlines())
    return lines


def _executor_pids(app_id, worker_groups):
    """{executor id: pid} of the app's executor JVMs, children of our workers."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % entry, "rb") as f:
                args = f.read().decode(errors="replace").split("\0")
            group = os.getpgid(int(entry))
        except (OSError, ProcessLookupError):
            continue
        if EXECUTOR_CLASS not in args or group not in worker_groups:
            continue
        options = dict(zip(args, args[1:]))
        if options.get("--app-id") == app_id and "--executor-id" in options:
            found[options["--executor-id"]] = int(entry)
    return found


def _is_gone(pid):
    """The process exited (and its worker reaped it, or it is a zombie)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _busy_executors(ui_port, app_id):
    """Ids of the executors the driver sees running tasks ([] when its UI does not answer)."""
    url = "http://%s:%d/api/v1/applications/%s/executors" % (HOST, ui_port, app_id)
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            executors = json.load(response)
    except (urllib.error.URLError, OSError, ValueError):
        return []
    return [e["id"] for e in executors if e.get("id") != "driver" and e.get("activeTasks", 0) > 0]


def _poll(condition, timeout_s, interval_s=0.25):
    """condition() until it is truthy or the deadline passed; its last value."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = condition()
        if result or time.monotonic() >= deadline:
            return result
        time.sleep(interval_s)


def test_streaming_output_is_exact_after_an_executor_is_killed(cluster, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    driver_dir = tmp_path / "driver"  # the driver's cwd: nothing lands in the repo
    driver_dir.mkdir()
    app_name = "beam-executor-loss-%s" % uuid.uuid4().hex[:12]
    ui_port = _free_port()
    times_path = tmp_path / "times.json"
    cmd = [
        sys.executable,
        pipeline.__file__,
        "--output",
        str(out),
        "--times_out",
        str(times_path),
        "--lead=%d" % LEAD_S,
        "--duration=%d" % STREAM_S,
        "--startup_factor=%g" % STARTUP_FACTOR,
        "--max_duration=%d" % MAX_STREAM_S,
        "--executors=%d" % NUM_WORKERS,
        "--runner=beam_spark_runner.SparkRunner",
        "--streaming",
        "--checkpoint_dir=%s" % (tmp_path / "checkpoint"),
        "--spark_master=%s" % cluster.url,
        "--spark_app_name=%s" % app_name,
        "--parallelism=2",
        "--spark_conf=spark.executor.memory=512m",
        "--spark_conf=spark.executor.cores=1",
        "--spark_conf=spark.driver.host=%s" % HOST,
        "--spark_conf=spark.driver.bindAddress=%s" % HOST,
        "--spark_conf=spark.ui.port=%d" % ui_port,
        "--spark_conf=spark.executorEnv.PYTHONPATH=%s" % REPO_ROOT,
    ]
    log_path = tmp_path / "pipeline.log"
    worker_groups = {proc.pid for name, proc, _ in cluster.procs if name.startswith("worker")}

    def details():
        return "pipeline log:\n%s\n%s" % (_tail(str(log_path), 80), cluster.logs())

    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd,
            cwd=str(driver_dir),
            env=cluster.env(),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        # The application runs on its executors: the ticks' times are picked.
        _poll(lambda: proc.poll() is not None or times_path.exists(), APP_READY_TIMEOUT_S)
        assert proc.poll() is None, "the pipeline ended (rc %s) before the kill\n%s" % (proc.returncode, details())
        assert times_path.exists(), "the application was not ready within %ds\n%s" % (APP_READY_TIMEOUT_S, details())
        times = json.loads(times_path.read_text())
        start, stop = times["start"], times["stop"]
        ticks = int((stop - start) / pipeline.INTERVAL)
        # Its first output is published.
        wait_s = stop + FIRST_OUTPUT_AFTER_STOP_S - time.time()
        first = _poll(lambda: proc.poll() is not None or _published(str(out / "ticks")), wait_s)
        assert proc.poll() is None, "the pipeline ended (rc %s) before the kill\n%s" % (proc.returncode, details())
        assert first, "no output published within %ds\n%s" % (wait_s, details())
        apps = cluster.wait_until(
            lambda state: [a for a in state.get("activeapps", []) if a.get("name") == app_name],
            APP_LISTED_TIMEOUT_S,
            "application %r in the master's JSON" % app_name,
        )
        assert len(apps) == 1, apps
        app_id = apps[0]["id"]
        executors = _executor_pids(app_id, worker_groups)
        assert len(executors) == NUM_WORKERS, "executors of %s: %s\n%s" % (app_id, executors, details())

        # Kill one executor, preferably one that runs tasks right now.
        busy = _poll(lambda: [e for e in _busy_executors(ui_port, app_id) if e in executors], BUSY_EXECUTOR_WAIT_S)
        victim = busy[0] if busy else sorted(executors)[0]
        pid = executors[victim]
        published_at_kill = len(_lines(_published(str(out / "ticks"))))
        assert proc.poll() is None, "the pipeline ended (rc %s) before the kill\n%s" % (proc.returncode, details())
        os.kill(pid, signal.SIGKILL)
        killed_at = time.time()
        assert _poll(lambda: _is_gone(pid), PID_GONE_TIMEOUT_S), "executor %s (pid %d) still alive" % (victim, pid)
        assert proc.poll() is None, "the pipeline ended (rc %s) as the executor died\n%s" % (proc.returncode, details())
        # Mid-stream: later batches still had data to process and publish.
        assert published_at_kill < ticks, "killed too late: every tick was published before the kill"

        # The master launches a replacement executor for the application.
        replacement = _poll(lambda: set(_executor_pids(app_id, worker_groups)) - set(executors), REPLACEMENT_TIMEOUT_S)
        assert replacement, "no executor replaced %s\n%s" % (victim, details())

        try:
            returncode = proc.wait(timeout=PIPELINE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pytest.fail("pipeline did not finish within %ds after the kill\n%s" % (PIPELINE_TIMEOUT_S, details()))
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # a driver left behind, and its Spark JVM
        except ProcessLookupError:
            pass
        proc.wait(timeout=10)
    assert returncode == 0, "pipeline exited with %s\n%s" % (returncode, details())

    log_text = log_path.read_text(errors="replace")
    print(
        "start-up %ss; killed executor %s (pid %d, %s) of %s %.1fs after the application was ready, "
        "%.1fs before the ticks ended, "
        "with %d of %d ticks published; replaced by %s; driver log: %s"
        % (
            times["startup_s"],
            victim,
            pid,
            "running tasks" if busy else "idle as far as the driver's UI showed",
            app_id,
            killed_at - start - LEAD_S,
            stop - killed_at,
            published_at_kill,
            ticks,
            sorted(replacement),
            "; ".join(
                sorted(
                    set(re.findall(r"(Lost executor \S+|Lost task [\d.]+ in stage [\d.]+|Resubmitted \w+)", log_text))
                )
            ),
        )
    )
    pairs = [(key, int(seq)) for key, seq in (line.split(",") for line in _lines(_published(str(out / "ticks"))))]
    keys = ["k%d" % i for i in range(pipeline.KEYS)]
    problems = sequence_problems(pairs, keys, ticks // pipeline.KEYS)
    assert not problems, "ticks after the executor loss: %s" % "; ".join(problems)
    assert sorted(_lines(_published(str(out / "counts")))) == pipeline.expected_counts(start, stop)
    leftovers = [d for d in os.listdir(out) if d.startswith("beam-temp-")]
    assert not leftovers, leftovers
