"""Beam's Java SDK harness as the runner starts it (worker/java_harness.py):
a JVM that cannot start, or that dies, gives a clear error naming the
harness and what the JVM printed, never a hang; a healthy one is reused."""

import json
import os
import subprocess
import sys
import tempfile
import uuid

import apache_beam as beam
import pytest
from apache_beam.io.kafka import WriteToKafka
from apache_beam.options.pipeline_options import PipelineOptions

from beam_spark_runner import SparkRunner
from beam_spark_runner.cross_language.java_sdk import BEAM_JAVA_VERSION, harness_jars
from beam_spark_runner.maven_jars import resolve
from beam_spark_runner.result import PipelineExecutionError
from beam_spark_runner.worker import java_harness
from apache_beam.portability.api import beam_fn_api_pb2
from tests import services

pytestmark = pytest.mark.timeout(600)


def test_a_jvm_that_cannot_start_names_its_exit_code_and_output(tmp_path, monkeypatch):
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text("#!/bin/sh\necho 'Error: broken JVM for the test' >&2\nexit 3\n")
    java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(home))
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    with pytest.raises(java_harness.JavaHarnessError) as e:
        java_harness.JavaWorker(["/nowhere/harness.jar"])
    message = str(e.value)
    assert "never opened its control stream" in message and "exit code 3" in message
    assert "broken JVM for the test" in message and java_harness.FN_HARNESS_MAIN in message
    # The JVM's log was read into the error, then removed with the worker.
    assert list(scratch.iterdir()) == []


def test_a_harness_that_dies_fails_what_waits_on_it():
    classpath = resolve(harness_jars(BEAM_JAVA_VERSION))
    worker = java_harness.JavaWorker(classpath)
    try:
        assert worker.alive()
        worker._process.kill()
        worker._process.wait(30)
        future = worker.control.push(
            beam_fn_api_pb2.InstructionRequest(
                instruction_id="after-death",
                process_bundle=beam_fn_api_pb2.ProcessBundleRequest(process_bundle_descriptor_id="none"),
            )
        )
        with pytest.raises(java_harness.JavaHarnessError, match="died"):
            future.result(timeout=60)
    finally:
        worker.close()
    # The next stage of this process starts a new JVM.
    again = java_harness.java_worker(classpath)
    assert again is not worker and again.alive()


def test_a_jobs_harness_gets_its_options_and_the_next_jobs_options_replace_its_jvm():
    """The harness reads the job's options when it starts: a job with other
    options gets a JVM of its own, and the previous job's JVM for the same
    jars is stopped rather than kept for the life of the Python worker."""
    classpath = resolve(harness_jars(BEAM_JAVA_VERSION))
    first = java_harness.java_worker(classpath, (), '{"beam:option:job_name:v1": "first"}')
    try:
        assert java_harness.java_worker(classpath, (), '{"beam:option:job_name:v1": "first"}') is first
        second = java_harness.java_worker(classpath, (), '{"beam:option:job_name:v1": "second"}')
        assert second is not first and second.alive()
        assert not first.alive()
        # The stopped JVM's log directory goes with it: a Python worker
        # outlives many jobs.
        assert not os.path.exists(first._log_dir) and os.path.isdir(second._log_dir)
        with open("/proc/%d/environ" % second._process.pid, "rb") as f:
            environ = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
        assert environ[b"PIPELINE_OPTIONS"] == b'{"beam:option:job_name:v1": "second"}'
        # A JVM in which a stage is still registered (an attached Python
        # worker's running task, a streaming operator kept between
        # micro-batches) is kept: its job may still be running.
        stage = beam_fn_api_pb2.ProcessBundleDescriptor(id="a-stage-of-an-attached-worker")
        second.register(stage)
        third = java_harness.java_worker(classpath, (), '{"beam:option:job_name:v1": "third"}')
        assert second.alive() and third.alive()
        # Once its stages are gone (their job ended), it is stopped at the
        # Python worker's next use of a JVM, whichever.
        second.unregister(stage.id)
        assert java_harness.java_worker(classpath, (), '{"beam:option:job_name:v1": "third"}') is third
        assert not second.alive() and third.alive()
    finally:
        java_harness._stop_workers()


def test_a_java_stage_whose_harness_fails_on_every_attempt_fails_the_run_naming_it(request):
    services.require(request, services.KAFKA)
    topic = "xlang-crash-" + uuid.uuid4().hex[:8]
    options = PipelineOptions(["--spark_master=local[2,4]", "--java_harness_jvm_options=-Xmx1k"])
    p = beam.Pipeline(runner=SparkRunner(), options=options)
    (
        p
        | beam.Create([(b"k", b"v")]).with_output_types(tuple[bytes, bytes])
        | WriteToKafka(producer_config={"bootstrap.servers": services.KAFKA}, topic=topic)
    )
    result = p.run()
    with pytest.raises(PipelineExecutionError) as e:
        result.wait_until_finish()
    message = str(e.value)
    assert "Java SDK harness" in message and "heap" in message.lower(), message[-3000:]
    assert result.state == "FAILED"


