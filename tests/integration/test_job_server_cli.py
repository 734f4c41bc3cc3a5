"""`python -m beam_spark_runner.job_server` as a user starts it: its own
process and SparkSession, Beam's PortableRunner (LOOPBACK) and Beam YAML as
clients, listening on localhost only, stopped by SIGTERM."""

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability.portable_runner import PortableRunner
from apache_beam.testing.util import assert_that, equal_to


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    log = tmp_path_factory.mktemp("job-server") / "server.log"
    with open(log, "w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "beam_spark_runner.job_server", "--port=0", "--spark_master=local[2,4]"],
            stdout=subprocess.PIPE,
            stderr=out,
            text=True,
        )
    line = process.stdout.readline()  # printed once the server listens
    assert "listening on localhost:" in line, log.read_text()[-3000:]
    port = int(line.rsplit(":", 1)[1])
    yield process, port, log
    if process.poll() is None:
        process.kill()
        process.wait(30)


def _non_loopback_address():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # no packet is sent: picks the outgoing interface
            return s.getsockname()[0]
        except OSError:
            return None


def test_it_listens_on_localhost_only(server):
    _, port, _ = server
    socket.create_connection(("127.0.0.1", port), timeout=5).close()
    address = _non_loopback_address()
    if address is None or address.startswith("127."):
        pytest.skip("this machine has no non-loopback IPv4 address to probe")
    with pytest.raises(OSError):
        socket.create_connection((address, port), timeout=5).close()


def test_a_portable_runner_pipeline_with_loopback_runs(server):
    _, port, _ = server
    options = PipelineOptions(["--job_endpoint=localhost:%d" % port, "--environment_type=LOOPBACK"])
    with beam.Pipeline(runner=PortableRunner(), options=options) as p:
        words = p | beam.Create(["to be or not to be"]) | beam.FlatMap(str.split)
        assert_that(words | beam.combiners.Count.PerElement(), equal_to([("to", 2), ("be", 2), ("or", 1), ("not", 1)]))


def test_a_beam_yaml_pipeline_runs_through_the_service(server, tmp_path):
    _, port, _ = server
    out = tmp_path / "out"
    spec = tmp_path / "pipeline.yaml"
    spec.write_text(
        textwrap.dedent(
            """
            pipeline:
              type: chain
              transforms:
                - type: Create
                  config:
                    elements: [{word: a}, {word: b}, {word: a}]
                - type: Combine
                  config:
                    group_by: word
                    combine:
                      n:
                        value: word
                        fn: count
                - type: MapToFields
                  config:
                    language: python
                    fields:
                      line: "word + '=' + str(n)"
                - type: WriteToText
                  config:
                    path: %s
            """
            % out
        )
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "apache_beam.yaml.main",
            "--yaml_pipeline_file=%s" % spec,
            "--runner=PortableRunner",
            "--job_endpoint=localhost:%d" % port,
            "--environment_type=LOOPBACK",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    lines = sorted(
        line.strip() for name in os.listdir(tmp_path) if name.startswith("out") for line in open(tmp_path / name)
    )
    assert lines == ["a=2", "b=1"]


def test_sigterm_stops_it(server):
    process, _, log = server
    process.send_signal(signal.SIGTERM)
    deadline = time.time() + 60
    while process.poll() is None and time.time() < deadline:
        time.sleep(0.5)
    assert process.returncode == 0, log.read_text()[-3000:]
