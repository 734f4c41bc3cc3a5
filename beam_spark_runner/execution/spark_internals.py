"""The one place the runner reaches PySpark's non-public APIs.

Each function says what it needs and why no public API does; `PRIVATE_APIS`
lists them all, and tests/unit/test_private_apis.py names each one that an
upgrade of pyspark moved. Every other module imports from here.

Beam-free, and light at import: Spark loads it in its helper processes (a
transformWithState operator's state calls go through `MapStateWire`).
"""

import contextlib
import inspect
import logging

_LOG = logging.getLogger(__name__)


# --- the JVM behind a SparkContext ------------------------------------------


def jvm(sc):
    """The py4j view of the driver JVM (`SparkContext._jvm`): the runner's
    own JVM helper (the Spark UI's Beam metrics) and Hadoop's FileSystem for
    the checkpoint's files have no Python API."""
    return sc._jvm


def java_spark_context(sc):
    """The JavaSparkContext behind `sc` (`SparkContext._jsc`): its Hadoop
    configuration, and the call site of the RDDs it creates."""
    return sc._jsc


def py4j_gateway(sc):
    """The py4j gateway (`SparkContext._gateway`), to build Java arrays."""
    return sc._gateway


# --- the names of Spark jobs and stages ------------------------------------


@contextlib.contextmanager
def call_site(sc, name):
    """Within the block, RDDs created (and actions run) carry `name` as their
    call site, which Spark names stages and jobs after. PySpark computes a
    call site itself (the first Python frame outside pyspark, which would be
    the runner's code) unless its call-site tracker is busy: the tracker's
    depth counter is raised while ours is set."""
    from pyspark.traceback_utils import SCCallSiteSync

    java_spark_context(sc).setCallSite(name)
    SCCallSiteSync._spark_stack_depth += 1
    try:
        yield
    finally:
        SCCallSiteSync._spark_stack_depth -= 1
        java_spark_context(sc).setCallSite(None)


def create_java_rdd(rdd):
    """Creates the JVM RDD of a Python RDD now (`RDD._jrdd`), under the
    current call site; PySpark creates it lazily otherwise."""
    return rdd._jrdd


# --- the active SparkSession -------------------------------------------------


@contextlib.contextmanager
def keeping_active_session(spark):
    """Within the block, `spark.createDataFrame` (which makes `spark` the
    active session: PySpark's `SparkSession._activeSession`, a process-wide
    attribute, and the JVM's active session of this thread) leaves the
    caller's active session as it was afterwards. A job the job service runs
    on its own session must not become what `SparkSession.getActiveSession()`
    answers to a notebook or a later run in the same process."""
    from pyspark.sql import SparkSession

    before = SparkSession._activeSession
    java_session = spark._jvm.org.apache.spark.sql.SparkSession
    java_before = java_session.getActiveSession()
    try:
        yield
    finally:
        SparkSession._activeSession = before
        if java_before.isDefined():
            java_session.setActiveSession(java_before.get())
        else:
            java_session.clearActiveSession()


# --- streaming query progress ------------------------------------------------

_PROGRESS_LISTENER_INTERFACE = "org.apache.spark.sql.streaming.PythonStreamingQueryListener"


class ProgressEvent:
    """One progress event of a streaming query: Spark has committed batch
    `batch_id` of query `query_id` (its id as text). `json()` fetches
    Spark's whole progress record as JSON text (one call into the JVM)."""

    __slots__ = ("query_id", "batch_id", "_progress")

    def __init__(self, query_id, batch_id, progress):
        self.query_id = query_id
        self.batch_id = batch_id
        self._progress = progress

    def json(self):
        return self._progress.json()


class _ProgressCallback:
    """What the JVM calls for each event of every streaming query (py4j's
    view of Spark's `PythonStreamingQueryListener` interface, which
    PySpark's own listeners implement). PySpark's `StreamingQueryListener`
    turns each progress event into Python objects first, with hundreds of
    py4j calls per event (every state operator's metrics, a Java exception
    converted at the end of each map): at a micro-batch every half second
    that held the driver's GIL, and the JVM's listener thread, for a good
    part of each batch. This one asks the event for its query id and batch
    id only."""

    def __init__(self, on_progress):
        self._on_progress = on_progress

    def onQueryStarted(self, event):
        pass

    def onQueryProgress(self, event):
        progress = event.progress()
        self._on_progress(ProgressEvent(progress.id().toString(), progress.batchId(), progress))

    def onQueryIdle(self, event):
        pass

    def onQueryTerminated(self, event):
        pass

    class Java:
        implements = [_PROGRESS_LISTENER_INTERFACE]