def test_the_next_jvm_for_the_same_jars_maps_the_class_archive_the_first_wrote(tmp_path, monkeypatch):
    classpath = resolve(harness_jars(BEAM_JAVA_VERSION))
    monkeypatch.setenv("BEAM_SPARK_CACHE_DIR", str(tmp_path))  # the jars stay where they are
    first = java_harness.JavaWorker(classpath)
    first.close()
    archives = [p for p in (tmp_path / "java-class-archives").iterdir()]
    assert [p.suffix for p in archives] == [".jsa"], archives
    second = java_harness.JavaWorker(classpath)
    try:
        assert second.alive()
        with open("/proc/%d/maps" % second._process.pid) as f:
            assert str(archives[0]) in f.read()
    finally:
        second.close()


class _WorkerStandIn:
    """tests/shared_jvm_process.py in a process of its own: a child of this
    process, as an executor's Python workers are children of one."""

    def __init__(self, job_name):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.shared_jvm_process", job_name],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
        )

    def run_bundle(self):
        self.process.stdin.write("run\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        assert line, "the stand-in worker exited (exit code %s)" % self.process.wait(60)
        return json.loads(line)

    def stop(self):
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(60)


def test_the_python_workers_of_an_executor_share_one_jvm_and_a_dead_owners_jvm_is_replaced():
    """The second Python worker of an executor that runs the same job's
    Java bundles attaches to the JVM the first started: its bundle runs
    there, its data and state served by itself. When the JVM's owner is
    killed, the attached worker's next bundle starts a JVM of its own."""
    job_name = "shared-jvm-" + uuid.uuid4().hex[:8]
    owner, attached = _WorkerStandIn(job_name), _WorkerStandIn(job_name)
    try:
        first = owner.run_bundle()
        assert first.get("worker") == "JavaWorker", first
        assert first["error"] == "" and first["received"] == first["sent"], first
        second = attached.run_bundle()
        assert second.get("worker") == "AttachedJavaWorker", second
        assert second["jvm_pid"] == first["jvm_pid"]
        assert second["error"] == "" and second["received"] == second["sent"] and len(second["sent"]) == 3, second
        owner.process.kill()
        owner.process.wait(60)
        third = attached.run_bundle()
        assert third.get("worker") == "JavaWorker", third
        assert third["jvm_pid"] != first["jvm_pid"]
        assert third["error"] == "" and third["received"] == third["sent"] and len(third["sent"]) == 4, third
    finally:
        owner.stop()
        attached.stop()


def test_the_driver_finalizes_a_java_bundle_through_its_jvms_owner_and_only_that_jvm(monkeypatch):
    """A Java bundle's finalization is a picklable request the driver sends
    once the bundle's output is committed (worker/java_finalization.py): it
    reaches the JVM's owner on the executor's host address; a request
    carrying another JVM's token is refused, and one for a JVM that is gone
    fails naming the bundle and the endpoint (the driver logs it)."""
    import pickle

    import grpc

    from beam_spark_runner.worker.java_finalization import FinalizationFailed, JavaBundleFinalization, executor_host

    worker = java_harness.JavaWorker(resolve(harness_jars(BEAM_JAVA_VERSION)))
    try:
        assert worker.finalization_url.rsplit(":", 1)[0] == executor_host()
        finalization = JavaBundleFinalization(worker.finalization_url, worker.finalization_token, "bundle-1")
        pickle.loads(pickle.dumps(finalization))()  # no callbacks registered: the JVM answers, nothing runs
        with pytest.raises(FinalizationFailed, match="no such Java SDK harness JVM here"):
            JavaBundleFinalization(worker.finalization_url, "another-jvm", "bundle-1")()
    finally:
        worker.close()
    with pytest.raises(
        FinalizationFailed, match="bundle-1 was not finalized: .* %s cannot be reached" % worker.finalization_url
    ):
        finalization()
    # Another callback of the same JVM fails without trying to connect again
    # (a restarted run's pending records hold many).
    with monkeypatch.context() as patched:
        patched.setattr(grpc, "insecure_channel", lambda *a, **k: pytest.fail("connected to a JVM known to be gone"))
        with pytest.raises(FinalizationFailed, match="bundle-2 was not finalized"):
            JavaBundleFinalization(worker.finalization_url, worker.finalization_token, "bundle-2")()
