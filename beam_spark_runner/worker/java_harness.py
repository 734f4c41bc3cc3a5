"""Beam's Java SDK harness, as the worker of a stage in a Java environment.

A stage whose transforms live in a Java environment (a cross-language
transform's expansion) runs in Beam's Java SDK harness
(`org.apache.beam.fn.harness.FnHarness`), started the way Beam's process
environment starts it: a JVM given the Fn API endpoints in its environment
(`CONTROL_API_SERVICE_DESCRIPTOR`, `LOGGING_API_SERVICE_DESCRIPTOR`,
`HARNESS_ID`, `PIPELINE_OPTIONS`). This process, a Spark Python worker,
serves those endpoints on loopback: control (register, process bundle,
finalize), data, state and logging, all on one gRPC port.

One JVM per classpath and job per executor: the first Python worker that
needs it starts it (its owner) and serves its control stream; the other
Python workers of the executor attach to it (worker/java_jvm_sharing.py),
send their instructions through the owner and serve their own data and
state endpoints, which their bundles' descriptors name. A JVM is reused by
every later task, stage and micro-batch of its job, so its start cost is
paid once per executor. Each stage gets its own `JavaSdkHarness`: its
descriptor registered under an id of its own, its state (side inputs, user
state) behind the state endpoint, routed by instruction id. The JVM's log
lines are re-issued by its owner.

Guarantees: `process` returns only after the bundle finished and every
data output it wrote was received; a JVM that dies or never connects
fails the bundle with `JavaHarnessError` naming the classpath's first jar
and the end of the JVM's stderr (Spark then retries the task, which starts
or finds a live JVM); an owner that is gone fails its attached workers'
bundles the same way. A bundle's finalization callbacks stay in the JVM
until the driver sends for them, once the runner committed the bundle's
output (worker/java_finalization.py: the owner serves that request on its
executor's host address).
"""

import atexit
import concurrent.futures
import itertools
import logging
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
import uuid

import grpc
from apache_beam.portability.api import beam_fn_api_pb2, beam_fn_api_pb2_grpc
from beam_spark_runner.worker import beam_internals as _beam_internals

from beam_spark_runner.worker import grpc_servers, java_class_archives, java_finalization, java_jvm_sharing
from beam_spark_runner.worker.beam_internals import BeamFnDataServicer, ServedState, new_state_servicer

_LOG = logging.getLogger(__name__)

FN_HARNESS_MAIN = "org.apache.beam.fn.harness.FnHarness"
# How long a new JVM may take to open its control stream.
CONNECT_TIMEOUT_SECONDS = 120.0
# How long an attaching Python worker waits for the owner's endpoint.
ATTACH_TIMEOUT_SECONDS = 10.0
# The owner's service for the Python workers attached to its JVM.
_RELAY_SERVICE = "beam_spark_runner.JavaHarnessRelay"
_LOG_LEVELS = {
    beam_fn_api_pb2.LogEntry.Severity.TRACE: logging.DEBUG,
    beam_fn_api_pb2.LogEntry.Severity.DEBUG: logging.DEBUG,
    beam_fn_api_pb2.LogEntry.Severity.INFO: logging.INFO,
    beam_fn_api_pb2.LogEntry.Severity.NOTICE: logging.INFO,
    beam_fn_api_pb2.LogEntry.Severity.WARN: logging.WARNING,
    beam_fn_api_pb2.LogEntry.Severity.ERROR: logging.ERROR,
    beam_fn_api_pb2.LogEntry.Severity.CRITICAL: logging.CRITICAL,
}


class JavaHarnessError(RuntimeError):
    """The Java SDK harness could not be started or died."""