def add_progress_listener(spark, on_progress):
    """Calls `on_progress(ProgressEvent)` on Spark's listener thread for each
    progress event of every streaming query of `spark`'s session, from now
    on; returns the handle
    `remove_progress_listener` takes. No public API registers a listener
    without PySpark's per-event conversion (see `_ProgressCallback`)."""
    from pyspark.java_gateway import ensure_callback_server_started

    sc = spark.sparkContext
    ensure_callback_server_started(py4j_gateway(sc))
    wrapper = jvm(sc).org.apache.spark.sql.streaming.PythonStreamingQueryListenerWrapper(_ProgressCallback(on_progress))
    spark._jsparkSession.streams().addListener(wrapper)
    return wrapper


def remove_progress_listener(spark, handle):
    """Stops the calls of the listener `add_progress_listener` returned."""
    spark._jsparkSession.streams().removeListener(handle)


# --- a driver JVM that died ----------------------------------------------------


def active_session_or_none():
    """(PySpark's active SparkSession or None, whether the driver JVM behind
    it was gone): a JVM that ended (an OutOfMemoryError, a kill) gives
    (None, True), after PySpark's records of it are cleared so that the
    next session starts a new JVM. `SparkSession.getActiveSession()` asks the JVM and fails with a
    bare "Connection refused" once it died, and `SparkContext.stop()`
    keeps the class-level gateway (`SparkContext._gateway`, `_jvm`) that
    the next SparkContext would reuse: PySpark has no public way to start
    over after its JVM died (a long-lived job server must)."""
    from py4j.protocol import Py4JNetworkError
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    try:
        return SparkSession.getActiveSession(), False
    except (ConnectionError, Py4JNetworkError):
        pass
    with SparkContext._lock:
        SparkContext._active_spark_context = None
        SparkContext._gateway = None
        SparkContext._jvm = None
    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None
    return None, True


# --- the Python workers' interpreter -----------------------------------------


def worker_python(context):
    """The interpreter a session's Python workers run
    (`SparkContext.pythonExec`, public but undocumented), which PySpark reads
    each time it wraps a Python function."""
    return context.pythonExec


def set_worker_python(context, path):
    context.pythonExec = path


def run_python_daemon():
    """Runs PySpark's Python worker daemon (`pyspark.daemon.manager`) in this
    process: a `spark.python.daemon.module` must do what PySpark's own
    daemon module does, after importing what its workers should have."""
    from pyspark import daemon

    daemon.manager()


# --- Arrow ---------------------------------------------------------------------


