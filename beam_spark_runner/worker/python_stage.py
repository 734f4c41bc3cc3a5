"""Runs simple fused stages as plain Python loops instead of the SDK harness.

Beam's SDK harness costs about a microsecond of CPU per element per fused
step (operations, receivers, DoFnRunner, state sampling), several times what
the user's own lambda costs. Most pipelines are dominated by stages made only
of `Map`/`FlatMap`/`Filter`/`MapTuple`-style ParDos and the phases of a lifted
combiner, and those need none of the harness's machinery. `plan_python_stage`
recognizes such a stage; `PythonStageRunner` runs it step by step over whole
blocks of decoded elements.

Guarantees (each mirrors what Beam's harness does for the same transforms):
- a ParDo's callable sees each element once; its outputs keep the input's
  timestamp, windows and pane, except a `TimestampedValue` output (re-windowed
  with the input's WindowFn), a `WindowedValue` output (taken as is) and a
  `TaggedOutput` (routed to that output);
- lifted combiners pre-combine per (window, key) with the CombineFn's own
  `add_inputs`, compact their accumulators, and bound the number of keys held
  as Beam's `PGBKCVOperation` does; merge / extract / convert / grouped-values
  phases call the CombineFn exactly as Beam's `PhasedCombineFnExecutor`;
- user metrics are attributed to the transform that reported them (each step
  runs inside that transform's metrics container), and element counts are
  reported per PCollection as the harness reports them;
- a user exception fails the stage with its traceback and the transform name.

A stage with anything else (DoFn classes, side inputs, state, timers,
splittable DoFns, DoFn parameters such as `TimestampParam`) runs on the
harness: `plan_python_stage` returns None for it.
"""
import collections
import dataclasses
import traceback
from typing import Dict, Optional, Tuple

from apache_beam.coders.coder_impl import create_InputStream, create_OutputStream
from apache_beam.internal import pickler
from apache_beam.metrics import monitoring_infos
from apache_beam.metrics.execution import MetricsContainer
from apache_beam.portability import common_urns, python_urns
from apache_beam.portability.api import beam_fn_api_pb2, beam_runner_api_pb2
from apache_beam.runners import common as runners_common
from apache_beam.runners.worker import bundle_processor, statesampler
from apache_beam.transforms import core, window
from apache_beam.transforms.combiners import PhasedCombineFnExecutor, curry_combine_fn
from apache_beam.transforms.window import TimestampedValue
from apache_beam.utils import proto_utils
from apache_beam.utils.windowed_value import WindowedValue

from beam_spark_runner.worker import context
from beam_spark_runner.worker.stage_runner import StageFailed

PARDO = "pardo"
PRECOMBINE = "precombine"
_COMBINE = common_urns.combine_components
# URN -> phase of PhasedCombineFnExecutor; precombine is handled separately.
_COMBINE_PHASES = {
    _COMBINE.COMBINE_PER_KEY_MERGE_ACCUMULATORS.urn: "merge",
    _COMBINE.COMBINE_PER_KEY_EXTRACT_OUTPUTS.urn: "extract",
    _COMBINE.COMBINE_PER_KEY_CONVERT_TO_ACCUMULATORS.urn: "convert",
    _COMBINE.COMBINE_GROUPED_VALUES.urn: "all",
}
_PRECOMBINE_URN = _COMBINE.COMBINE_PER_KEY_PRECOMBINE.urn
_PAR_DO_URN = common_urns.primitives.PAR_DO.urn
# Any DoFn parameter default (ElementParam, TimestampParam, StateParam(...), ...)
# is an instance of this class; such a callable needs the harness.
_DOFN_PARAM_TYPE = type(core.DoFn.ElementParam)
# Outputs of a callable the harness treats specially (common._OutputHandler).
_SPECIAL_OUTPUTS = (core.pvalue.TaggedOutput, WindowedValue, TimestampedValue)
# Beam's PGBKCVOperation bounds its table the same way.
_MAX_PRECOMBINE_KEYS = 100 * 1000
_ELEMENT_COUNT = monitoring_infos.ELEMENT_COUNT_URN


@dataclasses.dataclass(frozen=True)
class Step:
    """One transform of a plain-Python stage."""
    transform_id: str
    name: str
    kind: str                       # PARDO, PRECOMBINE or a combine phase
    input_pcoll: str
    outputs: Tuple[Tuple[str, str], ...]   # (tag, pcollection)


