"""The plans translation produces and execution runs: immutable typed records.

Both: a fused stage's `StagePlan` (its serialized ProcessBundleDescriptor, data
ports, side inputs, timers and what it is: stateful, splittable) and the
`GroupPlan` of every GroupByKey the runner performs, reading and writing
runner-side buffers (`BufferRef`). Batch (`ExecutionPlan`): the stages in
topological order. Streaming (`StreamingPlan`): the chain of micro-batch
`Operator`s of one Structured Streaming query, its sources, and where rows
go (`Dest`: typed here, serialized to the query's row column only by
streaming/rows.py). Records carry serialized protos only, so they pickle
cheaply into Spark closures; `describe()` prints a plan without running
anything.

Planning lives in translation/ (stage_plans.py for both, batch_plan.py,
streaming_plan.py); the executor side (worker/, streaming/, execution/) reads
these records and never imports the planners. This module imports no Beam
(Spark's helper processes load streaming/rows.py, which uses `Dest`).
"""

import dataclasses
import enum
import functools
from typing import Dict, FrozenSet, Optional, Tuple


class BufferKind(enum.Enum):
    """What a runner-side buffer holds (Beam's buffer ids: impulse,
    materialize, group)."""

    IMPULSE = "impulse"  # Impulse's one element
    MATERIALIZE = "materialize"  # a PCollection
    GROUP = "group"  # a GroupByKey: its input written, its output read


@dataclasses.dataclass(frozen=True)
class BufferRef:
    """A runner-side buffer: where a stage reads or writes a PCollection."""

    kind: BufferKind
    name: str  # PCollection id (materialize) or GBK transform id (group); "" for impulse

    def __str__(self):
        return "%s:%s" % (self.kind.value, self.name) if self.name else self.kind.value


@dataclasses.dataclass(frozen=True)
class DataPort:
    """A data input or output transform of a stage and the buffer behind it."""

    transform_id: str
    buffer: BufferRef
    coder_id: str


class EnvironmentKind(enum.Enum):
    """Which SDK harness runs a stage's transforms."""

    PYTHON = "python"  # this Beam's Python SDK, in Spark's Python workers
    JAVA = "java"  # Beam's Java SDK harness, a JVM per executor and job


@dataclasses.dataclass(frozen=True)
class StageEnvironment:
    """The environment a stage runs in: its kind, the SDK it declares
    (`apache/beam_java17_sdk:2.71.0`) and, for Java, the jars of the
    harness's classpath (local paths, in the environment's order)."""

    kind: EnvironmentKind
    sdk: str = ""
    classpath: Tuple[str, ...] = ()
    jvm_options: Tuple[str, ...] = ()  # Java: the harness JVM's options
    # Java: the job's pipeline options as the harness reads them (its
    # PIPELINE_OPTIONS: JSON of `beam:option:<name>:v1` keys)
    pipeline_options: str = ""

    @property
    def is_java(self) -> bool:
        return self.kind is EnvironmentKind.JAVA

    def describe(self) -> str:
        if self.kind is EnvironmentKind.PYTHON:
            return "python"
        count = len(self.classpath)
        return "%s (%s, %d jar%s)" % (self.kind.value, self.sdk, count, "" if count == 1 else "s")


