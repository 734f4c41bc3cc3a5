"""Runs simple fused stages as plain Python loops instead of the SDK harness.

Beam's SDK harness costs about a microsecond of CPU per element per fused
step (operations, receivers, DoFnRunner, state sampling), several times what
the user's own lambda costs. Most pipelines are dominated by stages made only
of `Map`/`FlatMap`/`Filter`/`MapTuple`-style ParDos and the phases of a lifted
combiner, and those need none of the harness's machinery. The planner
recognizes such a stage (translation/plain_stages.py) and describes it as a
`PlainStageSpec`; `PlainStageRunner` runs it step by step over whole
blocks, decoded into runs of plain values (runs.py).

Guarantees:
- each step does what Beam's harness does for the same transform (see
  plain_steps.py for the rules on outputs, windows and combiners);
- user metrics are attributed to the transform that reported them (each step
  runs inside that transform's metrics container), and element counts are
  reported per PCollection as the harness reports them;
- a user exception fails the stage with its traceback and the transform name.

A stage with anything else (side inputs, state, timers, splittable DoFns,
batched DoFns, runtime type checks, DoFn parameters other than the
element's timestamp, window and pane) runs on the harness
(worker/harness_stage.py).
"""

import collections
import dataclasses
import traceback
from typing import Tuple

from apache_beam.metrics import monitoring_infos
from apache_beam.metrics.execution import MetricsContainer
from apache_beam.portability.api import beam_fn_api_pb2, beam_runner_api_pb2
from apache_beam.runners import common as runners_common
from beam_spark_runner.worker.beam_internals import statesampler
from apache_beam.transforms import core
from apache_beam.utils import proto_utils
from apache_beam.utils.counters import Counter, CounterName

from beam_spark_runner.worker import context, runs as runs_lib
from beam_spark_runner.worker.plain_callables import plain_callable
from beam_spark_runner.worker.plain_steps import (
    ASSIGN_WINDOWS,
    FLATTEN,
    PARDO,
    PRECOMBINE,
    AssignWindowsStep,
    CombinePhaseStep,
    FlattenStep,
    ParDoStep,
    PrecombineStep,
    StepFailed,
)
from beam_spark_runner.worker.harness_stage import StageFailed
from beam_spark_runner.worker.stateful_step import STATEFUL_PARDO, StatefulParDoStep, timer_domains

_ELEMENT_COUNT = monitoring_infos.ELEMENT_COUNT_URN
# Output blocks are cut once this many elements are pending for an output.
FLUSH_ELEMENTS = 8192
# Steps see at most this many values at a time: small enough that a step's
# output stays in the CPU caches (measured on word count: 8192-line chunks
# took 1.5x the time of 256-line ones), large enough to amortize the per-call
# work of each step.
CHUNK_ELEMENTS = 512
# A step whose values each produce many outputs (a DoFn generating events
# from a tick) gets fewer values per call, so that one call's output stays
# near this size: 512 ticks of 15,000 events each held 7.7M live outputs at
# once and doubled the per-event cost (benchmarks/streaming.py).
CHUNK_OUTPUT_TARGET = 8192


@dataclasses.dataclass(frozen=True)
class StepSpec:
    """One transform of a plain-Python stage."""

    transform_id: str
    name: str
    kind: str  # PARDO, ASSIGN_WINDOWS, PRECOMBINE or a combine phase
    input_pcoll: str
    outputs: Tuple[Tuple[str, str], ...]  # (tag, pcollection)


@dataclasses.dataclass(frozen=True)
class PlainStageSpec:
    """What `PlainStageRunner` runs; pure data, built on the driver."""

    input_pcolls: Tuple[str, ...]  # per stage input, in input order
    steps: Tuple[StepSpec, ...]  # topological order
    output_pcolls: Tuple[str, ...]  # per stage output, in output order


