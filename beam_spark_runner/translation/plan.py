"""The execution plan: what each Spark step runs, as plain immutable data.

A plan is an ordered tuple of `StagePlan`s (topological order) plus the
`GroupPlan` of every GroupByKey the runner performs. It carries serialized
protos only, so it pickles cheaply into Spark closures, and `describe()`
prints it without running anything.
"""
import dataclasses
from typing import Dict, Optional, Tuple

from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_fn_api_pb2, beam_runner_api_pb2
from apache_beam.runners.portability.fn_api_runner import translations
from apache_beam.runners.worker import bundle_processor
from apache_beam.utils import proto_utils

from beam_spark_runner.translation.native_io import NATIVE_IO_URNS
from beam_spark_runner.worker.beam_internals import fake_timer_endpoint
from beam_spark_runner.worker.python_stage import PythonStageSpec, plan_python_stage

IMPULSE = "impulse"
_SDF_PROCESS_URN = common_urns.sdf_components.PROCESS_SIZED_ELEMENTS_AND_RESTRICTIONS.urn
MATERIALIZE = "materialize"
GROUP = "group"


@dataclasses.dataclass(frozen=True)
class BufferRef:
    """A runner-side buffer: where a stage reads or writes a PCollection."""
    kind: str          # IMPULSE, MATERIALIZE or GROUP
    name: str          # PCollection id (materialize) or GBK transform id (group)

    @classmethod
    def parse(cls, buffer_id: bytes) -> "BufferRef":
        if buffer_id == translations.IMPULSE_BUFFER:
            return cls(IMPULSE, "")
        kind, name = translations.split_buffer_id(buffer_id)
        return cls(kind, name)

    def __str__(self):
        return "%s:%s" % (self.kind, self.name) if self.name else self.kind


@dataclasses.dataclass(frozen=True)
class DataPort:
    """A data input or output transform of a stage and the buffer behind it."""
    transform_id: str
    buffer: BufferRef
    coder_id: str


@dataclasses.dataclass(frozen=True)
class SideInputPlan:
    transform_id: str      # the consuming ParDo
    tag: str               # its side input local name
    pcollection: str
    access_pattern: str    # side input URN: iterable or multimap
    coder_id: str          # windowed (safe) coder of the materialized PCollection


@dataclasses.dataclass(frozen=True)
class NativeTransform:
    """A transform Spark runs itself (translation/native_io.py)."""
    transform_id: str
    urn: str
    payload: bytes


@dataclasses.dataclass(frozen=True)
class StagePlan:
    """One fused stage: run by the SDK harness over Spark partitions."""
    name: str
    descriptor: bytes                  # serialized ProcessBundleDescriptor
    inputs: Tuple[DataPort, ...]
    outputs: Tuple[DataPort, ...]
    side_inputs: Tuple[SideInputPlan, ...]
    timers: Tuple[Tuple[str, str], ...]  # (transform id, timer family id)
    keyed: bool                        # stateful: input partitioned by key
    rebalance: bool                    # SDF restrictions: spread over partitions
    sdk_transforms: Tuple[str, ...]    # user-facing transform names (Spark UI)
    # Set when every transform can run as a plain Python loop (batch only):
    # see worker/python_stage.py. None: the SDK harness runs the stage.
    python_spec: Optional[PythonStageSpec] = None
    # Set for a stage holding a runner-native read or write (no SDK code).
    native: Optional[NativeTransform] = None
    # A DoFn of the stage requests bundle finalization: batch runs its
    # callbacks after the Spark job that ran the bundle succeeded, and feeds
    # SDF residuals back in later jobs (execution/finalization.py).
    finalizes: bool = False

    @property
    def display_name(self):
        names = [n for n in self.sdk_transforms if n] or [self.name]
        return names[0] if len(names) == 1 else "%s ... %s" % (names[0], names[-1])


@dataclasses.dataclass(frozen=True)
class LiftedCombine:
    """The combiner lifted around a GroupByKey (Beam's `lift_combiners`:
    Precombine -> GroupByKey -> MergeAccumulators): the GroupByKey groups
    accumulators, which it may merge as they arrive."""
    combine_fn: bytes           # serialized FunctionSpec of the CombineFn
    data_input_coder_id: str    # SDK-side windowed KV<K, Accumulator> coder of the input