PYTHON_ENVIRONMENT = StageEnvironment(EnvironmentKind.PYTHON)


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
    stateful: bool  # user state or timers: its input goes by key
    splittable: bool  # runs a splittable DoFn: its restrictions can be spread
    sdk_transforms: Tuple[str, ...]  # user-facing transform names (Spark UI)
    # Set when every transform can run as a plain Python loop (batch and
    # streaming): see worker/plain_stage.py. None: the SDK harness runs it.
    plain_spec: Optional[object] = None  # worker.plain_stage.PlainStageSpec
    # Set for a stage holding a runner-native read or write (no SDK code).
    native: Optional[NativeTransform] = None
    # A DoFn of the stage requests bundle finalization: batch runs its
    # callbacks after the Spark job that ran the bundle succeeded, and feeds
    # SDF residuals back in later jobs (execution/batch_finalization.py).
    finalizes: bool = False
    # The SDK harness the stage's transforms run in (never mixed: fusion
    # stops at an environment's edge).
    environment: StageEnvironment = PYTHON_ENVIRONMENT
    # The transforms of the stage whose DoFn requires stable input
    # (@RequiresStableInput): a retry must hand the stage the very elements
    # the first attempt had. Batch materializes the stage's input first
    # (execution/batch_execution.py); streaming holds it one micro-batch in
    # the checkpoint (streaming/stable_input.py).
    stable_input: Tuple[str, ...] = ()

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
                    "  [keyed: partitioned by key]" if stage.stateful else "",
                    "  [restrictions spread over partitions]" if stage.splittable else "",
                    "  [plain Python]" if stage.plain_spec else "  [run by Spark]" if stage.native else "",
                )
            )
            if stage.environment.kind is not EnvironmentKind.PYTHON:
                lines.append("    environment %s" % stage.environment.describe())
            for port in stage.inputs:
                src = port.buffer
                if src.kind == BufferKind.GROUP:
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
                ref = BufferRef(BufferKind.MATERIALIZE, si.pcollection)
                counts[ref] = counts.get(ref, 0) + 1
        return counts


# --- streaming -------------------------------------------------------------


class OperatorKind(enum.Enum):
    """What a streaming operator is (docs/streaming.md)."""

    STATELESS = "stateless"  # a fused stage over each batch's rows (mapInArrow)
    STATEFUL = "stateful"  # a stage with user state or timers
    GROUP = "group"  # a GroupByKey with its windowing and trigger
    SDF = "sdf"  # a stage running a splittable DoFn
    SIDE_INPUTS = "side_inputs"  # a stage reading side inputs


# Keyed operators that keep each user key's state as its own entry of the
# state store (streaming/keyed_state.py); the others keep one blob per
# key-group (their state does not grow with user keys).
PER_KEY_STATE_KINDS = frozenset({OperatorKind.GROUP, OperatorKind.STATEFUL})

IMPULSE_SOURCE = "impulse"


class DestKind(enum.Enum):
    """Where a row of the streaming query is addressed."""

    IMPULSE = "impulse"  # Impulse's element, to the stage that reads it
    MATERIALIZED = "materialize"  # a PCollection, to the stages that read it
    GROUPED = "group"  # a GroupByKey's output, to the stages that read it
    GROUP_INPUT = "gbk"  # a GroupByKey's input, to the GroupByKey


@functools.total_ordering
@dataclasses.dataclass(frozen=True)
class Dest:
    """A row destination: `kind` and the stage, PCollection or GroupByKey it
    names. streaming/rows.py writes it to (and reads it from) a row.
    Ordered by kind, then name."""

    kind: DestKind
    name: str

    def __lt__(self, other):
        if not isinstance(other, Dest):
            return NotImplemented
        return (self.kind.value, self.name) < (other.kind.value, other.name)

    @classmethod
    def impulse(cls, stage_name: str) -> "Dest":
        return cls(DestKind.IMPULSE, stage_name)

    @classmethod
    def read_from(cls, ref: BufferRef) -> "Dest":
        """Where rows a stage reads from buffer `ref` are addressed."""
        if ref.kind == BufferKind.GROUP:
            return cls(DestKind.GROUPED, ref.name)
        if ref.kind == BufferKind.MATERIALIZE:
            return cls(DestKind.MATERIALIZED, ref.name)
        raise ValueError("an Impulse buffer is read through Dest.impulse(stage)")

    @classmethod
    def written_to(cls, ref: BufferRef) -> "Dest":
        """Where rows a stage writes to buffer `ref` are addressed: a
        GroupByKey's input is the GroupByKey, everything else its readers."""
        if ref.kind == BufferKind.GROUP:
            return cls(DestKind.GROUP_INPUT, ref.name)
        return cls.read_from(ref)

    @classmethod
    def grouped(cls, gbk: str) -> "Dest":
        return cls(DestKind.GROUPED, gbk)

    @classmethod
    def group_input(cls, gbk: str) -> "Dest":
        return cls(DestKind.GROUP_INPUT, gbk)

    @classmethod
    def materialized(cls, pcollection: str) -> "Dest":
        return cls(DestKind.MATERIALIZED, pcollection)

    def describe(self) -> str:
        return "%s %s" % (self.kind.value, self.name)


