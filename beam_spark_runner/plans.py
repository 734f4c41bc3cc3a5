"""The plans translation produces and execution runs: immutable typed records.

Batch (`ExecutionPlan`): an ordered tuple of `StagePlan`s (topological order)
plus the `GroupPlan` of every GroupByKey the runner performs, each reading
and writing runner-side buffers (`BufferRef`). Streaming (`StreamingPlan`):
the chain of micro-batch `Operator`s of one Structured Streaming query, its
sources, and which rows go where (`read_dest`, `write_dest`). Records carry
serialized protos only, so they pickle cheaply into Spark closures;
`describe()` prints a plan without running anything.

Planning lives in translation/ (batch_plan.py, streaming_plan.py); the
executor side (worker/, streaming/, execution/) reads these records and never
imports the planners.
"""

import dataclasses
from typing import Dict, Optional, Tuple

from apache_beam.runners.portability.fn_api_runner import translations


IMPULSE = "impulse"
MATERIALIZE = "materialize"
GROUP = "group"


@dataclasses.dataclass(frozen=True)
class BufferRef:
    """A runner-side buffer: where a stage reads or writes a PCollection."""

    kind: str  # IMPULSE, MATERIALIZE or GROUP
    name: str  # PCollection id (materialize) or GBK transform id (group)

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
    transform_id: str  # the consuming ParDo
    tag: str  # its side input local name
    pcollection: str
    access_pattern: str  # side input URN: iterable or multimap
    coder_id: str  # windowed (safe) coder of the materialized PCollection


@dataclasses.dataclass(frozen=True)
class NativeTransform:
    """A transform Spark runs itself (translation/native_io_overrides.py)."""

    transform_id: str
    urn: str
    payload: bytes


@dataclasses.dataclass(frozen=True)
class StagePlan:
    """One fused stage: run by the SDK harness over Spark partitions."""

    name: str
    descriptor: bytes  # serialized ProcessBundleDescriptor
    inputs: Tuple[DataPort, ...]
    outputs: Tuple[DataPort, ...]
    side_inputs: Tuple[SideInputPlan, ...]
    timers: Tuple[Tuple[str, str], ...]  # (transform id, timer family id)
    keyed: bool  # stateful: input partitioned by key
    rebalance: bool  # SDF restrictions: spread over partitions
    sdk_transforms: Tuple[str, ...]  # user-facing transform names (Spark UI)
    # Set when every transform can run as a plain Python loop (batch only):
    # see worker/plain_stage.py. None: the SDK harness runs the stage.
    plain_spec: Optional[object] = None  # worker.plain_stage.PlainStageSpec
    # Set for a stage holding a runner-native read or write (no SDK code).
    native: Optional[NativeTransform] = None
    # A DoFn of the stage requests bundle finalization: batch runs its
    # callbacks after the Spark job that ran the bundle succeeded, and feeds
    # SDF residuals back in later jobs (execution/batch_finalization.py).
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

    combine_fn: bytes  # serialized FunctionSpec of the CombineFn
    data_input_coder_id: str  # SDK-side windowed KV<K, Accumulator> coder of the input


@dataclasses.dataclass(frozen=True)
class GroupPlan:
    """A GroupByKey done by Spark: a shuffle on encoded keys, then windowing."""

    name: str  # the GroupByKey transform id
    display_name: str  # its user-facing name
    input_coder_id: str  # windowed KV<K, V> coder written by producers
    output_coder_id: str  # windowed KV<K, Iterable<V>> coder read by consumers
    windowing_strategy_id: str
    combine: Optional[LiftedCombine] = None


@dataclasses.dataclass(frozen=True)
class ExecutionPlan:
    stages: Tuple[StagePlan, ...]
    groups: Dict[str, GroupPlan]
    components: bytes  # serialized Components (coders, windowing, ...)

    def describe(self) -> str:
        """A readable listing of the plan, stage by stage."""
        lines = []
        for i, stage in enumerate(self.stages):
            lines.append(
                "Stage %d: %s%s%s%s"
                % (
                    i,
                    stage.display_name,
                    "  [keyed: partitioned by key]" if stage.keyed else "",
                    "  [restrictions spread over partitions]" if stage.rebalance else "",
                    "  [plain Python]" if stage.plain_spec else "  [run by Spark]" if stage.native else "",
                )
            )
            for port in stage.inputs:
                src = port.buffer
                if src.kind == GROUP:
                    src = "%s (GroupByKey as a Spark shuffle)" % self.groups[src.name].display_name
                lines.append("    reads  %s" % src)
            for si in stage.side_inputs:
                lines.append(
                    "    side input %s of %s <- %s (%s, broadcast)"
                    % (si.tag, si.transform_id, si.pcollection, si.access_pattern.split(":")[-2])
                )
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