@dataclasses.dataclass(frozen=True)
class GroupPlan:
    """A GroupByKey done by Spark: a shuffle on encoded keys, then windowing."""
    name: str                   # the GroupByKey transform id
    display_name: str           # its user-facing name
    input_coder_id: str         # windowed KV<K, V> coder written by producers
    output_coder_id: str        # windowed KV<K, Iterable<V>> coder read by consumers
    windowing_strategy_id: str
    combine: Optional[LiftedCombine] = None


@dataclasses.dataclass(frozen=True)
class ExecutionPlan:
    stages: Tuple[StagePlan, ...]
    groups: Dict[str, GroupPlan]
    components: bytes           # serialized Components (coders, windowing, ...)

    def describe(self) -> str:
        """A readable listing of the plan, stage by stage."""
        lines = []
        for i, stage in enumerate(self.stages):
            lines.append("Stage %d: %s%s%s%s" % (
                i, stage.display_name, "  [keyed: partitioned by key]" if stage.keyed else "",
                "  [restrictions spread over partitions]" if stage.rebalance else "",
                "  [plain Python]" if stage.python_spec else
                "  [run by Spark]" if stage.native else ""))
            for port in stage.inputs:
                src = port.buffer
                if src.kind == GROUP:
                    src = "%s (GroupByKey as a Spark shuffle)" % self.groups[src.name].display_name
                lines.append("    reads  %s" % src)
            for si in stage.side_inputs:
                lines.append("    side input %s of %s <- %s (%s, broadcast)" % (
                    si.tag, si.transform_id, si.pcollection,
                    si.access_pattern.split(":")[-2]))
            for name in stage.sdk_transforms:
                lines.append("    runs   %s" % name)
            for port in stage.outputs:
                lines.append("    writes %s" % port.buffer)
        return "\n".join(lines)

    def consumers(self):
        """buffer -> number of stage inputs and side inputs that read it."""
        counts = {}
        for stage in self.stages:
            for port in stage.inputs:
                counts[port.buffer] = counts.get(port.buffer, 0) + 1
            for si in stage.side_inputs:
                ref = BufferRef(MATERIALIZE, si.pcollection)
                counts[ref] = counts.get(ref, 0) + 1
        return counts


def _port(transform, coder_id):
    return DataPort(transform.unique_name, BufferRef.parse(transform.spec.payload), coder_id)


def build_plan(context, stages, plain_python=True) -> ExecutionPlan:
    """Turns Beam's optimized stages into an ExecutionPlan.

    `plain_python`: stages made only of simple callables and combiner phases
    run as plain Python loops (worker/python_stage.py); False keeps every
    stage on the SDK harness."""
    components = context.components
    data_coders = context.data_channel_coders
    safe = context.safe_coders
    stage_plans = []
    groups = {}
    lifted = lifted_combines(context, stages)
    for index, stage in enumerate(stages):
        inputs, outputs, side_inputs, names = [], [], [], []
        transforms = {}
        native = None
        finalizes = False
        for t in stage.transforms:
            t = _copy(t)
            if t.spec.urn == bundle_processor.DATA_INPUT_URN:
                coder_id = data_coders[translations.only_element(t.outputs.values())]
                inputs.append(_port(t, coder_id))
                t.spec.payload = beam_fn_api_pb2.RemoteGrpcPort(coder_id=coder_id).SerializeToString()
            elif t.spec.urn == bundle_processor.DATA_OUTPUT_URN:
                pcoll = translations.only_element(t.inputs.values())
                coder_id = data_coders[pcoll]
                port = _port(t, coder_id)
                outputs.append(port)
                if port.buffer.kind == GROUP:
                    groups[port.buffer.name] = _group_plan(context, port.buffer.name,
                                                           lifted.get(port.buffer.name))
                t.spec.payload = beam_fn_api_pb2.RemoteGrpcPort(coder_id=coder_id).SerializeToString()
            else:
                names.append(t.unique_name)
                if t.spec.urn in NATIVE_IO_URNS:
                    native = NativeTransform(t.unique_name, t.spec.urn, t.spec.payload)
                if t.spec.urn in translations.PAR_DO_URNS:
                    payload = proto_utils.parse_Bytes(t.spec.payload, beam_runner_api_pb2.ParDoPayload)
                    finalizes = finalizes or payload.requests_finalization
                    for tag, si in payload.side_inputs.items():
                        pcoll = t.inputs[tag]
                        side_inputs.append(SideInputPlan(
                            t.unique_name, tag, pcoll, si.access_pattern.urn,
                            safe.get(data_coders[pcoll], data_coders[pcoll])))
            transforms[t.unique_name] = t
        descriptor = beam_fn_api_pb2.ProcessBundleDescriptor(
            id="stage_%d" % index,
            transforms=transforms,
            pcollections=dict(components.pcollections.items()),
            coders=dict(components.coders.items()),
            windowing_strategies=dict(components.windowing_strategies.items()),
            environments=dict(components.environments.items()),
            timer_api_service_descriptor=fake_timer_endpoint(),
        )
        stage_plans.append(StagePlan(
            name=stage.name,
            descriptor=descriptor.SerializeToString(),
            inputs=tuple(inputs),
            outputs=tuple(outputs),
            side_inputs=tuple(side_inputs),
            timers=tuple(sorted(stage.timers)),
            keyed=stage.is_stateful(),
            rebalance=any(t.spec.urn == _SDF_PROCESS_URN for t in stage.transforms),
            sdk_transforms=tuple(names),
            python_spec=(plan_python_stage(descriptor, [p.transform_id for p in inputs],
                                           [p.transform_id for p in outputs])
                         if plain_python and not side_inputs and not stage.timers
                         and native is None else None),
            native=native,
            finalizes=finalizes,
        ))
    return ExecutionPlan(tuple(stage_plans), groups, components.SerializeToString())


