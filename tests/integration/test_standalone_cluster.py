"""A Beam pipeline on a real Spark standalone cluster (master + 2 workers).

The cluster is started from the scripts shipped inside the pyspark package,
on 127.0.0.1 only, with its work and log dirs in a temp dir. The pipeline
runs in a fresh Python process (this process already holds the local
SparkContext of tests/conftest.py, and a process may have only one). The
test checks the exact output, that the master ran the application, and
that the Beam metrics reached the Spark UI through the cluster's executors,
and that what a DoFn logged in the executors reached the driver's logging.
"""

import contextlib
import glob
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid

import pytest

from tests.integration import standalone_pipeline

HOST = "127.0.0.1"
NUM_WORKERS = 2
CLUSTER_START_TIMEOUT_S = 90
PIPELINE_TIMEOUT_S = 240
APP_LISTED_TIMEOUT_S = 30
STOP_TIMEOUT_S = 15

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PIPELINE_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "standalone_pipeline.py")

pytestmark = [
    pytest.mark.skipif(
        shutil.which("java") is None and not os.environ.get("JAVA_HOME"), reason="a Spark standalone cluster needs Java"
    ),
    pytest.mark.timeout(420),
]


def _free_port():
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _tail(path, lines=40):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError as e:
        return "(cannot read %s: %s)" % (path, e)


