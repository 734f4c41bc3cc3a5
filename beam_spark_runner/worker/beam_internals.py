"""The one place the runner reaches Beam's non-public APIs.

Beam has no public API to run a ProcessBundleDescriptor in-process; its own
FnApiRunner does it with the classes imported here (the embedded worker
handler). Other private pieces the runner needs are read here too, each in
a function that says why (`PRIVATE_APIS` lists them all). An upgrade of
Beam that moves one breaks this module, and tests/unit/test_private_apis.py
names what moved; every other module imports from here. (The one exception
is the engine-agnostic core, which may not import the runner:
windowing/window_keys.py reads IntervalWindow's Cython fields itself, with
a fallback, and the same test names them.)
"""

import contextlib
import importlib
import threading
import time as _time

import objsize

from apache_beam.portability.api import beam_fn_api_pb2
from apache_beam.portability.api import endpoints_pb2
from apache_beam.runners.portability.fn_api_runner.worker_handlers import (
    FNAPI_RUNNER_CAPABILITIES,
    SingletonStateHandlerFactory,
    StateServicer,
)
from apache_beam.portability import python_urns
from apache_beam.runners.portability.fn_api_runner import execution as _fn_api_execution
from apache_beam.internal import pickler  # noqa: F401 -- the runner's pickler, re-exported
from apache_beam.runners.portability.fn_api_runner.fn_runner import FnApiMetrics  # noqa: F401
from apache_beam.runners.worker import bundle_processor, data_plane, sdk_worker, statecache, statesampler
from apache_beam.runners.worker.statecache import StateCache
from apache_beam.transforms import core

# The runner-side transforms a ProcessBundleDescriptor reads its input from
# and writes its output to (Beam's data plane).
DATA_INPUT_URN = bundle_processor.DATA_INPUT_URN
DATA_OUTPUT_URN = bundle_processor.DATA_OUTPUT_URN

STATE_CACHE_BYTES = 64 << 20


# Bundle finalization callbacks live on each DoFn operation's
# `_BundleFinalizerParam`, behind attributes Cython keeps private, until a
# FinalizeBundleRequest calls them. The batch runner must call them later
# (after Spark holds the bundle's output), so while `_capture.sink` is set
# on this thread, finalizing a bundle collects the callbacks instead of
# calling them. Outside `take_finalization_callbacks` nothing changes.
_capture = threading.local()
_sdk_finalize_bundle = core._BundleFinalizerParam.finalize_bundle


def _finalize_or_capture(param):
    sink = getattr(_capture, "sink", None)
    if sink is None:
        return _sdk_finalize_bundle(param)
    sink.extend(param._callbacks)
    return None


core._BundleFinalizerParam.finalize_bundle = _finalize_or_capture


def weigh_cached_state(*objs):
    """The weight (bytes) the SDK harness's state cache gives an entry:
    Beam's deep size (its size, referents and filter functions, which stop
    at modules, classes and functions), without objsize's exclusion of every
    loaded module's globals. objsize builds that exclusion set anew on each
    call, walking all of sys.modules: about 1 ms per weighing, three
    weighings per key of a stateful DoFn, 90% of the time of Beam's own
    FnApiRunner on 5,000 keys (profiled at 2021ca2, 2026-11-25). An object reachable from
    a cached value and also from some module's globals now counts towards
    the entry; the cache only evicts a little earlier for it."""
    return objsize.get_deep_size(
        *objs,
        get_size_func=statecache._size_func,
        get_referents_func=statecache._get_referents_func,
        filter_func=statecache._filter_func,
        exclude_modules_globals=False,
    )


# StateCache weighs its entries with the module-level `get_deep_size` (no
# hook on the class), so the weigher is replaced there, once per process.
statecache.get_deep_size = weigh_cached_state


def _same_state(target, source):
    """Copies the fields naming one user state of one key and window."""
    target.transform_id = source.transform_id
    target.user_state_id = source.user_state_id
    target.window = source.window
    target.key = source.key


def _map_keys_key(state_key) -> bytes:
    """The MultimapKeysUserState key (bytes) of a MultimapUserState key:
    the same state, key and window, without the map key."""
    keys = beam_fn_api_pb2.StateKey()
    _same_state(keys.multimap_keys_user_state, state_key.multimap_user_state)
    return keys.SerializeToString()