@dataclasses.dataclass(frozen=True)
class PythonStageSpec:
    """What `PythonStageRunner` runs; pure data, built on the driver."""
    input_pcolls: Tuple[str, ...]          # per stage input, in input order
    steps: Tuple[Step, ...]                # topological order
    output_pcolls: Tuple[str, ...]         # per stage output, in output order


def plan_python_stage(descriptor, input_ids, output_ids) -> Optional[PythonStageSpec]:
    """The PythonStageSpec of a stage, or None if it needs the SDK harness.

    `input_ids` / `output_ids`: the stage's data input / output transform ids
    in the order of the stage plan's ports.
    """
    transforms = descriptor.transforms
    steps = []
    for tid, t in transforms.items():
        urn = t.spec.urn
        if urn in (bundle_processor.DATA_INPUT_URN, bundle_processor.DATA_OUTPUT_URN):
            continue
        if len(t.inputs) != 1:
            return None
        input_pcoll = next(iter(t.inputs.values()))
        outputs = tuple(sorted(t.outputs.items()))
        if urn == _PAR_DO_URN:
            if _python_callable(t) is None:
                return None
            kind = PARDO
        elif urn == _PRECOMBINE_URN:
            kind = PRECOMBINE
        elif urn in _COMBINE_PHASES:
            kind = _COMBINE_PHASES[urn]
        else:
            return None
        steps.append(Step(tid, t.unique_name, kind, input_pcoll, outputs))
    if not steps:
        return None
    input_pcolls = tuple(next(iter(transforms[i].outputs.values())) for i in input_ids)
    output_pcolls = tuple(next(iter(transforms[o].inputs.values())) for o in output_ids)
    ordered = _topological(steps, input_pcolls)
    if ordered is None:
        return None
    return PythonStageSpec(input_pcolls, ordered, output_pcolls)


# DoFn parameters the plain path can fill from the element itself.
_ELEMENT_PARAMS = (
    (core.DoFn.TimestampParam, "timestamp"),
    (core.DoFn.WindowParam, "window"),
    (core.DoFn.PaneInfoParam, "pane"),
)


def _python_callable(transform):
    """(callable, args, kwargs, params) of a ParDo the plain path can run,
    else None; `params` maps keyword names to 'timestamp'/'window'/'pane'."""
    payload = proto_utils.parse_Bytes(transform.spec.payload, beam_runner_api_pb2.ParDoPayload)
    if (payload.side_inputs or payload.state_specs or payload.timer_family_specs
            or payload.restriction_coder_id or payload.requests_finalization
            or payload.do_fn.urn != python_urns.PICKLED_DOFN_INFO):
        return None
    try:
        dofn, args, kwargs = pickler.loads(payload.do_fn.payload)[:3]
    except Exception:  # e.g. planning a proto from another process: use the harness
        return None
    # Exactly Map/FlatMap/Filter/MapTuple/FlatMapTuple's wrapper: a subclass
    # could add start_bundle, setup, ... which only the harness honours.
    if type(dofn) is not core.CallableWrapperDoFn:
        return None
    try:
        method = runners_common.DoFnSignature(dofn).process_method
    except Exception:
        return None
    if any(isinstance(a, _DOFN_PARAM_TYPE) for a in list(args) + list(kwargs.values())):
        return None
    params = {}
    defaults = list(method.defaults)
    names = method.args[len(method.args) - len(defaults):] if defaults else []
    for name, default in zip(names, defaults):
        if not isinstance(default, _DOFN_PARAM_TYPE):
            continue
        kind = next((k for param, k in _ELEMENT_PARAMS if param == default), None)
        if kind is None:
            return None
        params[name] = kind
    if params and (args or kwargs):
        return None   # the harness interleaves placeholders and extra arguments
    return dofn.process, tuple(args), dict(kwargs), params


def _topological(steps, input_pcolls):
    """Steps ordered so each runs after the step producing its input."""
    available = set(input_pcolls)
    remaining = list(steps)
    ordered = []
    while remaining:
        ready = [s for s in remaining if s.input_pcoll in available]
        if not ready:
            return None
        for s in ready:
            ordered.append(s)
            remaining.remove(s)
            available.update(pcoll for _, pcoll in s.outputs)
    return tuple(ordered)


