"""An attached Java worker (a JVM another Python worker of the executor
owns) that was retired and closed, because its owner or JVM had gone,
still lets the stages registered through it be closed: a streaming
operator evicted from the operator cache in a later job's task closes its
stage then, and that must not fail the later job's bundle."""

import os

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