def _map_value_key(keys_state_key, map_key):
    """The MultimapUserState key of one map key of a MultimapKeysUserState."""
    value = beam_fn_api_pb2.StateKey()
    _same_state(value.multimap_user_state, keys_state_key.multimap_keys_user_state)
    value.multimap_user_state.map_key = map_key
    return value


class _StateServicer(StateServicer):
    """Beam's in-memory state servicer, which also serves the values of
    streamed groups (worker/grouped_values.py) under Runner state keys: the
    state key type Beam's SDK harness reads a state-backed iterable's
    remaining values with, page by page (continuation token: page number);
    and the keys of a map state (MultimapKeysUserState: get and clear),
    which Java's MapState and SetState read and Beam's servicer lacks."""

    _SUPPORTED_STATE_TYPES = StateServicer._SUPPORTED_STATE_TYPES | {"multimap_keys_user_state"}

    def __init__(self):
        super().__init__()
        self._streamed = {}  # token -> grouped_values.ValuePages
        # A map state's keys (Java's MapState and SetState): the
        # MultimapKeysUserState key's bytes -> its map keys with values, in
        # the order they were first put. Beam's servicer keeps each map
        # key's values (MultimapUserState) but cannot list the keys.
        self._map_keys = {}

    def serve_values(self, pages) -> bytes:
        """Registers `pages` (a ValuePages); returns its state token."""
        token = b"grouped-values-%d" % len(self._streamed)
        self._streamed[token] = pages
        return token

    def forget_values(self):
        """Drops every registered group (their bundles have ended)."""
        self._streamed.clear()

    def get_raw(self, state_key, continuation_token=None):
        kind = state_key.WhichOneof("type")
        if kind == "runner":
            pages = self._streamed.get(state_key.runner.key)
            if pages is not None:
                data, more = pages.page(int(continuation_token or 0))
                return data, (b"%d" % (int(continuation_token or 0) + 1) if more else None)
        elif kind == "multimap_keys_user_state" and not continuation_token:
            # Stored under the query's own key, where Beam's get_raw pages it.
            with self._lock:
                keys = self._map_keys.get(self._to_key(state_key), {})
                self._state[self._to_key(state_key)] = list(keys)
        return super().get_raw(state_key, continuation_token)

    def append_raw(self, state_key, data):
        done = super().append_raw(state_key, data)
        if state_key.WhichOneof("type") == "multimap_user_state":
            with self._lock:
                self._map_keys.setdefault(_map_keys_key(state_key), {})[state_key.multimap_user_state.map_key] = None
        return done

    def clear(self, state_key):
        kind = state_key.WhichOneof("type")
        if kind == "multimap_user_state":
            with self._lock:
                self._map_keys.get(_map_keys_key(state_key), {}).pop(state_key.multimap_user_state.map_key, None)
        elif kind == "multimap_keys_user_state":
            with self._lock:
                keys = self._map_keys.pop(self._to_key(state_key), {})
            for map_key in keys:
                super().clear(_map_value_key(state_key, map_key))
        return super().clear(state_key)


def expansion_service_of(transform):
    """The expansion service an ExternalTransform will expand in (Beam keeps
    it in `_expansion_service`; no public accessor)."""
    return getattr(transform, "_expansion_service", None)


def expansion_classpath_of(service):
    """The extra jars (paths, URLs or Maven coordinates) a
    JavaJarExpansionService starts with (`_classpath`; no accessor)."""
    return list(getattr(service, "_classpath", None) or [])


def replace_expansion_service(transform, service):
    """Makes the ExternalTransform `transform` expand in `service`."""
    transform._expansion_service = service


def _date_logical_type():
    """Beam's logical type for dates (`beam:logical_type:date:v1`: days since
    the epoch as an int64, `datetime.date` in Python). Beam before
    2.73 has none in Python; there the runner registers one with the
    same URN and representation through Beam's public registry, so a Spark
    date column reads and writes the same on every supported release."""
    import datetime

    import numpy as np
    from apache_beam.typehints import schemas

    if hasattr(schemas, "Date"):
        return schemas.Date

    class Date(schemas.NoArgumentLogicalType[datetime.date, np.int64]):
        EPOCH = datetime.date(1970, 1, 1)

        @classmethod
        def urn(cls):
            return "beam:logical_type:date:v1"

        @classmethod
        def representation_type(cls):
            return np.int64

        @classmethod
        def language_type(cls):
            return datetime.date

        def to_representation_type(self, value):
            return (value - self.EPOCH).days

        def to_language_type(self, value):
            return self.EPOCH + datetime.timedelta(days=int(value))

    return schemas.LogicalType.register_logical_type(Date)