class StepFailed(RuntimeError):
    """User code of a step raised; the message carries its traceback."""


class PythonStageRunner:
    """Runs one PythonStageSpec over the blocks of one Spark partition.

    Input and output are the same as `StageRunner.run`: `(index, block)`
    pairs of elements encoded with the ports' coders.
    """

    def __init__(self, stage, spec: PythonStageSpec, components: bytes):
        self.stage = stage
        self.spec = spec
        descriptor = beam_fn_api_pb2.ProcessBundleDescriptor.FromString(stage.descriptor)
        ctx = context.components_context(components)
        self._input_impls = [ctx.coders[p.coder_id].get_impl() for p in stage.inputs]
        # A PCollection may feed several data outputs (e.g. Flatten((pc, pc))).
        self._output_impls = collections.defaultdict(list)
        for i, (pcoll, port) in enumerate(zip(spec.output_pcolls, stage.outputs)):
            self._output_impls[pcoll].append((i, ctx.coders[port.coder_id].get_impl()))
        self._consumers = collections.defaultdict(list)
        for step in spec.steps:
            self._consumers[step.input_pcoll].append(step)
        self._sampler = statesampler.StateSampler("python-stage", _NoCounters())
        self._containers = {}
        self._executors = {}
        for step in spec.steps:
            container = MetricsContainer(step.transform_id)
            self._containers[step.transform_id] = container
            scoped = self._sampler.scoped_state(
                runners_common.NameContext(step.name, step.transform_id), "process",
                metrics_container=container)
            self._executors[step.transform_id] = _make_executor(
                step, descriptor.transforms[step.transform_id], descriptor, ctx, scoped)
        self._counts = collections.Counter()
        self._pending = {}      # output index -> [encoded elements]

    # -- running -----------------------------------------------------------
    def run(self, tagged_blocks, bundle_bytes):
        """Yields (output index, block) for all input blocks of the partition."""
        try:
            yield from self._run(tagged_blocks, bundle_bytes)
        except StepFailed as e:
            raise StageFailed("Beam stage %r failed:\n%s" % (self.stage.display_name, e)) from None

    def _run(self, tagged_blocks, bundle_bytes):
        self._sampler.start()
        try:
            for executor in self._executors.values():
                executor.setup()
            for index, block in tagged_blocks:
                pcoll = self.spec.input_pcolls[index]
                values = _decode_all(self._input_impls[index], block)
                self._counts[pcoll] += len(values)
                self._deliver(pcoll, values)
                yield from self._flush(bundle_bytes)
            for step in self.spec.steps:
                executor = self._executors[step.transform_id]
                for tag_pcoll, values in executor.finish():
                    self._emit(tag_pcoll, values)
            yield from self._flush(0)
            for executor in self._executors.values():
                executor.teardown()
        finally:
            self._sampler.stop()

    def _deliver(self, pcoll, values):
        """Feeds `values` of `pcoll` to its consumers, depth first."""
        if not values:
            return
        for index, impl in self._output_impls.get(pcoll, ()):
            self._pending.setdefault(index, []).append((impl, values))
        for step in self._consumers.get(pcoll, ()):
            for out_pcoll, out_values in self._executors[step.transform_id].process(values):
                self._emit(out_pcoll, out_values)

    def _emit(self, pcoll, values):
        if pcoll is None:   # the output of a tag nobody declared
            return
        self._counts[pcoll] += len(values)
        self._deliver(pcoll, values)

    def _flush(self, min_elements):
        """Yields encoded blocks of pending outputs (all when min is 0)."""
        for index in list(self._pending):
            batches = self._pending[index]
            if min_elements and sum(len(v) for _, v in batches) < 1024:
                continue
            del self._pending[index]
            stream = create_OutputStream()
            for impl, values in batches:
                encode = impl.encode_to_stream
                for wv in values:
                    encode(wv, stream, True)
            yield index, stream.get()

    # -- metrics -------------------------------------------------------------
    @property
    def monitoring_infos(self):
        infos = []
        for tid, container in self._containers.items():
            infos.extend(container.to_runner_api_monitoring_infos(tid).values())
        for pcoll, count in self._counts.items():
            infos.append(monitoring_infos.int64_counter(_ELEMENT_COUNT, count, pcollection=pcoll))
        return infos

    def close(self):
        pass