def java_command():
    """The `java` launcher: $JAVA_HOME/bin/java, else `java` on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and os.path.exists(os.path.join(home, "bin", "java")):
        return os.path.join(home, "bin", "java")
    found = shutil.which("java")
    if found is None:
        raise JavaHarnessError(
            "A stage runs in Beam's Java SDK harness, but no Java was found on this worker: "
            "set JAVA_HOME or put `java` (17 or newer) on the PATH of Spark's executors"
        )
    return found


class _ControlService(beam_fn_api_pb2_grpc.BeamFnControlServicer):
    """The runner's end of the control stream of one JVM."""

    def __init__(self, descriptors, harness_died):
        self._descriptors = descriptors
        self._harness_died = harness_died
        self._requests = queue.Queue()
        self._pending = {}
        self._lock = threading.Lock()
        self.connected = threading.Event()
        self._closed = False

    def Control(self, responses, context):
        self.connected.set()
        threading.Thread(target=self._read, args=(responses,), daemon=True, name="java-harness-control").start()
        while True:
            request = self._requests.get()
            if request is None:
                return
            yield request

    def _read(self, responses):
        try:
            for response in responses:
                with self._lock:
                    future = self._pending.pop(response.instruction_id, None)
                if future is not None:
                    future.set_result(response)
        except Exception:  # noqa: BLE001 -- the stream broke: the JVM is gone
            pass
        self._fail_pending()

    def _fail_pending(self):
        with self._lock:
            pending, self._pending = self._pending, {}
            self._closed = True
        for future in pending.values():
            future.set_exception(self._harness_died())

    def GetProcessBundleDescriptor(self, request, context):
        return self._descriptors[request.process_bundle_descriptor_id]

    def push(self, request) -> concurrent.futures.Future:
        future = concurrent.futures.Future()
        with self._lock:
            if self._closed:
                future.set_exception(self._harness_died())
                return future
            self._pending[request.instruction_id] = future
        self._requests.put(request)
        return future

    def busy(self) -> bool:
        """True while an instruction (this process's or relayed) is running."""
        with self._lock:
            return bool(self._pending)

    def close(self):
        self._requests.put(None)
        self._fail_pending()


class _StateService(beam_fn_api_pb2_grpc.BeamFnStateServicer):
    """State requests of every stage run by one JVM, each answered by the
    state servicer of the stage whose bundle (instruction) asked."""

    def __init__(self):
        self._by_instruction = {}

    def route(self, instruction_id, state):
        self._by_instruction[instruction_id] = state

    def unroute(self, instruction_id):
        self._by_instruction.pop(instruction_id, None)

    def State(self, request_stream, context):
        for request in request_stream:
            state = self._by_instruction.get(request.instruction_id)
            try:
                if state is None:
                    raise KeyError("no running bundle %r" % request.instruction_id)
                kind = request.WhichOneof("request")
                if kind == "get":
                    data, token = state.get_raw(request.state_key, request.get.continuation_token)
                    yield beam_fn_api_pb2.StateResponse(
                        id=request.id, get=beam_fn_api_pb2.StateGetResponse(data=data, continuation_token=token)
                    )
                elif kind == "append":
                    state.append_raw(request.state_key, request.append.data)
                    yield beam_fn_api_pb2.StateResponse(id=request.id, append=beam_fn_api_pb2.StateAppendResponse())
                elif kind == "clear":
                    state.clear(request.state_key)
                    yield beam_fn_api_pb2.StateResponse(id=request.id, clear=beam_fn_api_pb2.StateClearResponse())
                else:
                    raise ValueError("unknown state request %r" % kind)
            except Exception as e:  # noqa: BLE001 -- reported to the harness, which fails the bundle
                yield beam_fn_api_pb2.StateResponse(id=request.id, error="%s: %s" % (type(e).__name__, e))


# Java loggers (by the end of their name: Beam vendors gRPC under a
# versioned package) whose entries are re-issued at DEBUG, each with why.
_DEBUG_LOGGERS = (
    # gRPC's report that a channel was garbage collected unclosed, logged as
    # an ERROR: the harness drops its state and data clients of an endpoint
    # that went away (a Python worker of the executor that served it ended)
    # without shutting their channels down. Nothing is lost, and nothing the
    # user can do about it; a full ValidatesRunner run logged 673 of them.
    "io.grpc.internal.ManagedChannelOrphanWrapper",
)