DATE_LOGICAL_TYPE = _date_logical_type()


def new_state_servicer():
    """An empty state servicer of the kind the in-process harness uses (a
    Java stage's state lives in one too: worker/java_harness.py)."""
    return _StateServicer()


# A WindowFn of another SDK (a Java expansion's) is opaque to Python; the
# runner only groups elements already in their windows, which needs no more
# than the window coder: Beam's FnApiRunner groups with this stand-in, whose
# URN registers with Python's WindowFns when its module is imported.
GENERIC_NON_MERGING_WINDOW_FN_URN = _fn_api_execution.GenericNonMergingWindowFn.URN
# WindowFns Python can decode (its own, less the pickled one's unknown code).
PYTHON_WINDOW_FN_URNS = frozenset(_fn_api_execution.SAFE_WINDOW_FNS) | {python_urns.PICKLED_WINDOWFN}


# The runner's end of a remote SDK harness's data stream: Beam's servicer
# keeps one data channel per connected worker id, with the same interface
# as the in-process channel (output_stream, output_timer_stream,
# input_elements). worker/java_harness.py serves it to Java's FnHarness.
BeamFnDataServicer = data_plane.BeamFnDataServicer


class ServedState:
    """The streaming runner's moves of one key-group's state in and out of
    a harness's state servicer (`self.state`, Beam's StateServicer) between
    micro-batches, shared by every harness whose state requests that
    servicer answers: the in-process Python SDK and Beam's Java SDK
    harness (worker/java_harness.py). A harness starts with
    `self._side_keys = set()`."""

    # StateServicer keeps user state in two private fields.
    def snapshot_state(self):
        """User state and ordered-list indexes as plain picklable data
        (side inputs installed with `install_side_inputs` excluded)."""
        state = self.state
        side = self._side_keys
        return (
            {k: list(v) for k, v in state._state.items() if v and k not in side},
            {k: list(v) for k, v in state._ordered_list_keys.items() if v},
        )

    def user_state_by_key(self):
        """User state (side inputs excluded) grouped by the encoded user key
        of each StateKey: {key: ((entries, ordered), [window bytes])}, the
        first part as `snapshot_state()` gives it for that key alone."""
        from apache_beam.portability.api import beam_fn_api_pb2

        state = self.state
        side = self._side_keys
        out = {}

        def part(state_key_bytes):
            parsed = beam_fn_api_pb2.StateKey.FromString(state_key_bytes)
            which = getattr(parsed, parsed.WhichOneof("type"))
            entry = out.get(which.key)
            if entry is None:
                entry = out[which.key] = (({}, {}), [])
            entry[1].append(which.window)
            return entry[0]

        for k, v in state._state.items():
            if v and k not in side:
                part(k)[0][k] = list(v)
        for k, v in state._ordered_list_keys.items():
            if v:
                part(k)[1][k] = list(v)
        return out

    def add_state(self, snapshot):
        """Adds a `snapshot_state()` result (of other keys) to the state."""
        entries, ordered = snapshot
        state = self.state
        for k, v in entries.items():
            state._state[k] = list(v)
        for k, v in ordered.items():
            state._ordered_list_keys[k].update(v)

    def restore_state(self, snapshot):
        """Replaces all state with a `snapshot_state()` result (None: empty)."""
        state = self.state
        state._state.clear()
        state._ordered_list_keys.clear()
        self._side_keys = set()
        if snapshot is not None:
            entries, ordered = snapshot
            for k, v in entries.items():
                state._state[k] = list(v)
            for k, v in ordered.items():
                state._ordered_list_keys[k].update(v)

    def drop_user_state(self, is_dropped):
        """Removes the user state entries whose StateKey `is_dropped` accepts
        (side inputs excluded); returns how many."""
        from apache_beam.portability.api import beam_fn_api_pb2

        state = self.state
        dropped = [
            k for k in state._state if k not in self._side_keys and is_dropped(beam_fn_api_pb2.StateKey.FromString(k))
        ]
        for k in dropped:
            del state._state[k]
        for k in [k for k in state._ordered_list_keys if is_dropped(beam_fn_api_pb2.StateKey.FromString(k))]:
            del state._ordered_list_keys[k]
        return len(dropped)

    def install_side_inputs(self, entries):
        """Replaces the side-input entries the previous call installed with
        `entries` ((serialized StateKey, data) pairs), leaving user state
        alone: a stateful stage's side inputs change between bundles while
        its user state carries on."""
        state = self.state
        for key in self._side_keys:
            state._state.pop(key, None)
        self._side_keys = set()
        for key, data in entries:
            state_key = beam_fn_api_pb2.StateKey.FromString(key)
            state.append_raw(state_key, data)
            self._side_keys.add(state_key.SerializeToString())  # StateServicer's own key