def source_key(test_stream: str, tag: str) -> str:
    """A TestStream output's name as a watermark source: each tag has its own."""
    return "%s#%s" % (test_stream, tag)


@dataclasses.dataclass(frozen=True)
class TestStreamSource:
    name: str  # the TestStream transform id
    display_name: str
    payload: bytes  # serialized TestStreamPayload
    outputs: Tuple[Tuple[str, Dest, str], ...]  # (tag, dest, windowed coder id)


@dataclasses.dataclass(frozen=True)
class SparkSource:
    """A Spark streaming data source (ReadFromSpark): its rows enter the
    query beside the Beam source and go to `dest`, encoded with `coder_id`;
    its watermark follows its data (streaming/source_watermarks.py)."""

    name: str  # the read's transform id (its watermark source name)
    display_name: str
    payload: bytes  # io/spark/planning.SparkReadConfig, pickled
    dest: Dest
    coder_id: str  # windowed coder of its output
    out_of_orderness_us: int = 0
    idle_timeout_us: Optional[int] = None
    # The plain-Python stateless operator that alone reads `dest`: it runs
    # in the source's own task on the rows as read (never encoded), and not
    # again in the chain. None: the rows are encoded and addressed to `dest`.
    fused_operator: Optional[str] = None
    # Its transform's URN: the glue that reads it (execution/runner_io_glue.py).
    urn: str = "beam_spark_runner:transform:read_spark:v1"


@dataclasses.dataclass(frozen=True)
class SparkSink:
    """A runner sink at the end of the query (registered by `urn`,
    translation/runner_io.py): the rows addressed to `dest` are staged by
    the query's foreachBatch end with the staging the URN registered, and
    published once their batch is a completed checkpoint."""

    name: str  # the write's transform id
    display_name: str
    # the connector's config, pickled (io/spark/planning.SparkWriteConfig,
    # io/database/sink_protocol.DatabaseWriteConfig, ...), by `urn`
    payload: bytes
    dest: Dest
    coder_id: str  # windowed coder of its input
    urn: str = "beam_spark_runner:transform:write_spark:v1"


@dataclasses.dataclass(frozen=True)
class Operator:
    kind: OperatorKind
    name: str  # unique: stage name or GBK transform id
    display_name: str
    inputs: Tuple[Dest, ...]  # dests this operator consumes
    stage: object = None  # StagePlan (all but GROUP)
    group: object = None  # GroupPlan (GROUP)
    side_inputs: Tuple = ()  # ((Dest, SideInputPlan), ...) (SIDE_INPUTS, STATEFUL, SDF)
    # STATELESS reading an SDF operator's output: its rows are spread over
    # key-groups by element and re-partitioned by key-group before it runs.
    rebalance_input: bool = False
    # Inputs a later operator reads too (a side input of several stages):
    # their rows are passed on as well as consumed.
    pass_on: Tuple[Dest, ...] = ()
    # The watermark percentile this keyed operator runs under
    # (streaming/watermark_lanes.py), and whether its key-groups report a
    # summary of their holds (some lane reads them at a percentile below 1).
    watermark_percentile: float = 1.0
    summarize_holds: bool = False
    # The stage requires stable input (StagePlan.stable_input): it runs one
    # micro-batch behind its input, which its key-groups hold in the
    # checkpoint (streaming/stable_input.py); a stateless stage is keyed
    # for it.
    stable_input: bool = False

    @property
    def is_keyed(self):
        return self.kind != OperatorKind.STATELESS or self.stable_input

    def output_dests(self) -> Tuple[Dest, ...]:
        """Where this operator's output rows are addressed."""
        if self.kind == OperatorKind.GROUP:
            return (Dest.grouped(self.name),)
        return tuple(Dest.written_to(port.buffer) for port in self.stage.outputs)