class _NoCounters:
    """The state sampler wants a counter factory; we report no msec counters."""

    def get_counter(self, *args, **kwargs):
        from apache_beam.utils.counters import Counter, CounterName
        return Counter(CounterName("unused"), Counter.SUM)


def _decode_all(impl, block):
    stream = create_InputStream(block)
    decode = impl.decode_from_stream
    values = []
    append = values.append
    while stream.size() > 0:
        append(decode(stream, True))
    return values


def _make_executor(step, transform, descriptor, ctx, scoped):
    if step.kind == PARDO:
        fn, args, kwargs, params = _python_callable(transform)
        windowing = ctx.windowing_strategies[descriptor.pcollections[step.input_pcoll].windowing_strategy_id]
        return _ParDoExecutor(step, fn, args, kwargs, params, windowing.windowfn, scoped)
    combine_fn = _combine_fn(transform, ctx)
    if step.kind == PRECOMBINE:
        windowing = ctx.windowing_strategies[descriptor.pcollections[step.input_pcoll].windowing_strategy_id]
        return _PrecombineExecutor(step, combine_fn, windowing, scoped)
    return _CombinePhaseExecutor(step, combine_fn, scoped)


def _combine_fn(transform, ctx):
    payload = proto_utils.parse_Bytes(transform.spec.payload, beam_runner_api_pb2.CombinePayload)
    return core.CombineFn.from_runner_api(payload.combine_fn, ctx)


class _Executor:
    def __init__(self, step, scoped):
        self.step = step
        self._scoped = scoped
        # The harness's rule (operations.DoOperation): the main output is the
        # only output, else the one tagged 'None'; a tag with no output is
        # dropped.
        self._tags = dict(step.outputs)
        if len(step.outputs) == 1:
            self._main = step.outputs[0][1]
        else:
            self._main = self._tags.get("None")

    def setup(self):
        pass

    def finish(self):
        return ()

    def teardown(self):
        pass

    def _failed(self):
        return StepFailed("%s\n[while running %r]" % (traceback.format_exc().rstrip(), self.step.name))


class _ParDoExecutor(_Executor):
    def __init__(self, step, fn, args, kwargs, params, windowfn, scoped):
        super().__init__(step, scoped)
        if args or kwargs:
            self._call = lambda value: fn(value, *args, **kwargs)
        else:
            self._call = fn
        self._params = params
        self._per_window = "window" in params.values()
        self._windowfn = windowfn

    def process(self, values):
        call = self._call
        params = self._params
        if params and self._per_window:
            values = [wv if len(wv.windows) == 1 else WindowedValue(wv.value, wv.timestamp, (w,))
                      for wv in values for w in wv.windows]
        main = []
        append = main.append
        tagged = None
        with self._scoped:
            try:
                for wv in values:
                    results = call(wv.value, **_param_values(wv, params)) if params else call(wv.value)
                    if results is None:
                        continue
                    with_value = wv.with_value
                    for r in results:
                        if isinstance(r, _SPECIAL_OUTPUTS):
                            tag, out = self._special(wv, r)
                            if tag is None:
                                append(out)
                            else:
                                tagged = tagged or collections.defaultdict(list)
                                tagged[tag].append(out)
                        else:
                            append(with_value(r))
            except StepFailed:
                raise
            except Exception:
                raise self._failed() from None
        outputs = [(self._main, main)] if main and self._main else []
        if tagged:
            for tag, outs in tagged.items():
                if tag in self._tags:
                    outputs.append((self._tags[tag], outs))
        return outputs

    def _special(self, wv, result):
        """(tag or None, WindowedValue) as common._OutputHandler makes them."""
        tag = None
        if isinstance(result, core.pvalue.TaggedOutput):
            tag = result.tag
            if not isinstance(tag, str):
                raise TypeError("In %s, tag %s is not a string" % (self.step.name, tag))
            result = result.value
        if isinstance(result, WindowedValue):
            out = result
            if len(wv.windows) != 1:
                out.windows *= len(wv.windows)
        elif isinstance(result, TimestampedValue):
            assign = window.WindowFn.AssignContext(result.timestamp, result.value)
            out = WindowedValue(result.value, result.timestamp, self._windowfn.assign(assign))
            if len(wv.windows) != 1:
                out.windows *= len(wv.windows)
        else:
            out = wv.with_value(result)
        return tag, out