class InProcessSdkHarness(ServedState):
    """An SDK worker that runs bundles in this process over in-memory planes.

    Guarantees: `run_bundle` returns only after the bundle finished; its data
    outputs are all returned; user state written by a bundle is visible to
    the next bundle of the same harness (state lives in `self.state`).
    """

    def __init__(self, descriptor: beam_fn_api_pb2.ProcessBundleDescriptor):
        self.descriptor = descriptor
        self.state = _StateServicer()
        self._data = data_plane.InMemoryDataChannel()
        self._cache = sdk_worker.BundleProcessorCache(
            FNAPI_RUNNER_CAPABILITIES,
            SingletonStateHandlerFactory(
                sdk_worker.GlobalCachingStateHandler(StateCache(STATE_CACHE_BYTES), self.state)
            ),
            data_plane.InMemoryDataChannelFactory(self._data.inverse()),
            {descriptor.id: descriptor},
        )
        self._worker = sdk_worker.SdkWorker(self._cache)
        self._next_id = 0
        self._side_keys = set()  # state keys install_side_inputs added

    def new_instruction_id(self) -> str:
        self._next_id += 1
        return "bundle_%d" % self._next_id

    def write_input(self, instruction_id, transform_id, blocks):
        out = self._data.output_stream(instruction_id, transform_id)
        for block in blocks:
            out.write(block)
        out.close()

    def write_timers(self, instruction_id, transform_id, timer_family_id, blocks):
        out = self._data.output_timer_stream(instruction_id, transform_id, timer_family_id)
        for block in blocks:
            out.write(block)
        out.close()

    def process(self, instruction_id):
        """Runs the bundle whose inputs were written; returns the response."""
        request = beam_fn_api_pb2.InstructionRequest(
            instruction_id=instruction_id,
            process_bundle=beam_fn_api_pb2.ProcessBundleRequest(process_bundle_descriptor_id=self.descriptor.id),
        )
        return self._worker.do_instruction(request)

    def read_outputs(self, instruction_id, expected):
        """Yields Elements.Data and Elements.Timers the bundle produced."""
        return self._data.input_elements(instruction_id, expected)

    def finalize(self, instruction_id):
        request = beam_fn_api_pb2.InstructionRequest(
            finalize_bundle=beam_fn_api_pb2.FinalizeBundleRequest(instruction_id=instruction_id)
        )
        return self._worker.do_instruction(request)

    def take_finalization_callbacks(self, instruction_id):
        """The callbacks the finished bundle `instruction_id` registered,
        uncalled; the SDK forgets them and releases the bundle's processor
        (as a FinalizeBundleRequest would after calling them)."""
        processor = self._cache.lookup(instruction_id)
        callbacks = []
        _capture.sink = callbacks
        try:
            processor.finalize_bundle()
        finally:
            _capture.sink = None
        self._cache.release(instruction_id)
        return callbacks

    def close(self):
        self._cache.shutdown()


def reread_global_side_inputs_every_bundle():
    """Beam's DoFn invoker computes, once per bundle processor, the arguments
    of a DoFn whose side inputs are all in the global window (beam#28776),
    which holds while such a side input is complete once read. A streaming
    side input seen at its latest trigger firing changes between bundles:
    the experiment Beam provides to turn that caching off is set in this
    process (RuntimeValueProvider.experiments: where Beam's SDK harness puts
    the pipeline's --experiments; our in-process harness has no options)."""
    from apache_beam.options.value_provider import RuntimeValueProvider

    RuntimeValueProvider.experiments = set(RuntimeValueProvider.experiments) | {"disable_global_windowed_args_caching"}


def fake_timer_endpoint():
    """Bundle processors only wire timers when a timer endpoint is named."""
    return endpoints_pb2.ApiServiceDescriptor(url="in-process")