# --- streaming -------------------------------------------------------------

STATELESS = "stateless"
STATEFUL = "stateful"
GROUP = "group"
SDF = "sdf"
SIDE_INPUTS = "side_inputs"
# Keyed operators that keep each user key's state as its own entry of the
# state store (streaming/keyed_state.py); the others keep one blob per
# key-group (their state does not grow with user keys).
PER_KEY_STATE_KINDS = frozenset({GROUP, STATEFUL})

IMPULSE_SOURCE = "impulse"


def source_key(test_stream: str, tag: str) -> str:
    """A TestStream output's name as a watermark source: each tag has its own."""
    return "%s#%s" % (test_stream, tag)


def read_dest(ref: BufferRef) -> str:
    """Where rows a stage reads from buffer `ref` are addressed."""
    return str(ref)


def write_dest(ref: BufferRef) -> str:
    """Where rows a stage writes to buffer `ref` are addressed: a GroupByKey's
    input is the group operator, everything else the readers."""
    return "gbk:%s" % ref.name if ref.kind == GROUP else str(ref)


@dataclasses.dataclass(frozen=True)
class TestStreamSource:
    name: str  # the TestStream transform id
    display_name: str
    payload: bytes  # serialized TestStreamPayload
    outputs: Tuple[Tuple[str, str, str], ...]  # (tag, dest, windowed coder id)


@dataclasses.dataclass(frozen=True)
class Operator:
    kind: str  # STATELESS, STATEFUL, SDF or GROUP
    name: str  # unique: stage name or GBK transform id
    display_name: str
    inputs: Tuple[str, ...]  # dests this operator consumes
    stage: object = None  # StagePlan (all but GROUP)
    group: object = None  # GroupPlan (GROUP)
    side_inputs: Tuple = ()  # ((dest, SideInputPlan), ...) (SIDE_INPUTS, STATEFUL, SDF)
    # STATELESS reading an SDF operator's output: its rows are spread over
    # key-groups by element and re-partitioned by key-group before it runs.
    rebalance_input: bool = False
    # Inputs a later operator reads too (a side input of several stages):
    # their rows are passed on as well as consumed.
    pass_on: Tuple[str, ...] = ()

    @property
    def is_keyed(self):
        return self.kind != STATELESS


@dataclasses.dataclass(frozen=True)
class StreamingPlan:
    sources: Tuple[TestStreamSource, ...]
    impulse_dests: Tuple[str, ...]  # dests that receive Impulse's element
    operators: Tuple[Operator, ...]  # topological order
    keyed_dests: Dict[str, str]  # dest -> windowed KV coder id to key rows by
    # (None: key by the whole element)
    element_coders: Dict[str, str]  # dest -> element coder id, where keyed_dests is None
    broadcast_dests: Tuple[str, ...]  # side inputs: a copy for every key-group
    # streaming.watermarks.StageInputs, per keyed operator, topological
    watermark_graph: Dict[str, object]
    side_watermarks: Dict[str, Dict[str, object]]  # op -> side dest -> StageInputs of what feeds it
    components: bytes

    def for_operators(self) -> "StreamingPlan":
        """What an operator needs of the plan besides itself: the row
        addressing and the components, without the other operators' stages
        (each operator's UDF carries its own copy: a query of 27 operators
        carried 21 MB of plans where 4.7 MB do)."""
        return dataclasses.replace(self, sources=(), operators=(), watermark_graph={}, side_watermarks={})

    def describe(self) -> str:
        lines = []
        for s in self.sources:
            lines.append("Source %s (TestStream) -> %s" % (s.display_name, ", ".join(d for _, d, _ in s.outputs)))
        if self.impulse_dests:
            lines.append("Source Impulse -> %s" % ", ".join(self.impulse_dests))
        for i, op in enumerate(self.operators):
            how = {
                STATELESS: "mapInArrow" + (" after repartition by key-group" if op.rebalance_input else ""),
                STATEFUL: "transformWithState by key-group",
                SDF: "splittable DoFn as transformWithState by key-group",
                SIDE_INPUTS: "side inputs held per key-group, transformWithState by key-group",
                GROUP: "GroupByKey as transformWithState by key-group",
            }[op.kind]
            if op.stage is not None and op.stage.plain_spec is not None:
                how += ", plain Python"
            lines.append("Operator %d: %s  [%s]" % (i, op.display_name, how))
            lines.append("    reads  %s" % ", ".join(op.inputs))
            if op.stage is not None:
                for port in op.stage.outputs:
                    lines.append("    writes %s" % write_dest(port.buffer))
            else:
                lines.append("    writes group:%s" % op.name)
        return "\n".join(lines)