class StandaloneCluster:
    """A Spark standalone master and workers, each in its own process group."""

    def __init__(self, base_dir, num_workers):
        import pyspark

        self.spark_home = os.path.dirname(os.path.abspath(pyspark.__file__))
        self.spark_class = os.path.join(self.spark_home, "bin", "spark-class")
        self.base_dir = base_dir
        self.num_workers = num_workers
        self.port = _free_port()
        self.webui_port = _free_port()
        self.url = "spark://%s:%d" % (HOST, self.port)
        self.json_url = "http://%s:%d/json/" % (HOST, self.webui_port)
        self.work_dir = os.path.join(base_dir, "work")
        self.log_dir = os.path.join(base_dir, "logs")
        os.makedirs(self.work_dir)
        os.makedirs(self.log_dir)
        self.procs = []  # (name, Popen, log path)

    def env(self):
        env = dict(os.environ)
        env.update(
            {
                "SPARK_HOME": self.spark_home,
                "SPARK_LOCAL_IP": HOST,
                "SPARK_WORKER_DIR": self.work_dir,
                "SPARK_LOG_DIR": self.log_dir,
                "SPARK_PID_DIR": self.base_dir,
                "SPARK_NO_DAEMONIZE": "1",
                # Executors' Python workers run this interpreter and find this repo.
                "PYSPARK_PYTHON": sys.executable,
                "PYTHONHASHSEED": "0",
                "PYTHONPATH": os.pathsep.join(p for p in (REPO_ROOT, os.environ.get("PYTHONPATH")) if p),
            }
        )
        for key in ("SPARK_CONF_DIR", "MASTER", "SPARK_MASTER_HOST", "SPARK_MASTER_PORT"):
            env.pop(key, None)
        return env

    def _spawn(self, name, args):
        log_path = os.path.join(self.log_dir, name + ".out")
        log = open(log_path, "wb")
        try:
            proc = subprocess.Popen(
                [self.spark_class] + args,
                cwd=self.base_dir,
                env=self.env(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # own process group: killpg stops its executors too
        finally:
            log.close()
        self.procs.append((name, proc, log_path))
        return proc

    def start(self):
        self._spawn(
            "master",
            [
                "org.apache.spark.deploy.master.Master",
                "--host",
                HOST,
                "--port",
                str(self.port),
                "--webui-port",
                str(self.webui_port),
            ],
        )
        for i in range(self.num_workers):
            self._spawn(
                "worker%d" % i,
                [
                    "org.apache.spark.deploy.worker.Worker",
                    "--host",
                    HOST,
                    "--cores",
                    "1",
                    "--memory",
                    "1g",
                    "--webui-port",
                    str(_free_port()),
                    "--work-dir",
                    self.work_dir,
                    self.url,
                ],
            )
        self.wait_until(
            lambda state: (
                state if sum(w.get("state") == "ALIVE" for w in state.get("workers", [])) >= self.num_workers else None
            ),
            CLUSTER_START_TIMEOUT_S,
            "%d ALIVE workers at %s" % (self.num_workers, self.url),
        )

    def state(self):
        """The master's JSON status, or None while it does not answer."""
        try:
            with urllib.request.urlopen(self.json_url, timeout=5) as response:
                return json.loads(response.read().decode("utf-8"))
        except (urllib.error.URLError, OSError, ValueError):
            return None

    def wait_until(self, condition, timeout_s, what):
        """Polls the master's JSON until condition(state) is truthy; returns it."""
        deadline = time.monotonic() + timeout_s
        state = None
        while time.monotonic() < deadline:
            for name, proc, _ in self.procs:
                if proc.poll() is not None:
                    pytest.fail(
                        "Spark %s exited with %s while waiting for %s\n%s" % (name, proc.returncode, what, self.logs())
                    )
            state = self.state()
            if state is not None:
                result = condition(state)
                if result:
                    return result
            time.sleep(0.5)
        pytest.fail(
            "Timed out after %ds waiting for %s; last master state: %s\n%s"
            % (timeout_s, what, json.dumps(state)[:2000] if state else "no answer from %s" % self.json_url, self.logs())
        )

    def logs(self):
        return "\n".join("--- %s (%s) ---\n%s" % (name, path, _tail(path)) for name, _, path in self.procs)

    def stop(self):
        """SIGTERM each process group, then SIGKILL what is left; bounded."""
        for _, proc, _ in reversed(self.procs):
            _signal_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for _, proc, _ in reversed(self.procs):
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            # Also kills executors the worker left behind in its group.
            _signal_group(proc, signal.SIGKILL)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass


def _signal_group(proc, sig):
    try:
        os.killpg(proc.pid, sig)  # pgid == pid: started with start_new_session
    except (ProcessLookupError, PermissionError):
        pass


@pytest.fixture
def cluster(tmp_path):
    c = StandaloneCluster(str(tmp_path / "spark"), NUM_WORKERS)
    try:
        c.start()
        yield c
    finally:
        c.stop()


def _input_lines(n=3000, seed=20240611):
    rng = random.Random(seed)
    vocabulary = [
        "%s%s" % (initial, rng.choice(["ark", "ee", "olt", "un", "ix", "ame"]))
        for initial in "abcdefghij"
        for _ in range(4)
    ]
    return [" ".join(rng.choice(vocabulary) for _ in range(rng.randint(0, 12))) for _ in range(n)]


def _read_shards(prefix):
    paths = sorted(glob.glob(prefix + "-*-of-*"))
    assert paths, "no output files %s-*-of-*" % prefix
    lines = []
    for path in paths:
        with open(path) as f:
            lines.extend(line.rstrip("\n") for line in f)
    return sorted(lines)


def test_pipeline_runs_on_standalone_cluster(cluster, tmp_path):
    lines = _input_lines()
    input_path = tmp_path / "input.txt"
    input_path.write_text("\n".join(lines) + "\n")
    output_dir = tmp_path / "output"
    output_dir.mkdir()
    driver_dir = tmp_path / "driver"  # the driver's cwd: nothing lands in the repo
    driver_dir.mkdir()
    app_name = "beam-standalone-test-%s" % uuid.uuid4().hex[:12]

    cmd = [
        sys.executable,
        PIPELINE_SCRIPT,
        "--input",
        str(input_path),
        "--output",
        str(output_dir),
        "--runner=beam_spark_runner.SparkRunner",
        "--spark_master=%s" % cluster.url,
        "--spark_app_name=%s" % app_name,
        "--parallelism=4",
        "--spark_conf=spark.executor.memory=512m",
        "--spark_conf=spark.executor.cores=1",
        "--spark_conf=spark.driver.host=%s" % HOST,
        "--spark_conf=spark.driver.bindAddress=%s" % HOST,
        "--spark_conf=spark.ui.port=0",
        "--ui_metrics_out",
        str(tmp_path / "ui_metrics.json"),
        "--log_out",
        str(tmp_path / "worker_logs.json"),
        "--spark_io",
        "--spark_conf=spark.executorEnv.PYTHONPATH=%s" % REPO_ROOT,
    ]
    log_path = tmp_path / "pipeline.log"
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
            returncode = proc.wait(timeout=PIPELINE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            _signal_group(proc, signal.SIGKILL)
            proc.wait(timeout=10)
            pytest.fail(
                "pipeline did not finish within %ds\n%s\n%s"
                % (PIPELINE_TIMEOUT_S, _tail(str(log_path), 80), cluster.logs())
            )
    assert returncode == 0, "pipeline exited with %s\n%s\n%s" % (returncode, _tail(str(log_path), 80), cluster.logs())

    assert _read_shards(str(output_dir / "counts")) == standalone_pipeline.expected_counts(lines)
    assert _read_shards(str(output_dir / "groups")) == standalone_pipeline.expected_groups(lines)
    # WriteToSpark and ReadFromSpark on the cluster's executors: the counts
    # written as Parquet read back equal; the streaming part published the
    # windowed sums of its JSON directory, each once.
    assert _read_shards(str(output_dir / "roundtrip")) == standalone_pipeline.expected_counts(lines)
    with open(output_dir / "streamed.json") as f:
        streamed = sorted(tuple(r) for r in json.load(f))
    assert streamed == standalone_pipeline.expected_streamed()
    # The runner's UI helper jar reached the cluster's executors: its job
    # lists the word counter in the Spark UI.
    with open(tmp_path / "ui_metrics.json") as f:
        shown = json.load(f)
    user_counters = {name: value for name, value in shown.items() if " standalone:" in name}
    assert user_counters == {"Beam counter Split standalone:words": str(sum(len(line.split()) for line in lines))}
    # What FormatGroups logged in the executors reached the driver's logging
    # (worker/log_forwarding.py), through spark.driver.host.
    with open(tmp_path / "worker_logs.json") as f:
        logs = json.load(f)
    assert sorted(msg for msg, _ in logs["records"]) == sorted(
        "group %s" % group.split(":")[0] for group in standalone_pipeline.expected_groups(lines)
    )
    assert all(pid != logs["driver_pid"] for _, pid in logs["records"])

    # The master ran it: the application is listed (completed once the driver stopped).
    def app_listed(state):
        apps = state.get("completedapps", []) + state.get("activeapps", [])
        return [a for a in apps if a.get("name") == app_name]

    apps = cluster.wait_until(app_listed, APP_LISTED_TIMEOUT_S, "application %r in the master's JSON" % app_name)
    assert len(apps) == 1, apps
    # ...and executors ran on the workers: each writes its logs under the work dir.
    executor_dirs = glob.glob(os.path.join(cluster.work_dir, apps[0]["id"], "*"))
    assert executor_dirs, "no executor directories under %s" % cluster.work_dir