def restriction_provider_of(do_fn_payload: bytes):
    """The RestrictionProvider of a splittable DoFn given as a ParDoPayload's
    `do_fn.payload`, found as Beam's SDK harness finds it (bundle_processor's
    SDF operations: the pickled DoFn's signature); Beam has no public API
    for it."""
    from apache_beam.internal import pickler
    from apache_beam.runners import common

    return common.DoFnSignature(pickler.loads(do_fn_payload)[0]).get_restriction_provider()


class _FrozenTime:
    """The `time` module as the modules below see it while the clock is
    frozen: `time()` and `time_ns()` answer the frozen instant, everything
    else (sleep, monotonic, ...) is the real module's."""

    def __init__(self, micros):
        self._micros = micros

    def time(self):
        return self._micros / 1e6

    def time_ns(self):
        return self._micros * 1000

    def __getattr__(self, name):
        return getattr(_time, name)


# The modules whose wall-clock reads decide what a streaming keyed stage
# outputs: `Timestamp.now()` (watermark estimators, `defer_remainder`'s
# delays, user code that asks Beam for the time) and PeriodicImpulse, which
# reads `time.time()` itself to decide which ticks are due. Beam has no
# clock to inject; each reads its module's global `time`.
_CLOCK_MODULES = ("apache_beam.utils.timestamp", "apache_beam.transforms.periodicsequence")


@contextlib.contextmanager
def frozen_wall_clock(micros):
    """While inside, Beam's wall clock (above) reads `micros` (epoch
    microseconds). A streaming keyed stage runs under the batch's journaled
    processing time so that running its task again gives the same output:
    Spark re-runs a finished stateful task whose shuffle output was lost
    with an executor, and keeps one attempt's state while the readers may
    have the other's output (tests/faults/test_executor_loss.py found a
    PeriodicImpulse emitting the ticks up to the re-run's own clock: every
    later tick was published twice)."""
    if micros is None:
        yield
        return
    modules = [importlib.import_module(name) for name in _CLOCK_MODULES]
    saved = [m.time for m in modules]
    frozen = _FrozenTime(micros)
    for m in modules:
        m.time = frozen
    try:
        yield
    finally:
        for m, t in zip(modules, saved):
            m.time = t


# --- private attributes of Beam's transforms and DoFns ------------------------


def write_to_files_temp_directory(transform):
    """The `temp_directory` a `fileio.WriteToFiles` was given (a string, a
    ValueProvider or None): Beam keeps it only in a private field, which its
    expand fills with a random name (translation/file_sink_overrides.py
    replaces that with a stable one before expand runs)."""
    return transform._temp_directory  # pylint: disable=protected-access


def read_from_text_source(transform):
    """The `_TextSource` a `ReadFromText` reads through, or None: Beam
    exposes a ReadFromText's settings only on it."""
    return getattr(transform, "_source", None)


# A _TextSource's settings the runner's own text read reproduces, by the
# private field that holds each.
TEXT_SOURCE_FIELDS = (
    "_pattern",
    "_coder",
    "_compression_type",
    "_delimiter",
    "_escapechar",
    "_skip_header_lines",
    "_strip_trailing_newlines",
    "_header_matcher",
    "_header_processor",
)
MISSING = object()


def text_source_fields(source):
    """{field: value} of a `_TextSource`'s TEXT_SOURCE_FIELDS (MISSING for one
    it lacks), or None for anything else."""
    from apache_beam.io import textio

    if type(source) is not textio._TextSource:  # pylint: disable=protected-access
        return None
    return {name: getattr(source, name, MISSING) for name in TEXT_SOURCE_FIELDS}


def dofn_processes_batches(dofn):
    """Whether a DoFn processes batches (`process_batch`, or a `process`
    that yields batches): DoFn keeps what its subclass defines in private
    flags. Raises for an object that is not a DoFn."""
    return bool(dofn._process_batch_defined or dofn._process_yields_batches)  # pylint: disable=protected-access


def dofn_processes_elements(dofn):
    """Whether a DoFn defines `process` (DoFn's private flag)."""
    return bool(dofn._process_defined)  # pylint: disable=protected-access


def callable_wrapper_function(dofn):
    """The function a `CallableWrapperDoFn` (what Map, FlatMap, MapTuple,
    ... make) calls per element, kept in its private `_fn`."""
    return dofn._fn  # pylint: disable=protected-access