def _log_level(entry):
    """The Python logging level of a JVM log entry."""
    if entry.log_location.endswith(_DEBUG_LOGGERS):
        return logging.DEBUG
    return _LOG_LEVELS.get(entry.severity, logging.INFO)


class _LoggingService(beam_fn_api_pb2_grpc.BeamFnLoggingServicer):
    """The JVM's log entries, re-issued through Python's logging under the
    Java logger's name (so they reach the driver as a Python stage's do),
    at their level but for `_DEBUG_LOGGERS`'."""

    def Logging(self, log_bundles, context):
        for bundle in log_bundles:
            for entry in bundle.log_entries:
                logger = logging.getLogger(entry.log_location or "java_harness")
                level = _log_level(entry)
                if logger.isEnabledFor(level):
                    text = entry.message + ("\n" + entry.trace if entry.trace else "")
                    logger.log(level, "%s", text, extra={"beam_instruction": entry.instruction_id})
        return iter(())


class JavaWorker:
    """One FnHarness JVM and the gRPC server it talks to (its owner's end)."""

    _ids = itertools.count(1)

    def __init__(self, classpath, jvm_options=(), pipeline_options=""):
        self.classpath = tuple(classpath)
        self.jvm_options = tuple(jvm_options)
        self.pipeline_options = pipeline_options
        # Where this JVM is recorded for the executor's other Python workers
        # (java_worker sets it once the record is written).
        self.shared_as = None
        self.data = None  # the data stream, once the JVM connected
        self.worker_id = "spark-java-%d-%d" % (os.getpid(), next(self._ids))
        self.descriptors = {}
        self.control = _ControlService(self.descriptors, self._died)
        self.state = _StateService()
        self._data_service = BeamFnDataServicer()
        self._server, port = grpc_servers.listening_server("127.0.0.1")
        beam_fn_api_pb2_grpc.add_BeamFnControlServicer_to_server(self.control, self._server)
        beam_fn_api_pb2_grpc.add_BeamFnDataServicer_to_server(self._data_service, self._server)
        beam_fn_api_pb2_grpc.add_BeamFnStateServicer_to_server(self.state, self._server)
        beam_fn_api_pb2_grpc.add_BeamFnLoggingServicer_to_server(_LoggingService(), self._server)
        self._server.add_generic_rpc_handlers((self._relay_handler(),))
        self._server.start()
        self.url = "127.0.0.1:%d" % port
        # The driver's way to finalize this JVM's bundles: that one method,
        # on an address the driver reaches.
        self.finalization_token = uuid.uuid4().hex
        host = java_finalization.executor_host()
        self._finalization_server, finalization_port = grpc_servers.listening_server(host)
        self._finalization_server.add_generic_rpc_handlers(
            (java_finalization.handler(self.finalization_token, self.control.push),)
        )
        self._finalization_server.start()
        self.finalization_url = "%s:%d" % (host, finalization_port)
        self._log_dir = tempfile.mkdtemp(prefix="beam-spark-java-harness-")
        self._stderr_path = os.path.join(self._log_dir, "stderr.log")
        endpoint = 'url: "%s"' % self.url
        env = dict(
            os.environ,
            HARNESS_ID=self.worker_id,
            CONTROL_API_SERVICE_DESCRIPTOR=endpoint,
            LOGGING_API_SERVICE_DESCRIPTOR=endpoint,
            PIPELINE_OPTIONS=pipeline_options or "{}",
            RUNNER_CAPABILITIES="",
        )
        java = java_command()
        self._class_archive = java_class_archives.for_jvm(java, self.classpath, self.jvm_options)
        with open(self._stderr_path, "wb") as stderr:
            self._process = subprocess.Popen(
                [
                    java,
                    *self.jvm_options,
                    *self._class_archive.jvm_options,
                    "-cp",
                    os.pathsep.join(self.classpath),
                    FN_HARNESS_MAIN,
                ],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=stderr,
                stderr=stderr,
                cwd=self._log_dir,
            )
        self._wait_connected()
        self.data = self._data_service.get_conn_by_worker_id(self.worker_id)

    def shared(self) -> java_jvm_sharing.SharedJvm:
        """How the executor's other Python workers find this JVM."""
        return java_jvm_sharing.SharedJvm(
            self.url, os.getpid(), self._process.pid, self.worker_id, self.finalization_url, self.finalization_token
        )

    def busy(self) -> bool:
        """True while an instruction runs or a stage is registered here, this
        process's or an attached worker's: a batch task's stage is
        registered while the task runs, a streaming operator's while the
        Python worker keeps the operator (streaming/operator_cache.py)."""
        return self.control.busy() or bool(self.descriptors)

    def retire(self) -> bool:
        """Closes this worker, no longer used; True when it is closed."""
        self.close()
        return True

    def _relay_handler(self):
        """The attached workers' way to this JVM's control stream: their
        descriptors registered here (the JVM asks for them by id), their
        instructions pushed and answered as this process's own."""

        def instruct(request, context):
            if request.HasField("register"):
                for descriptor in request.register.process_bundle_descriptor:
                    self.register(descriptor)
                return beam_fn_api_pb2.InstructionResponse(
                    instruction_id=request.instruction_id, register=beam_fn_api_pb2.RegisterResponse()
                )
            try:
                return self.control.push(request).result()
            except JavaHarnessError as e:
                context.abort(grpc.StatusCode.UNAVAILABLE, str(e))

        def forget(request, context):
            self.unregister(request.process_bundle_descriptor_id)
            return beam_fn_api_pb2.RegisterResponse()

        return grpc.method_handlers_generic_handler(
            _RELAY_SERVICE,
            {
                "Instruct": grpc.unary_unary_rpc_method_handler(
                    instruct,
                    request_deserializer=beam_fn_api_pb2.InstructionRequest.FromString,
                    response_serializer=beam_fn_api_pb2.InstructionResponse.SerializeToString,
                ),
                "Forget": grpc.unary_unary_rpc_method_handler(
                    forget,
                    request_deserializer=beam_fn_api_pb2.GetProcessBundleDescriptorRequest.FromString,
                    response_serializer=beam_fn_api_pb2.RegisterResponse.SerializeToString,
                ),
            },
        )

    def _wait_connected(self):
        deadline = time.monotonic() + CONNECT_TIMEOUT_SECONDS
        while not self.control.connected.wait(0.2):
            if self._process.poll() is not None or time.monotonic() > deadline:
                error = self._died("never opened its control stream")  # reads the log close() removes
                self.close()
                raise error

    def alive(self):
        return self._process.poll() is None

    def stderr_tail(self, lines=30):
        try:
            with open(self._stderr_path, "rb") as f:
                return b"".join(f.readlines()[-lines:]).decode("utf-8", "replace")
        except OSError:
            return ""

    def _died(self, what="died"):
        code = self._process.poll() if hasattr(self, "_process") else None
        first = self.classpath[0] if self.classpath else "(empty classpath)"
        return JavaHarnessError(
            "Beam's Java SDK harness (%s, classpath of %d jars starting with %s) %s%s. "
            "The end of its output:\n%s"
            % (
                FN_HARNESS_MAIN,
                len(self.classpath),
                first,
                what,
                "" if code is None else " (exit code %s)" % code,
                self.stderr_tail(),
            )
        )

    def register(self, descriptor):
        self.descriptors[descriptor.id] = descriptor

    def unregister(self, descriptor_id):
        self.descriptors.pop(descriptor_id, None)

    def close(self):
        """Stops the JVM and the server, and removes the JVM's log: a
        Python worker lives for many jobs, each with a JVM of its own."""
        if self.shared_as is not None:
            shared_jvms, digest = self.shared_as
            try:
                shared_jvms.remove(digest, self.shared())
            except OSError:
                pass  # a record left behind names a dead JVM: never used
        self.control.close()
        _close_data(self)
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(10)
        self._class_archive.finish(self._process.returncode)
        self._server.stop(1)
        self._finalization_server.stop(1)
        shutil.rmtree(self._log_dir, ignore_errors=True)


