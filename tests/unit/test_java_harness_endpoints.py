"""The runner's end of a Java harness JVM. An attached Java worker (a JVM
another Python worker of the executor owns) that was retired and closed, because its owner or JVM had gone,
still lets the stages registered through it be closed: a streaming
operator evicted from the operator cache in a later job's task closes its
stage then, and that must not fail the later job's bundle."""

import logging
import os

from apache_beam.portability.api import beam_fn_api_pb2

from beam_spark_runner.worker import grpc_servers, java_harness
from beam_spark_runner.worker.java_jvm_sharing import SharedJvm


def test_a_stage_closed_after_its_attached_worker_was_closed_does_not_fail():
    owner_server, port = grpc_servers.listening_server("127.0.0.1")
    owner_server.start()  # stands in for the owner's relay: the worker only needs to reach it
    try:
        shared = SharedJvm(url="127.0.0.1:%d" % port, owner_pid=os.getpid(), jvm_pid=os.getpid(), worker_id="w")
        worker = java_harness.AttachedJavaWorker(shared, ["harness.jar"])
        worker.close()  # retired: its owner's JVM had gone
        worker.unregister("a-descriptor-registered-before")
    finally:
        owner_server.stop(0)


def _entry(logger, severity, message):
    return beam_fn_api_pb2.LogEntry(log_location=logger, severity=severity, message=message)


def test_the_jvms_log_entries_keep_their_level_but_grpcs_orphaned_channel_reports(caplog):
    """The harness drops its clients of an endpoint that went away without
    closing their channels, and gRPC reports each as an ERROR: re-issued
    at DEBUG. Other entries keep their level."""
    severity = beam_fn_api_pb2.LogEntry.Severity
    entries = [
        _entry(
            "org.apache.beam.vendor.grpc.v1p69p0.io.grpc.internal.ManagedChannelOrphanWrapper",
            severity.ERROR,
            "Previous channel was garbage collected without being shut down!",
        ),
        _entry("org.apache.beam.fn.harness.FnHarness", severity.ERROR, "a real error"),
        _entry("org.apache.beam.fn.harness.FnHarness", severity.WARN, "a warning"),
    ]
    with caplog.at_level(logging.DEBUG):
        list(java_harness._LoggingService().Logging([beam_fn_api_pb2.LogEntry.List(log_entries=entries)], None))
    levels = {r.getMessage(): r.levelno for r in caplog.records}
    assert levels == {
        "Previous channel was garbage collected without being shut down!": logging.DEBUG,
        "a real error": logging.ERROR,
        "a warning": logging.WARNING,
    }