def wrapped_user_callable(wrapper):
    """The user's callable inside one of Map's or MapTuple's wrapper
    functions (their closure variable `fn`), or None."""
    closure = getattr(wrapper, "__closure__", None)
    if not closure:
        return None
    cells = dict(zip(wrapper.__code__.co_freevars, closure))
    cell = cells.get("fn")
    return None if cell is None else cell.cell_contents


def is_write_bundle_dofn(fn):
    """Whether `fn` is the DoFn of a bounded WriteImpl's `WriteBundles` step
    (`iobase._WriteBundleDoFn`): the runner writes such a sink itself."""
    from apache_beam.io import iobase

    return type(fn) is iobase._WriteBundleDoFn  # pylint: disable=protected-access


def _write_to_files():
    from apache_beam.io import fileio

    return fileio.WriteToFiles("/nonexistent")


def _read_from_text():
    from apache_beam.io import textio

    return textio.ReadFromText("/nonexistent/*", validate=False)


def _a_dofn():
    class _Probe(core.DoFn):
        def process(self, element):
            yield element

    return _Probe()


def _bundle_finalizer_param():
    return core._BundleFinalizerParam()  # pylint: disable=protected-access


def _timestamp_fields():
    """The fields a Timestamp made from microseconds has: `micros` up to
    Beam 2.73; `_precision`, `_seconds` and `_subseconds` in later releases."""
    from apache_beam.utils.timestamp import Timestamp

    return tuple(sorted(vars(Timestamp(micros=1))))


_TIMESTAMP_FIELDS = _timestamp_fields()


def timestamps_from_micros(micros):
    """`[Timestamp(micros=m) for m in micros]` for ints (None stays None),
    made without Timestamp.__init__'s argument checks: a Spark timestamp
    column makes one Timestamp per row, and the checks cost more than half
    of each. Sets the fields __init__ sets at microsecond precision, in
    either of Beam's layouts (`_TIMESTAMP_FIELDS`)."""
    from apache_beam.utils.timestamp import Timestamp

    new = object.__new__
    made = []
    append = made.append
    if _TIMESTAMP_FIELDS == ("micros",):
        for m in micros:
            if m is None:
                append(None)
                continue
            t = new(Timestamp)
            t.micros = m
            append(t)
        return made
    for m in micros:
        if m is None:
            append(None)
            continue
        t = new(Timestamp)
        t._precision = 6
        t._seconds, t._subseconds = divmod(m, 1_000_000)
        append(t)
    return made


def _timestamps_made_as_beam_makes_them():
    from apache_beam.utils.timestamp import Timestamp

    values = (0, 1, -1, 999_999, -1_000_001, 1_764_201_600_123_456)
    made = timestamps_from_micros(values)
    return all(vars(t) == vars(Timestamp(micros=m)) and t == Timestamp(micros=m) for t, m in zip(made, values))