class _RelayedControl:
    """An attached worker's control stream: its instructions sent to the
    JVM's owner, which pushes them to the JVM and returns the responses."""

    def __init__(self, channel, harness_died):
        self._instruct = channel.unary_unary(
            "/%s/Instruct" % _RELAY_SERVICE,
            request_serializer=beam_fn_api_pb2.InstructionRequest.SerializeToString,
            response_deserializer=beam_fn_api_pb2.InstructionResponse.FromString,
        )
        self._forget = channel.unary_unary(
            "/%s/Forget" % _RELAY_SERVICE,
            request_serializer=beam_fn_api_pb2.GetProcessBundleDescriptorRequest.SerializeToString,
            response_deserializer=beam_fn_api_pb2.RegisterResponse.FromString,
        )
        self._harness_died = harness_died

    def push(self, request) -> concurrent.futures.Future:
        future = concurrent.futures.Future()

        def done(call):
            try:
                future.set_result(call.result())
            except grpc.RpcError as e:
                future.set_exception(self._harness_died("failed through its owner: %s" % e.details()))

        self._instruct.future(request).add_done_callback(done)
        return future

    def register(self, descriptor):
        request = beam_fn_api_pb2.InstructionRequest(
            instruction_id="register-" + descriptor.id,
            register=beam_fn_api_pb2.RegisterRequest(process_bundle_descriptor=[descriptor]),
        )
        self.push(request).result()

    def forget(self, descriptor_id):
        try:
            self._forget(beam_fn_api_pb2.GetProcessBundleDescriptorRequest(process_bundle_descriptor_id=descriptor_id))
        except grpc.RpcError:
            pass  # the owner is gone, and its JVM with the descriptor


