"""Bundle finalization of a Java stage, once the runner committed the
bundle's output.

Beam's Java SDK harness keeps a bundle's finalization callbacks (a Java
`BundleFinalizer`'s: an unbounded source's checkpoint marks, which
acknowledge messages to their broker) in its JVM until the runner sends a
`FinalizeBundleRequest` naming the bundle. The callbacks cannot leave the
JVM; what leaves is a `JavaBundleFinalization`, a picklable callback that
sends that request, and travels as a Python stage's callbacks do: in
batch to the driver once the task succeeded, run after the Spark job; in
streaming in the micro-batch's FINALIZE rows, run once the batch is a
completed checkpoint (streaming/checkpoint_coordinator.py). So a Java
source acknowledges only what a durable batch holds.

The JVM's owner (worker/java_harness.JavaWorker) serves the request on a
port of its executor's host address (the driver runs the callback, and on
a cluster is on another host), with only this one method, and answers only
for its own JVM (`token`, a random id per JVM): a callback of a JVM that
is gone (its executor ended; a run restarted after its driver was killed,
whose pending checkpoint records still hold the old run's callbacks) fails
to connect, or reaches another process that refuses it, and the callback
raises, which the driver logs, as a failing callback's (Beam's contract:
finalization is best effort, never before the commit).
"""

import dataclasses
import os
import socket

import grpc
from apache_beam.portability.api import beam_fn_api_pb2

SERVICE = "beam_spark_runner.JavaBundleFinalization"
_METHOD = "/%s/Finalize" % SERVICE
_TOKEN_KEY = "beam-spark-jvm-token"
CONNECT_TIMEOUT_S = 5.0
# Endpoints this process could not reach: later callbacks of the same JVM
# (a restarted run's pending records hold many) fail at once, not after
# CONNECT_TIMEOUT_S each.
_UNREACHABLE = set()
# A callback (a broker's acknowledgement) may take a while; a JVM that
# does not answer at all fails the call.
CALL_TIMEOUT_S = 300.0


class FinalizationFailed(RuntimeError):
    """The bundle's callbacks did not run (the JVM is gone) or failed."""


@dataclasses.dataclass(frozen=True)
class JavaBundleFinalization:
    """Finalizes Java bundle `instruction_id` in the JVM whose owner serves
    `endpoint` (host:port) and whose token is `token`; raises
    FinalizationFailed naming the bundle, the endpoint and why."""

    endpoint: str
    token: str
    instruction_id: str

    def __call__(self):
        if self.endpoint in _UNREACHABLE:
            raise self._unreachable()
        channel = grpc.insecure_channel(self.endpoint)
        try:
            try:
                grpc.channel_ready_future(channel).result(timeout=CONNECT_TIMEOUT_S)
            except grpc.FutureTimeoutError:
                _UNREACHABLE.add(self.endpoint)
                raise self._unreachable() from None
            finalize = channel.unary_unary(
                _METHOD,
                request_serializer=beam_fn_api_pb2.FinalizeBundleRequest.SerializeToString,
                response_deserializer=beam_fn_api_pb2.FinalizeBundleResponse.FromString,
            )
            try:
                finalize(
                    beam_fn_api_pb2.FinalizeBundleRequest(instruction_id=self.instruction_id),
                    metadata=((_TOKEN_KEY, self.token),),
                    timeout=CALL_TIMEOUT_S,
                )
            except grpc.RpcError as e:
                raise FinalizationFailed(
                    "Finalizing Java bundle %s at %s failed: %s" % (self.instruction_id, self.endpoint, e.details())
                ) from None
        finally:
            channel.close()

    def _unreachable(self):
        return FinalizationFailed(
            "Java bundle %s was not finalized: its harness JVM's owner at %s cannot be reached (its executor "
            "ended, or the run restarted)" % (self.instruction_id, self.endpoint)
        )


def handler(token: str, push):
    """The server side, for the JVM of `token`: `push(InstructionRequest)`
    sends an instruction on the JVM's control stream and returns a future
    of its response."""

    def finalize(request, context):
        if dict(context.invocation_metadata()).get(_TOKEN_KEY) != token:
            context.abort(grpc.StatusCode.NOT_FOUND, "no such Java SDK harness JVM here")
        response = push(
            beam_fn_api_pb2.InstructionRequest(
                instruction_id=request.instruction_id + "-finalize", finalize_bundle=request
            )
        ).result()
        if response.error:
            context.abort(grpc.StatusCode.INTERNAL, response.error)
        return beam_fn_api_pb2.FinalizeBundleResponse()

    return grpc.method_handlers_generic_handler(
        SERVICE,
        {
            "Finalize": grpc.unary_unary_rpc_method_handler(
                finalize,
                request_deserializer=beam_fn_api_pb2.FinalizeBundleRequest.FromString,
                response_serializer=beam_fn_api_pb2.FinalizeBundleResponse.SerializeToString,
            )
        },
    )


def executor_host() -> str:
    """The address the driver reaches this executor at: Spark's
    SPARK_LOCAL_IP where it is set, else what this host's name resolves
    to, else the loopback (a host whose name does not resolve)."""
    configured = os.environ.get("SPARK_LOCAL_IP")
    if configured:
        return configured
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"