def _param_values(wv, params):
    return {name: (wv.timestamp if kind == "timestamp" else
                   wv.windows[0] if kind == "window" else wv.pane_info)
            for name, kind in params.items()}


class _PrecombineExecutor(_Executor):
    """Beam's lifted pre-combine: one accumulator per (window, key) held until
    the partition ends or the table is full."""

    def __init__(self, step, combine_fn, windowing, scoped):
        super().__init__(step, scoped)
        self._fn = curry_combine_fn(combine_fn, [], {})
        self._default_windowing = windowing.is_default()
        tsc = windowing.timestamp_combiner
        self._timestamp_combiner = (
            None if tsc == window.TimestampCombiner.OUTPUT_AT_EOW
            else window.TimestampCombiner.get_impl(tsc, windowing.windowfn))
        self._compact = (None if type(self._fn).compact is core.CombineFn.compact
                         else self._fn.compact)
        self._table = {}

    def setup(self):
        with self._scoped:
            self._fn.setup()

    def process(self, values):
        batch = collections.defaultdict(list)
        timestamps = {}
        if self._default_windowing:
            for wv in values:
                key, value = wv.value
                batch[key].append(value)
        else:
            combine = self._timestamp_combiner
            for wv in values:
                key, value = wv.value
                for w in wv.windows:
                    batch[(w, key)].append(value)
                    if combine is not None:
                        prev = timestamps.get((w, key))
                        timestamps[(w, key)] = wv.timestamp if prev is None else combine.combine(prev, wv.timestamp)
        fn = self._fn
        table = self._table
        out = []
        with self._scoped:
            try:
                for wkey, vals in batch.items():
                    entry = table.get(wkey)
                    if entry is None:
                        if len(table) >= _MAX_PRECOMBINE_KEYS:
                            out.extend(self._evict())
                        entry = table[wkey] = [fn.create_accumulator(), None]
                    entry[0] = fn.add_inputs(entry[0], vals)
                    if wkey in timestamps:
                        ts = timestamps[wkey]
                        entry[1] = ts if entry[1] is None else self._timestamp_combiner.combine(entry[1], ts)
            except Exception:
                raise self._failed() from None
        return [(self._main, out)] if out else []

    def _evict(self):
        """Outputs and forgets the oldest tenth of the table, as Beam does."""
        count = max(1, len(self._table) // 10)
        keys = [k for k, _ in zip(self._table, range(count))]
        return [self._output(k, *self._table.pop(k)) for k in keys]

    def finish(self):
        with self._scoped:
            try:
                out = [self._output(k, acc, ts) for k, (acc, ts) in self._table.items()]
            except Exception:
                raise self._failed() from None
        self._table = {}
        return [(self._main, out)] if out else []

    def _output(self, wkey, accumulator, timestamp):
        value = accumulator if self._compact is None else self._compact(accumulator)
        if self._default_windowing:
            return _GLOBAL.with_value((wkey, value))
        w, key = wkey
        if self._timestamp_combiner is None or timestamp is None:
            timestamp = w.max_timestamp()
        return WindowedValue((key, value), timestamp, (w,))

    def teardown(self):
        with self._scoped:
            self._fn.teardown()


_GLOBAL = WindowedValue(None, window.MIN_TIMESTAMP, (window.GlobalWindow(),))


class _CombinePhaseExecutor(_Executor):
    """Merge / extract / convert / grouped-values: one call per element."""

    def __init__(self, step, combine_fn, scoped):
        super().__init__(step, scoped)
        self._executor = PhasedCombineFnExecutor(step.kind, combine_fn, [], {})

    def setup(self):
        with self._scoped:
            self._executor.combine_fn.setup()

    def process(self, values):
        apply = self._executor.apply
        with self._scoped:
            try:
                out = [wv.with_value((wv.value[0], apply(wv.value[1]))) for wv in values]
            except Exception:
                raise self._failed() from None
        return [(self._main, out)]

    def teardown(self):
        with self._scoped:
            self._executor.combine_fn.teardown()