@dataclasses.dataclass(frozen=True)
class StreamingPlan:
    sources: Tuple[TestStreamSource, ...]
    impulse_dests: Tuple[Dest, ...]  # dests that receive Impulse's element
    operators: Tuple[Operator, ...]  # topological order
    keyed_dests: Dict[Dest, Optional[str]]  # dest -> windowed KV coder id to key rows by
    # (None: key by the whole element)
    element_coders: Dict[Dest, str]  # dest -> element coder id, where keyed_dests is None
    broadcast_dests: Tuple[Dest, ...]  # side inputs: a copy for every key-group
    # streaming.watermarks.StageInputs, per keyed operator, topological
    watermark_graph: Dict[str, object]
    side_watermarks: Dict[str, Dict[Dest, object]]  # op -> side dest -> StageInputs of what feeds it
    components: bytes
    spark_sources: Tuple[SparkSource, ...] = ()
    spark_sinks: Tuple[SparkSink, ...] = ()
    # Keyed operators whose output watermark is their input watermark of
    # the same batch (translation/same_batch_watermarks.py)
    same_batch_stages: FrozenSet[str] = frozenset()

    def for_operators(self) -> "StreamingPlan":
        """What an operator needs of the plan besides itself: the row
        addressing and the components, without the operators' stages
        (sent once per run to the executors, and named by every
        operator's UDF: execution/streaming_udfs.SharedPlan)."""
        return dataclasses.replace(
            self,
            sources=(),
            operators=(),
            watermark_graph={},
            side_watermarks={},
            spark_sources=(),
            spark_sinks=(),
            same_batch_stages=frozenset(),
        )

    def describe(self) -> str:
        lines = []
        for s in self.sources:
            lines.append(
                "Source %s (TestStream) -> %s" % (s.display_name, ", ".join(d.describe() for _, d, _ in s.outputs))
            )
        for s in self.spark_sources:
            fused = " (read by operator %s in the same task)" % s.fused_operator if s.fused_operator else ""
            lines.append("Source %s (Spark readStream) -> %s%s" % (s.display_name, s.dest.describe(), fused))
        if self.impulse_dests:
            lines.append("Source Impulse -> %s" % ", ".join(d.describe() for d in self.impulse_dests))
        for i, op in enumerate(self.operators):
            how = {
                OperatorKind.STATELESS: "mapInArrow"
                + (" after repartition by key-group" if op.rebalance_input else ""),
                OperatorKind.STATEFUL: "transformWithState by key-group",
                OperatorKind.SDF: "splittable DoFn as transformWithState by key-group",
                OperatorKind.SIDE_INPUTS: "side inputs held per key-group, transformWithState by key-group",
                OperatorKind.GROUP: "GroupByKey as transformWithState by key-group",
            }[op.kind]
            if op.kind == OperatorKind.STATELESS and op.stable_input:
                how = "transformWithState by key-group"
            if op.stage is not None and op.stage.plain_spec is not None:
                how += ", plain Python"
            if op.stable_input:
                how += ", input held one micro-batch in the checkpoint (stable input)"
            lines.append("Operator %d: %s  [%s]" % (i, op.display_name, how))
            lines.append("    reads  %s" % ", ".join(d.describe() for d in op.inputs))
            for dest in op.output_dests():
                lines.append("    writes %s" % dest.describe())
        for s in self.spark_sinks:
            lines.append("Sink %s (Spark writer, published per completed checkpoint)" % s.display_name)
            lines.append("    reads  %s" % s.dest.describe())
        return "\n".join(lines)