def _group_plan(context, gbk_id, combine=None) -> GroupPlan:
    components = context.components
    gbk = components.transforms[gbk_id]
    in_pcoll = translations.only_element(gbk.inputs.values())
    out_pcoll = translations.only_element(gbk.outputs.values())
    data_coders, safe = context.data_channel_coders, context.safe_coders
    return GroupPlan(
        name=gbk_id,
        display_name=gbk.unique_name or gbk_id,
        input_coder_id=safe[data_coders[in_pcoll]],
        output_coder_id=safe[data_coders[out_pcoll]],
        windowing_strategy_id=components.pcollections[in_pcoll].windowing_strategy_id,
        combine=combine,
    )


_PRECOMBINE_URN = common_urns.combine_components.COMBINE_PER_KEY_PRECOMBINE.urn
_MERGE_URN = common_urns.combine_components.COMBINE_PER_KEY_MERGE_ACCUMULATORS.urn
_RUNNER_IO_URNS = (bundle_processor.DATA_INPUT_URN, bundle_processor.DATA_OUTPUT_URN)


def lifted_combines(context, stages) -> Dict[str, LiftedCombine]:
    """GroupByKey id -> LiftedCombine, for each GroupByKey whose input comes
    only from a Precombine and whose output goes only to MergeAccumulators
    of the same CombineFn (what Beam's `lift_combiners` builds). Merging the
    accumulators it groups changes nothing its readers can see: they merge
    them anyway."""
    producers, consumers = {}, {}
    for stage in stages:
        for t in stage.transforms:
            if t.spec.urn in _RUNNER_IO_URNS:
                continue
            for pcoll in t.outputs.values():
                producers[pcoll] = t
            for pcoll in t.inputs.values():
                consumers.setdefault(pcoll, []).append(t)
    out = {}
    for gbk_id, gbk in context.components.transforms.items():
        if gbk.spec.urn != common_urns.primitives.GROUP_BY_KEY.urn:
            continue
        in_pcoll = translations.only_element(gbk.inputs.values())
        out_pcoll = translations.only_element(gbk.outputs.values())
        pre, readers = producers.get(in_pcoll), consumers.get(out_pcoll, [])
        if pre is None or pre.spec.urn != _PRECOMBINE_URN or not readers:
            continue
        fn = _combine_fn(pre)
        if all(r.spec.urn == _MERGE_URN and _combine_fn(r) == fn for r in readers):
            coder_id = context.data_channel_coders.get(in_pcoll)
            if coder_id is not None:
                out[gbk_id] = LiftedCombine(fn, coder_id)
    return out


def _combine_fn(transform) -> bytes:
    payload = proto_utils.parse_Bytes(transform.spec.payload, beam_runner_api_pb2.CombinePayload)
    return payload.combine_fn.SerializeToString()


def _copy(transform):
    copied = beam_runner_api_pb2.PTransform()
    copied.CopyFrom(transform)
    return copied


__all__ = [
    "BufferRef", "DataPort", "SideInputPlan", "StagePlan", "NativeTransform", "GroupPlan", "LiftedCombine",
    "ExecutionPlan", "build_plan", "IMPULSE", "MATERIALIZE", "GROUP",
]