class PlainStageRunner:
    """Runs one PlainStageSpec over the blocks of one Spark partition.

    Input and output are the same as `HarnessStageRunner.run`: `(index, block)`
    pairs of elements encoded with the ports' coders.
    """

    def __init__(self, stage, spec: PlainStageSpec, components: bytes, descriptor=None):
        self.stage = stage
        self.spec = spec
        if descriptor is None:
            descriptor = beam_fn_api_pb2.ProcessBundleDescriptor.FromString(stage.descriptor)
        ctx = context.components_context(components)
        self._input_codecs = [runs_lib.RunCodec(ctx.coders[p.coder_id]) for p in stage.inputs]
        # A PCollection may feed several data outputs (e.g. Flatten((pc, pc))).
        self._output_codecs = collections.defaultdict(list)
        for i, (pcoll, port) in enumerate(zip(spec.output_pcolls, stage.outputs)):
            self._output_codecs[pcoll].append((i, runs_lib.RunCodec(ctx.coders[port.coder_id])))
        self._consumers = collections.defaultdict(list)
        for step in spec.steps:
            self._consumers[step.input_pcoll].append(step)
        self._sampler = statesampler.StateSampler("python-stage", _NoCounters())
        self._containers = {}
        self._steps = {}
        for step in spec.steps:
            container = MetricsContainer(step.transform_id)
            self._containers[step.transform_id] = container
            scoped = self._sampler.scoped_state(
                runners_common.NameContext(step.name, step.transform_id), "process", metrics_container=container
            )
            try:
                self._steps[step.transform_id] = _make_step(
                    step, descriptor.transforms[step.transform_id], descriptor, ctx, scoped
                )
            except Exception:
                raise StageFailed(
                    "Beam stage %r failed:\n%s\n[while loading %r]"
                    % (stage.display_name, traceback.format_exc().rstrip(), step.name)
                ) from None
        # The stage's stateful ParDo, if it has one (its root step).
        self.stateful = next((s for s in self._steps.values() if isinstance(s, StatefulParDoStep)), None)
        self._timer_domains = timer_domains(self.stateful.families) if self.stateful is not None else {}
        self._chunk_sizers = {step.transform_id: ChunkSizer() for step in spec.steps}
        self._counts = collections.Counter()
        self._pending = {}  # output index -> [codec, [runs], number of values]
        # Steps are set up once, before the first bundle (`run`), and torn
        # down by `close`; every `run` is one bundle (start / finish).
        self._set_up = False

    def run(self, tagged_blocks, bundle_bytes=None):
        """Yields (output index, block) for all input blocks: one bundle.
        A stateful stage then fires its timers in rounds (bounded input:
        the watermark is +infinity), a callback's new timers in the next."""
        return self._guarded(self._run(tagged_blocks, fire_all=True))

    def process(self, tagged_blocks, bundle_bytes=None):
        """Streaming: one bundle of these inputs; fires no timer."""
        return self._guarded(self._run(tagged_blocks))

    def fire_timers(self, is_due):
        """Streaming: one bundle firing the pending timers `is_due(family
        key, timer)` accepts, in rounds, in fire order within a round."""
        return self._guarded(self._run((), is_due=is_due))

    def timer_domain(self, family_key):
        """beam_runner_api_pb2.TimeDomain of a (transform id, family) key."""
        return self._timer_domains[family_key]

    def _guarded(self, outputs):
        try:
            yield from outputs
        except StepFailed as e:
            raise StageFailed("Beam stage %r failed:\n%s" % (self.stage.display_name, e)) from None

    def _run(self, tagged_blocks, fire_all=False, is_due=None):
        # The sampler is only the current tracker (user metrics find their
        # transform's container through it); its sampling thread is not
        # started: we report no msec counters.
        previous = statesampler.get_current_tracker()
        statesampler.set_current_tracker(self._sampler)
        try:
            if not self._set_up:
                self._set_up = True
                for step in self._steps.values():
                    step.setup()
            self._pending = {}  # what a failed bundle left is not output
            for step in self._steps.values():
                step.start_bundle()
            for index, runs in self._coalesced(tagged_blocks):
                yield from self._emit(self.spec.input_pcolls[index], runs)
            if self.stateful is not None and (fire_all or is_due is not None):
                table = self.stateful.table
                while True:
                    fired = table.take_due(is_due)
                    if not fired:
                        break
                    for pcoll, runs in self.stateful.fire(fired):
                        yield from self._emit(pcoll, runs)
            for spec in self.spec.steps:
                for pcoll, runs in self._steps[spec.transform_id].finish():
                    yield from self._emit(pcoll, runs)
            for index in list(self._pending):
                yield self._encode(index)
        finally:
            statesampler.set_current_tracker(previous)

    def _coalesced(self, tagged_blocks):
        """(input index, runs) of the blocks, consecutive blocks of one
        input handed on together (up to FLUSH_ELEMENTS values) with their
        runs merged where the metadata matches: streaming hands each
        element over as its own block, and a step called once per element
        costs several times one called per chunk."""
        pending_index, pending, held = None, [], 0
        copied = False  # the last pending run's values are our own copy
        for index, block in tagged_blocks:
            runs = block.runs if isinstance(block, runs_lib.DecodedBlock) else self._input_codecs[index].decode(block)
            if index != pending_index or held >= FLUSH_ELEMENTS:
                if pending:
                    yield pending_index, pending
                pending_index, pending, held = index, [], 0
            for run in runs:
                if pending and runs_lib.same_metadata(pending[-1][0], run[0]):
                    if not copied:
                        pending[-1] = (pending[-1][0], list(pending[-1][1]))
                        copied = True
                    pending[-1][1].extend(run[1])
                else:
                    pending.append(run)
                    copied = False
                held += len(run[1])
        if pending:
            yield pending_index, pending

    def _emit(self, pcoll, runs):
        """Feeds `runs` of `pcoll` to its data outputs and consumers, depth
        first: a ParDo in chunks of at most CHUNK_ELEMENTS values, a step
        whose output cannot outgrow its input (WindowInto, the combiner
        phases) all at once. Yields (output index, block) whenever an output
        holds FLUSH_ELEMENTS values, so a value with many outputs is handed
        to Spark as it goes, not held whole."""
        if not runs:
            return
        n = runs_lib.count(runs)
        self._counts[pcoll] += n
        for index, codec in self._output_codecs.get(pcoll, ()):
            pending = self._pending.setdefault(index, [codec, [], 0])
            pending[1].extend(runs)
            pending[2] += n
            if pending[2] >= FLUSH_ELEMENTS:
                yield self._encode(index)
        for spec in self._consumers.get(pcoll, ()):
            step = self._steps[spec.transform_id]
            if step.bounded_output:
                # Slicing its input would only copy the value lists: what it
                # outputs is no larger than what is already held.
                for out_pcoll, out_runs in step.process(runs):
                    yield from self._emit(out_pcoll, out_runs)
                continue
            sizer = self._chunk_sizers[spec.transform_id]
            for chunk in runs_lib.chunks(runs, sizer.size):
                outputs, produced = step.process(chunk), 0
                try:
                    for out_pcoll, out_runs in outputs:
                        produced += runs_lib.count(out_runs)
                        yield from self._emit(out_pcoll, out_runs)
                finally:
                    # A ParDo's outputs come from a generator: if a later step
                    # failed, end it now (it leaves its metrics scope).
                    close = getattr(outputs, "close", None)
                    if close is not None:
                        close()
                sizer.observe(runs_lib.count(chunk), produced)

    def _encode(self, index):
        """(index, block) of the pending outputs of output `index`, which
        are no longer pending."""
        codec, runs, _ = self._pending.pop(index)
        try:
            return index, codec.encode(runs)
        except Exception as e:
            raise StageFailed(self._encoding_failure(index, codec, e)) from None

    def _encoding_failure(self, index, codec, error):
        """The message for outputs the stage's data coder cannot encode (e.g.
        a DoFn emitting a WindowedValue in a window its PCollection's
        windowing strategy does not have), or that the worker had no memory
        left to encode: names the producing transform."""
        pcoll = self.spec.output_pcolls[index]
        producer = next((step.name for step in self.spec.steps if pcoll in (p for _, p in step.outputs)), pcoll)
        # Beam's OutputStream reports a failed allocation as an assertion.
        if isinstance(error, MemoryError) or "realloc failed" in str(error):
            return (
                "Beam stage %r failed: the Python worker ran out of memory encoding outputs of %r "
                "(%s: %s); give its workers more memory (spark.executor.pyspark.memory) or make "
                "fewer outputs per element" % (self.stage.display_name, producer, type(error).__name__, error)
            )
        return (
            "Beam stage %r failed: an output of %r cannot be encoded with its PCollection's coder "
            "%s (%s: %s). The windows of its elements must be those of the PCollection's "
            "windowing strategy and its values of the coder's type."
            % (self.stage.display_name, producer, codec.coder, type(error).__name__, error)
        )

    @property
    def monitoring_infos(self):
        infos = []
        for tid, container in self._containers.items():
            infos.extend(container.to_runner_api_monitoring_infos(tid).values())
        for pcoll, count in self._counts.items():
            infos.append(monitoring_infos.int64_counter(_ELEMENT_COUNT, count, pcollection=pcoll))
        return infos

    def take_monitoring_infos(self):
        """The metrics reported since the last call (streaming reports each
        micro-batch's own), and starts counting from zero."""
        infos = self.monitoring_infos
        for container in self._containers.values():
            container.reset()
        self._counts.clear()
        return infos

    def close(self):
        """Tears the steps down (DoFn.teardown, CombineFn.teardown) if they
        were set up."""
        if not self._set_up:
            return
        self._set_up = False
        try:
            for step in self._steps.values():
                step.teardown()
        except StepFailed as e:
            raise StageFailed("Beam stage %r failed:\n%s" % (self.stage.display_name, e)) from None