# (what, where the runner uses it, a check that it is still there): read by
# tests/unit/test_private_apis.py, which fails naming each one that moved.
PRIVATE_APIS = (
    (
        "apache_beam.internal.pickler.dumps and .loads",
        "every pickled DoFn, CombineFn, coder and sink the runner ships (translation/, worker/, execution/)",
        lambda: pickler.loads(pickler.dumps(len)) is len,
    ),
    (
        "fn_runner.FnApiMetrics",
        "result.py and execution/ui_metrics.py: MonitoringInfos queried as Beam's MetricResults",
        lambda: callable(getattr(FnApiMetrics({}, user_metrics_only=True), "query", None)),
    ),
    (
        "bundle_processor.DATA_INPUT_URN and DATA_OUTPUT_URN",
        "stage_plans, plain_stages, harness_stage, java_harness: a stage's runner-side inputs and outputs",
        lambda: DATA_INPUT_URN == "beam:runner:source:v1" and DATA_OUTPUT_URN == "beam:runner:sink:v1",
    ),
    (
        "statesampler.StateSampler, get_current_tracker and set_current_tracker",
        "plain_stage: the SDK's state sampler around plain Python steps",
        lambda: all(hasattr(statesampler, n) for n in ("StateSampler", "get_current_tracker", "set_current_tracker")),
    ),
    (
        "ExternalTransform._expansion_service, JavaJarExpansionService._classpath",
        "cross_language.expansion_services: the runner's expansion services for Beam's defaults",
        lambda: _external_transform_keeps_service(),
    ),
    (
        "fn_api_runner.execution.GenericNonMergingWindowFn.URN and SAFE_WINDOW_FNS",
        "stage_plans.runner_side_windowing: grouping under another SDK's WindowFn",
        lambda: isinstance(GENERIC_NON_MERGING_WINDOW_FN_URN, str) and len(PYTHON_WINDOW_FN_URNS) > 3,
    ),
    (
        "data_plane.BeamFnDataServicer.get_conn_by_worker_id, and its channel's output_stream, "
        "output_timer_stream and input_elements",
        "java_harness: the data plane served to Beam's Java SDK harness",
        lambda: all(
            hasattr(cls, name)
            for cls, name in (
                (BeamFnDataServicer, "get_conn_by_worker_id"),
                (data_plane._GrpcDataChannel, "output_stream"),
                (data_plane._GrpcDataChannel, "output_timer_stream"),
                (data_plane._GrpcDataChannel, "input_elements"),
            )
        ),
    ),
    (
        "fileio.WriteToFiles._temp_directory",
        "file_sink_overrides: a stable temporary directory",
        lambda: hasattr(_write_to_files(), "_temp_directory"),
    ),
    (
        "textio.ReadFromText._source (a textio._TextSource with %s)" % ", ".join(TEXT_SOURCE_FIELDS),
        "native_io_overrides: the runner's own text read",
        lambda: MISSING not in (text_source_fields(read_from_text_source(_read_from_text())) or {"": MISSING}).values(),
    ),
    (
        "CallableWrapperDoFn._fn, and the closure variable `fn` of Map's wrapper",
        "plain_callables: Map and MapTuple called without their wrappers",
        lambda: wrapped_user_callable(callable_wrapper_function(core.Map(len).fn)) is len,
    ),
    (
        "iobase._WriteBundleDoFn",
        "native_io_protos: the runner's own bounded file writes in a submitted proto",
        lambda: isinstance(importlib.import_module("apache_beam.io.iobase")._WriteBundleDoFn, type),
    ),
    (
        "DoFn._process_defined, _process_batch_defined, _process_yields_batches",
        "plain_callables: which DoFns run as plain Python",
        lambda: dofn_processes_elements(_a_dofn()) and not dofn_processes_batches(_a_dofn()),
    ),
    (
        "core._BundleFinalizerParam.finalize_bundle and ._callbacks",
        "bundle finalization after the runner holds a bundle's output",
        lambda: callable(_sdk_finalize_bundle) and hasattr(_bundle_finalizer_param(), "_callbacks"),
    ),
    (
        "statecache._size_func, _get_referents_func, _filter_func",
        "weigh_cached_state: the SDK harness's state cache weigher",
        lambda: all(hasattr(statecache, n) for n in ("_size_func", "_get_referents_func", "_filter_func")),
    ),
    (
        "worker_handlers.StateServicer._state and ._ordered_list_keys",
        "the in-process harness's state (side inputs, user state moved between paths)",
        lambda: hasattr(StateServicer(), "_state") and hasattr(StateServicer(), "_ordered_list_keys"),
    ),
    (
        "apache_beam.utils.timestamp.time and apache_beam.transforms.periodicsequence.time",
        "frozen_wall_clock: a replayed batch reads the journaled processing time",
        lambda: all(hasattr(importlib.import_module(name), "time") for name in _CLOCK_MODULES),
    ),
    (
        "Timestamp's fields (micros up to Beam 2.73; _precision, _seconds and _subseconds later)",
        "spark_rows: a Spark timestamp column's Timestamps, one per row",
        _timestamps_made_as_beam_makes_them,
    ),
    (
        "IntervalWindow._start_micros and ._end_micros (Cython fields)",
        "windowing/window_keys.py: cheap window keys in the reduce driver",
        lambda: _interval_window_has_micros(),
    ),
)


def _external_transform_keeps_service():
    from apache_beam.transforms.external import ExternalTransform

    from apache_beam.transforms.external import JavaJarExpansionService

    return expansion_service_of(ExternalTransform("beam:test:urn", None, "localhost:1")) == "localhost:1" and (
        expansion_classpath_of(JavaJarExpansionService("x.jar", classpath=["a:b:1"])) == ["a:b:1"]
    )


def _interval_window_has_micros():
    from apache_beam.transforms.window import IntervalWindow

    w = IntervalWindow(1, 2)
    return getattr(w, "_start_micros", None) == 1_000_000 and getattr(w, "_end_micros", None) == 2_000_000