class AttachedJavaWorker:
    """A JVM another Python worker of this executor owns (java_jvm_sharing):
    instructions go through the owner; this process serves the data and
    state endpoints of its own bundles."""

    def __init__(self, shared, classpath):
        self.classpath = tuple(classpath)
        self.shared_jvm = shared
        self.worker_id = shared.worker_id
        self.finalization_url = shared.finalization_url
        self.finalization_token = shared.finalization_token
        self.data = None  # the data stream, once attached
        self._closed = False
        self.state = _StateService()
        self._data_service = BeamFnDataServicer()
        self._server, port = grpc_servers.listening_server("127.0.0.1")
        beam_fn_api_pb2_grpc.add_BeamFnDataServicer_to_server(self._data_service, self._server)
        beam_fn_api_pb2_grpc.add_BeamFnStateServicer_to_server(self.state, self._server)
        self._server.start()
        self.url = "127.0.0.1:%d" % port
        self._channel = grpc.insecure_channel(
            shared.url, options=[("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
        )
        try:
            grpc.channel_ready_future(self._channel).result(timeout=ATTACH_TIMEOUT_SECONDS)
        except grpc.FutureTimeoutError:
            self.close()
            raise self._died("could not be reached at its owner's %s" % shared.url) from None
        self.control = _RelayedControl(self._channel, self._died)
        self.data = self._data_service.get_conn_by_worker_id(self.worker_id)

    def alive(self):
        return self.shared_jvm.alive()

    def busy(self) -> bool:
        return False  # its instructions are this process's, which asks for another JVM between tasks

    def retire(self) -> bool:
        """Stops sending instructions; keeps serving the data endpoint the
        JVM holds a stream to while the JVM lives (closed under it, the
        stream would end with an error in the JVM's log). True when closed."""
        if self.alive():
            return False
        self.close()
        return True

    def _died(self, what="died"):
        first = self.classpath[0] if self.classpath else "(empty classpath)"
        return JavaHarnessError(
            "Beam's Java SDK harness (%s, pid %d, classpath of %d jars starting with %s; started by Python "
            "worker %d of this executor, whose log has the JVM's output) %s"
            % (FN_HARNESS_MAIN, self.shared_jvm.jvm_pid, len(self.classpath), first, self.shared_jvm.owner_pid, what)
        )

    def register(self, descriptor):
        self.control.register(descriptor)

    def unregister(self, descriptor_id):
        # A closed worker was retired when its owner or JVM had gone, with
        # every descriptor it registered: a stage closed later (a cached
        # operator evicted in another job's task) has nothing to forget.
        if not self._closed:
            self.control.forget(descriptor_id)

    def close(self):
        self._closed = True
        _close_data(self)
        self._channel.close()
        self._server.stop(1)


def _close_data(worker):
    """Ends this process's data stream with the JVM before the JVM stops,
    so the stream's end is not logged as a failed read."""
    if worker.data is None:  # the JVM never connected
        return
    try:
        worker.data.close()
    except Exception:  # noqa: BLE001 -- a read that failed before: the JVM is going anyway
        pass


_workers = {}
_workers_lock = threading.Lock()
# Retired attached workers whose JVM still runs (AttachedJavaWorker.retire).
_retired = []


def java_worker(classpath, jvm_options=(), pipeline_options=""):
    """The JVM for `classpath`, `jvm_options` and the job's
    `pipeline_options` (which the harness reads once, when it starts):
    this process's own or attached one, else the one another Python worker
    of this executor started, else a new one this process starts."""
    key = (tuple(classpath), tuple(jvm_options), pipeline_options)
    with _workers_lock:
        _retired[:] = [w for w in _retired if not w.retire()]
        worker = _workers.get(key)
        if worker is not None and not worker.alive():
            _workers.pop(key).close()
            worker = None
        # Another job's JVM for the same jars is done with unless a stage is
        # still registered in it (JavaWorker.busy): a Python worker
        # runs one task at a time, and a job server runs job after job,
        # each with its own options. Looked at on every call, so a JVM kept
        # for a while goes once its stages are done with it.
        for other in [k for k in _workers if k != key and k[:2] == key[:2] and not _workers[k].busy()]:
            retiring = _workers.pop(other)
            if not retiring.retire():
                _retired.append(retiring)
        if worker is None:
            worker = _workers[key] = _shared_or_new(key)
        return worker


def _shared_or_new(key):
    shared_jvms = java_jvm_sharing.SharedJvms()
    digest = java_jvm_sharing.key_digest(*key)
    try:
        with shared_jvms.locked():
            shared = shared_jvms.read(digest)
            if shared is not None and shared.owner_pid != os.getpid():
                try:
                    return AttachedJavaWorker(shared, key[0])
                except JavaHarnessError as e:
                    _LOG.warning("Starting a Java SDK harness of this Python worker's own: %s", e)
            worker = JavaWorker(*key)
            shared_jvms.write(digest, worker.shared())
            worker.shared_as = (shared_jvms, digest)
            return worker
    except OSError as e:
        # No shared directory (a read-only temporary directory): a JVM of
        # this Python worker's own, as good if not as cheap.
        _LOG.warning("Java SDK harness JVMs are not shared between Python workers: %s", e)
        return JavaWorker(*key)


@atexit.register
def _stop_workers():
    for worker in list(_workers.values()) + _retired:
        worker.close()
    _workers.clear()
    del _retired[:]


def _with_endpoints(descriptor, descriptor_id, url):
    """A copy of `descriptor` under `descriptor_id` whose data ports, state
    and timer endpoints name this worker's server."""
    copy = beam_fn_api_pb2.ProcessBundleDescriptor()
    copy.CopyFrom(descriptor)
    copy.id = descriptor_id
    for transform in copy.transforms.values():
        if transform.spec.urn in (_beam_internals.DATA_INPUT_URN, _beam_internals.DATA_OUTPUT_URN):
            port = beam_fn_api_pb2.RemoteGrpcPort.FromString(transform.spec.payload)
            port.api_service_descriptor.url = url
            transform.spec.payload = port.SerializeToString()
    copy.state_api_service_descriptor.url = url
    copy.timer_api_service_descriptor.url = url
    return copy


class JavaSdkHarness(ServedState):
    """Runs one stage's bundles in this worker's JVM for its classpath;
    the interface of beam_internals.InProcessSdkHarness, its state moved in
    and out between micro-batches as that harness's is (`ServedState`)."""

    _ids = itertools.count(1)

    def __init__(self, descriptor, classpath, expected_outputs, jvm_options=(), pipeline_options=""):
        self._worker = java_worker(classpath, jvm_options, pipeline_options)
        self.state = new_state_servicer()
        self._side_keys = set()
        # Unique in the JVM, which the executor's Python workers share.
        self._prefix = "%s-%d-%d" % (descriptor.id, os.getpid(), next(self._ids))
        self.descriptor = _with_endpoints(descriptor, self._prefix, self._worker.url)
        self._worker.register(self.descriptor)
        self._expected = list(expected_outputs)
        self._outputs = {}
        self._next_id = 0

    def new_instruction_id(self) -> str:
        self._next_id += 1
        return "%s-bundle-%d" % (self._prefix, self._next_id)

    def write_input(self, instruction_id, transform_id, blocks):
        out = self._worker.data.output_stream(instruction_id, transform_id)
        for block in blocks:
            out.write(block)
        out.close()

    def write_timers(self, instruction_id, transform_id, timer_family_id, blocks):
        out = self._worker.data.output_timer_stream(instruction_id, transform_id, timer_family_id)
        for block in blocks:
            out.write(block)
        out.close()

    def process(self, instruction_id):
        """Runs the bundle whose inputs were written: collects its outputs
        as they arrive (the data plane's queues are bounded), then returns
        the harness's response."""
        worker = self._worker
        worker.state.route(instruction_id, self.state)
        try:
            future = worker.control.push(
                beam_fn_api_pb2.InstructionRequest(
                    instruction_id=instruction_id,
                    process_bundle=beam_fn_api_pb2.ProcessBundleRequest(
                        process_bundle_descriptor_id=self.descriptor.id
                    ),
                )
            )

            def failed():
                if not future.done():
                    return not worker.alive()
                return future.exception() is not None or bool(future.result().error)

            self._outputs[instruction_id] = list(
                worker.data.input_elements(instruction_id, self._expected, abort_callback=failed)
            )
            return future.result()
        finally:
            worker.state.unroute(instruction_id)

    def read_outputs(self, instruction_id, expected):
        return self._outputs.pop(instruction_id, [])

    def finalize(self, instruction_id):
        return self._worker.control.push(
            beam_fn_api_pb2.InstructionRequest(
                instruction_id=instruction_id + "-finalize",
                finalize_bundle=beam_fn_api_pb2.FinalizeBundleRequest(instruction_id=instruction_id),
            )
        ).result()

    def take_finalization_callbacks(self, instruction_id):
        """Java's callbacks stay in the JVM: what the driver calls once the
        bundle's output is committed is a request for them."""
        worker = self._worker
        return [
            java_finalization.JavaBundleFinalization(worker.finalization_url, worker.finalization_token, instruction_id)
        ]

    def close(self):
        self._worker.unregister(self.descriptor.id)
