"""The pipeline's own code reaches a real cluster's executors:
on a Spark standalone cluster (master + 2 workers, tests/integration/
test_standalone_cluster.py), a DoFn needs a module that exists only in the
submitting directory and a package given with --extra_packages, which no
worker has. Run with SparkRunner from that directory, and through the job
server (its own process, another working directory) by a PortableRunner
client with LOOPBACK, the module then packaged with --setup_file."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from tests.integration.test_standalone_cluster import (  # noqa: F401 -- the fixture
    HOST,
    _signal_group,
    _tail,
    cluster,
    pytestmark,
)
from tests.wheels import make_wheel

TIMEOUT_S = 240

SIBLING = """
def tag(x):
    import greetlib_on_cluster  # from --extra_packages: no worker has it

    return greetlib_on_cluster.greet(x) + "!"
"""

SCRIPT = """
import sys

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

import cluster_sibling  # exists only in this directory

output, args = sys.argv[1], sys.argv[2:]
with beam.Pipeline(options=PipelineOptions(args)) as p:
    _ = p | beam.Create(["a", "b", "c"]) | beam.Map(cluster_sibling.tag) | beam.io.WriteToText(output)
"""

SETUP = """
from setuptools import setup

setup(name="cluster-sibling", version="0.1", py_modules=["cluster_sibling"])
"""

SPARK_CONF = [
    "spark.executor.memory=512m",
    "spark.executor.cores=1",
    "spark.driver.host=%s" % HOST,
    "spark.driver.bindAddress=%s" % HOST,
    "spark.ui.port=0",
]


def _submitting_dir(tmp_path):
    directory = tmp_path / "submit"
    directory.mkdir()
    (directory / "cluster_sibling.py").write_text(textwrap.dedent(SIBLING))
    (directory / "pipeline.py").write_text(textwrap.dedent(SCRIPT))
    (directory / "setup.py").write_text(textwrap.dedent(SETUP))
    wheel = make_wheel(
        str(tmp_path),
        "greetlib_on_cluster",
        "0.1",
        {"greetlib_on_cluster/__init__.py": "def greet(x):\n    return 'hello-' + x\n"},
    )
    return directory, wheel


def _env(cluster):
    env = cluster.env()
    env.pop("PYTHONPATH")  # the workers' path must not hold the submitting directory
    return env


def _run(cmd, cwd, env, log_path):
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd, cwd=str(cwd), env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            return proc.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            _signal_group(proc, signal.SIGKILL)
            proc.wait(timeout=10)
            pytest.fail("%s did not finish within %ds\n%s" % (cmd[1], TIMEOUT_S, _tail(str(log_path), 80)))


def _output(prefix):
    directory, base = os.path.split(prefix)
    lines = []
    for name in sorted(os.listdir(directory)):
        if name.startswith(base):
            with open(os.path.join(directory, name)) as f:
                lines.extend(f.read().splitlines())
    return sorted(lines)


def test_spark_runner_ships_the_sibling_module_and_the_package(cluster, tmp_path):
    submit, wheel = _submitting_dir(tmp_path)
    output = str(tmp_path / "out" / "tagged")
    cmd = [
        sys.executable,
        "pipeline.py",
        output,
        "--runner=beam_spark_runner.SparkRunner",
        "--spark_master=%s" % cluster.url,
        "--extra_packages=%s" % wheel,
    ] + ["--spark_conf=%s" % c for c in SPARK_CONF]
    log = tmp_path / "driver.log"
    assert _run(cmd, submit, _env(cluster), log) == 0, _tail(str(log), 80) + cluster.logs()
    assert _output(output) == ["hello-a!", "hello-b!", "hello-c!"]


def test_the_job_server_ships_staged_packages_to_the_cluster(cluster, tmp_path):
    submit, wheel = _submitting_dir(tmp_path)
    server_dir = tmp_path / "server"
    server_dir.mkdir()
    server_log = open(tmp_path / "server.log", "wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "beam_spark_runner.job_server", "--port=0", "--spark_master=%s" % cluster.url]
        + ["--spark_conf=%s" % c for c in SPARK_CONF],
        cwd=str(server_dir),
        env=_env(cluster),
        stdout=subprocess.PIPE,
        stderr=server_log,
        text=True,
        start_new_session=True,
    )
    try:
        line = server.stdout.readline()
        assert "listening on" in line, _tail(str(tmp_path / "server.log"), 80)
        port = int(line.rsplit(":", 1)[1])
        output = str(tmp_path / "out" / "tagged")
        cmd = [
            sys.executable,
            "pipeline.py",
            output,
            "--runner=PortableRunner",
            "--job_endpoint=localhost:%d" % port,
            "--environment_type=LOOPBACK",
            "--extra_packages=%s" % wheel,
            "--setup_file=./setup.py",
        ]
        log = tmp_path / "client.log"
        code = _run(cmd, submit, _env(cluster), log)
        assert code == 0, _tail(str(log), 80) + _tail(str(tmp_path / "server.log"), 80)
        assert _output(output) == ["hello-a!", "hello-b!", "hello-c!"]
    finally:
        _signal_group(server, signal.SIGTERM)
        server.wait(60)