def arrow_schema(struct_type):
    """The Arrow schema the batches of a `mapInArrow` with output schema
    `struct_type` must have (PySpark's own conversion, in
    `pyspark.sql.pandas.types`; timestamps as UTC microseconds)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    # PySpark 4.2 names the time zone; 4.0 and 4.1 take `timestamp_utc`
    # (True by default: UTC).
    if "timezone" in inspect.signature(to_arrow_schema).parameters:
        return to_arrow_schema(struct_type, timezone="UTC")
    return to_arrow_schema(struct_type, timestamp_utc=True)


# --- grouping one partition's records, spilling to disk -------------------


def external_group_by(records, memory_mb, create, append, extend):
    """(key, re-iterable of values) of `records`, grouped as the reduce side
    of PySpark's `RDD.groupByKey` does (`pyspark.shuffle.ExternalGroupBy`,
    which spills to disk above `memory_mb` and reads a key's values back as
    they are iterated); `create`, `append`, `extend` build a key's value
    list (an Aggregator's three functions)."""
    from pyspark.shuffle import Aggregator, ExternalGroupBy

    merger = ExternalGroupBy(Aggregator(create, append, extend), memory_mb)
    merger.mergeValues(records)
    return merger.items()


# --- transformWithState's state calls, pipelined ------------------------------


class MapStateWire:
    """MapState requests over PySpark's state socket, many in flight.

    PySpark's MapState makes one socket request per call and waits for its
    answer; the state store's work is about 0.1 ms, the hand-over of the
    socket between the two processes 0.5-1.7 ms on a busy 2-core machine.
    This writes up to `window` requests before reading their answers, with
    PySpark's own client (`MapState._mapStateClient`, its
    `_stateful_processor_api_client`: the socket file, the row
    serialization and the message framing). `of` returns None when those
    pieces moved: the caller then uses the public API one call at a time."""

    @classmethod
    def of(cls, map_state, name, window):
        try:
            client = map_state._mapStateClient
            api = client._stateful_processor_api_client
            for needed in ("_serialize_to_bytes", "_deserialize_from_bytes", "_receive_proto_message", "sockfile"):
                getattr(api, needed)  # all there now, or fall back now (not mid-batch)
            return cls(api, client.user_key_schema, client.value_schema, name, window)
        except (AttributeError, ImportError) as e:
            _LOG.warning("PySpark's state API has changed (%s): state calls go one at a time", e)
            return None

    def __init__(self, api, key_schema, value_schema, name, window):
        import pyspark.sql.streaming.proto.StateMessage_pb2 as messages
        from pyspark.serializers import write_int

        self._api, self._messages, self._write_int = api, messages, write_int
        self._key_schema, self._value_schema, self._name = key_schema, value_schema, name
        self._window = window

    def _request(self, call):
        m = self._messages
        return m.StateRequest(
            stateVariableRequest=m.StateVariableRequest(mapStateCall=m.MapStateCall(stateName=self._name, **call))
        ).SerializeToString()

    def _key(self, key):
        return self._api._serialize_to_bytes(self._key_schema, (key,))

    def _exchange(self, requests, what):
        """Sends `requests`, `window` at a time; returns their answers' values."""
        api, out, values = self._api, self._api.sockfile, []
        for start in range(0, len(requests), self._window):
            part = requests[start : start + self._window]
            for message in part:
                self._write_int(0, out)  # message version, as PySpark writes it
                self._write_int(len(message), out)
                out.write(message)
            out.flush()
            failure = None
            for _ in part:  # every answer is read, so the socket stays in step
                status, error, value = api._receive_proto_message()
                if status != 0 and not (what == "get" and status == 2):
                    failure = failure or error
                values.append(value)
            if failure:
                raise RuntimeError("Spark's state store refused a %s on %r: %s" % (what, self._name, failure))
        return values

    def get_many(self, keys):
        """The rows stored for `keys` (None where there is none), in order."""
        m = self._messages
        values = self._exchange([self._request({"getValue": m.GetValue(userKey=self._key(k))}) for k in keys], "get")
        return [self._api._deserialize_from_bytes(v) if len(v) else None for v in values]

    def put_many(self, items):
        m = self._messages
        serialize = self._api._serialize_to_bytes
        self._exchange(
            [
                self._request(
                    {"updateValue": m.UpdateValue(userKey=self._key(k), value=serialize(self._value_schema, (v,)))}
                )
                for k, v in items
            ],
            "put",
        )

    def remove_many(self, keys):
        m = self._messages
        self._exchange([self._request({"removeKey": m.RemoveKey(userKey=self._key(k))}) for k in keys], "remove")


# --- differences between supported PySpark releases ------------------------


def stream_reader_gets_start():
    """Whether Spark calls a Python stream reader's `latestOffset(start,
    limit)` with the batch's start (PySpark 4.2 and later). Before, it calls
    `latestOffset()`, and a reader whose next offset depends on the last one
    must remember it, and after a restart learn it from Spark's offset log
    (`last_logged_source_offset`)."""
    from pyspark.sql.datasource import DataSourceStreamReader

    return "start" in inspect.signature(DataSourceStreamReader.latestOffset).parameters


def has_transform_with_state():
    """Whether `GroupedData.transformWithState` (row-based, PySpark 4.1 and
    later) exists: the keyed operators of a streaming pipeline run in it.
    PySpark 4.0 has only the pandas form."""
    from pyspark.sql.group import GroupedData

    return hasattr(GroupedData, "transformWithState")


def last_logged_source_offset(files, spark_dir, is_ours):
    """The newest offset Spark's offset log holds for the source whose
    offsets `is_ours(dict)` recognizes, or None (no batch logged yet).

    A restarted query runs its next batch from the newest logged offsets
    (re-running that batch first when it did not commit), so this is where a
    reader that Spark does not tell its start resumes. Spark writes each
    `offsets/<batch id>` file as a version line, a metadata line, then one
    line per source: its offset as JSON, or `-`."""
    import json

    logged = [int(name) for name in files.list(spark_dir + "/offsets") if name.isdigit()]
    if not logged:
        return None
    text = files.read("%s/offsets/%d" % (spark_dir, max(logged))).decode()
    for line in text.splitlines()[2:]:
        try:
            offset = json.loads(line)
        except ValueError:
            continue
        if isinstance(offset, dict) and is_ours(offset):
            return offset
    return None


# --- what the checks below look for ------------------------------------------


def _sets_attribute(cls, attribute):
    """Whether `cls`'s code assigns `self.<attribute>` (instance attributes
    exist only once an object is made, which some of these need Spark for)."""
    return ("self.%s =" % attribute) in inspect.getsource(cls)


def _pyspark(module, name):
    import importlib

    return getattr(importlib.import_module(module), name)


def _spark_core_class_has(class_name, *texts):
    """Whether Spark's class `class_name` (in the pyspark wheel's spark-core
    jar) holds each of `texts` in its constant pool (a method name and its
    JVM descriptor): Spark-internal JVM classes the runner's own jar calls."""
    import glob
    import os
    import zipfile

    import pyspark

    (jar,) = glob.glob(os.path.join(os.path.dirname(pyspark.__file__), "jars", "spark-core_*.jar"))
    with zipfile.ZipFile(jar) as archive:
        data = archive.read(class_name.replace(".", "/") + ".class")
    return all(text.encode() in data for text in texts)


# (what, where the runner uses it, a check that it is still there): read by
# tests/unit/test_private_apis.py, which fails naming each one that moved.
PRIVATE_APIS = (
    (
        "SparkContext._lock, _active_spark_context, _gateway, _jvm; SparkSession._instantiatedSession, "
        "_activeSession (class attributes)",
        "session.py (active_session_or_none): a new JVM after the driver JVM died",
        lambda: all(
            hasattr(_pyspark(module, cls), attribute)
            for module, cls, attribute in (
                ("pyspark", "SparkContext", "_lock"),
                ("pyspark", "SparkContext", "_active_spark_context"),
                ("pyspark", "SparkContext", "_gateway"),
                ("pyspark", "SparkContext", "_jvm"),
                ("pyspark.sql", "SparkSession", "_instantiatedSession"),
                ("pyspark.sql", "SparkSession", "_activeSession"),
            )
        ),
    ),
    (
        "org.apache.spark.ui.SparkUITab(SparkUI, String), WebUITab.attachPage, WebUIPage(String).render, "
        "UIUtils.headerSparkPage (Spark's own UI classes, private[spark])",
        "java/beamsparkrunner/ui/BeamTab.java, WatermarksPage.java: the Spark UI's Beam tab",
        lambda: (
            _spark_core_class_has(
                "org.apache.spark.ui.SparkUITab", "(Lorg/apache/spark/ui/SparkUI;Ljava/lang/String;)V"
            )
            and _spark_core_class_has("org.apache.spark.ui.WebUITab", "attachPage")
            and _spark_core_class_has(
                "org.apache.spark.ui.WebUIPage",
                "render",
                "(Ljakarta/servlet/http/HttpServletRequest;)Lscala/collection/immutable/Seq;",
            )
            # Two flags after the help text in Spark 4.0 and 4.1, three from
            # 4.2: WatermarksPage calls whichever there is by reflection.
            and any(
                _spark_core_class_has(
                    "org.apache.spark.ui.UIUtils",
                    "headerSparkPage",
                    "(Ljakarta/servlet/http/HttpServletRequest;Ljava/lang/String;Lscala/Function0;"
                    "Lorg/apache/spark/ui/SparkUITab;Lscala/Option;%s)Lscala/collection/immutable/Seq;" % flags,
                )
                for flags in ("ZZ", "ZZZ")
            )
        ),
    ),
    (
        "SparkContext._jvm and ._gateway",
        "jvm, py4j_gateway: the Spark UI helper, the checkpoint's Hadoop FileSystem",
        lambda: (
            hasattr(_pyspark("pyspark", "SparkContext"), "_jvm")
            and hasattr(_pyspark("pyspark", "SparkContext"), "_gateway")
        ),
    ),
    (
        "SparkContext._jsc",
        "java_spark_context: Hadoop's configuration, RDD call sites",
        lambda: _sets_attribute(_pyspark("pyspark", "SparkContext"), "_jsc"),
    ),
    (
        "SparkContext.pythonExec",
        "worker_python: a notebook's local session runs the driver's interpreter",
        lambda: _sets_attribute(_pyspark("pyspark", "SparkContext"), "pythonExec"),
    ),
    (
        "traceback_utils.SCCallSiteSync._spark_stack_depth",
        "call_site: Spark stages named after Beam transforms",
        lambda: hasattr(_pyspark("pyspark.traceback_utils", "SCCallSiteSync"), "_spark_stack_depth"),
    ),
    (
        "RDD._jrdd and PipelinedRDD._jrdd",
        "create_java_rdd: the JVM RDD made under the Beam call site",
        lambda: (
            _sets_attribute(_pyspark("pyspark", "RDD"), "_jrdd")
            and hasattr(_pyspark("pyspark.core.rdd", "PipelinedRDD"), "_jrdd")
        ),
    ),
    (
        "pyspark.shuffle.Aggregator, ExternalGroupBy(aggregator, memory_mb).mergeValues/items",
        "external_group_by: batch GroupByKey's reduce side, spilling to disk",
        lambda: all(hasattr(_pyspark("pyspark.shuffle", "ExternalGroupBy"), m) for m in ("mergeValues", "items")),
    ),
    (
        "pyspark.sql.pandas.types.to_arrow_schema(schema, timezone=...) (4.2+) or (schema, timestamp_utc=...)",
        "arrow_schema: the Arrow batches WriteToSpark hands Spark's writer",
        lambda: (
            {"timezone", "timestamp_utc"}
            & set(inspect.signature(_pyspark("pyspark.sql.pandas.types", "to_arrow_schema")).parameters)
        ),
    ),
    (
        "SparkSession._activeSession and ._jvm",
        "keeping_active_session: WriteToSpark in a job service job leaves the caller's active session",
        lambda: (
            hasattr(_pyspark("pyspark.sql", "SparkSession"), "_activeSession")
            and _sets_attribute(_pyspark("pyspark.sql", "SparkSession"), "_jvm")
        ),
    ),
    (
        "org.apache.spark.sql.streaming.PythonStreamingQueryListener(Wrapper), SparkSession._jsparkSession, "
        "pyspark.java_gateway.ensure_callback_server_started",
        "add_progress_listener: the checkpoint coordinator hears of each committed batch",
        lambda: (
            callable(_pyspark("pyspark.java_gateway", "ensure_callback_server_started"))
            and _sets_attribute(_pyspark("pyspark.sql", "SparkSession"), "_jsparkSession")
            and "PythonStreamingQueryListenerWrapper"
            in inspect.getsource(_pyspark("pyspark.sql.streaming.listener", "StreamingQueryListener"))
            and _PROGRESS_LISTENER_INTERFACE
            in inspect.getsource(_pyspark("pyspark.sql.streaming.listener", "JStreamingQueryListener"))
        ),
    ),
    (
        "pyspark.daemon.manager",
        "run_python_daemon: Python workers fork with Beam imported",
        lambda: callable(_pyspark("pyspark.daemon", "manager")),
    ),
    (
        "MapState._mapStateClient, MapStateClient.user_key_schema/value_schema/_stateful_processor_api_client, "
        "StatefulProcessorApiClient.sockfile/_serialize_to_bytes/_deserialize_from_bytes/_receive_proto_message, "
        "pyspark.sql.streaming.proto.StateMessage_pb2",
        "MapStateWire: pipelined state calls of the keyed operators",
        lambda: (
            _sets_attribute(_pyspark("pyspark.sql.streaming.stateful_processor", "MapState"), "_mapStateClient")
            and all(
                _sets_attribute(_pyspark("pyspark.sql.streaming.map_state_client", "MapStateClient"), a)
                for a in ("user_key_schema", "value_schema", "_stateful_processor_api_client")
            )
            and _sets_attribute(
                _pyspark("pyspark.sql.streaming.stateful_processor_api_client", "StatefulProcessorApiClient"),
                "sockfile",
            )
            and all(
                hasattr(
                    _pyspark("pyspark.sql.streaming.stateful_processor_api_client", "StatefulProcessorApiClient"), m
                )
                for m in ("_serialize_to_bytes", "_deserialize_from_bytes", "_receive_proto_message")
            )
            and hasattr(_pyspark("pyspark.sql.streaming.proto.StateMessage_pb2", "StateRequest"), "FromString")
        ),
    ),
)