class ChunkSizer:
    """How many values a step gets per call: up to CHUNK_ELEMENTS, fewer
    while its calls produce more than CHUNK_OUTPUT_TARGET outputs. It starts
    at one value and doubles while the output stays small, so a step whose
    fan-out is not known yet never gets CHUNK_ELEMENTS values at once."""

    __slots__ = ("current",)

    def __init__(self):
        self.current = 1

    def size(self):
        return self.current

    def observe(self, values_in, values_out):
        if values_out > CHUNK_OUTPUT_TARGET:
            self.current = max(1, values_in * CHUNK_OUTPUT_TARGET // values_out)
        elif values_out * 2 <= CHUNK_OUTPUT_TARGET and self.current < CHUNK_ELEMENTS:
            self.current = min(CHUNK_ELEMENTS, self.current * 2)


class _NoCounters:
    """The state sampler wants a counter factory; we report no msec counters."""

    def get_counter(self, *args, **kwargs):
        return Counter(CounterName("unused"), Counter.SUM)


def _make_step(spec, transform, descriptor, ctx, scoped):
    windowing = ctx.windowing_strategies[descriptor.pcollections[spec.input_pcoll].windowing_strategy_id]
    if spec.kind == PARDO:
        plain = plain_callable(transform, loading=True)
        if plain is None:
            raise ValueError("%s was planned as a plain-Python step but is not one" % spec.name)
        return ParDoStep(spec, plain, windowing.windowfn, scoped)
    if spec.kind == FLATTEN:
        return FlattenStep(spec, scoped)
    if spec.kind == STATEFUL_PARDO:
        return StatefulParDoStep(spec, transform, descriptor, ctx, scoped)
    if spec.kind == ASSIGN_WINDOWS:
        strategy = beam_runner_api_pb2.WindowingStrategy.FromString(transform.spec.payload)
        return AssignWindowsStep(spec, core.Windowing.from_runner_api(strategy, ctx).windowfn, scoped)
    payload = proto_utils.parse_Bytes(transform.spec.payload, beam_runner_api_pb2.CombinePayload)
    combine_fn = core.CombineFn.from_runner_api(payload.combine_fn, ctx)
    if spec.kind == PRECOMBINE:
        return PrecombineStep(spec, combine_fn, windowing, scoped)
    return CombinePhaseStep(spec, combine_fn, scoped)
