"""The plan of an unbounded pipeline: micro-batch operators as plain data.

Beam's phases fuse the pipeline as for batch (TestStream kept out of SDK
stages); this module turns the stages into an ordered chain of operators for
one Structured Streaming query:

* a *source* (TestStream, Impulse) emits data rows for the buffers its
  outputs feed, plus the control rows carrying each batch's times;
* a *stateless* operator runs a fused SDK stage over the rows addressed to
  its inputs (Spark `mapInArrow`);
* a *group* operator is a GroupByKey with its windowing and trigger, a
  *stateful* operator an SDK stage with user state or timers, and an *sdf*
  operator a stage running a splittable DoFn (PeriodicImpulse, unbounded
  reads), whose residuals wait in state until their resume time, and a
  *side_inputs* operator a stage reading side inputs, which keeps the side
  inputs seen so far (every key-group gets a copy) and holds back main input
  until the side input windows it needs are complete (an unbounded side
  input in the global window with a trigger: until it first fired, then it
  shows its latest firing); all keep state per key-group and run as a
  `transformWithState` keyed by key-group.

Rows name their destination (`dest`): "materialize:<pcoll>" and
"group:<gbk>" are what stages read (as in the batch plan's buffers),
"gbk:<gbk>" is a GroupByKey's input. Pure planning: no Spark here.
"""
import dataclasses
from typing import Dict, Tuple

from apache_beam.portability import common_urns

from beam_spark_runner.streaming.watermarks import StageInputs
from beam_spark_runner.translation import phases, plan as plan_lib
from beam_spark_runner.translation.requirements import UnsupportedPipelineError

STATELESS = "stateless"
STATEFUL = "stateful"
GROUP = "group"
SDF = "sdf"
SIDE_INPUTS = "side_inputs"

IMPULSE_SOURCE = "impulse"
STREAMING_ISSUE = "issue #5 (streaming)"
_TEST_STREAM_URN = common_urns.primitives.TEST_STREAM.urn


def source_key(test_stream: str, tag: str) -> str:
    """A TestStream output's name as a watermark source: each tag has its own."""
    return "%s#%s" % (test_stream, tag)


def read_dest(ref: plan_lib.BufferRef) -> str:
    """Where rows a stage reads from buffer `ref` are addressed."""
    return str(ref)


def write_dest(ref: plan_lib.BufferRef) -> str:
    """Where rows a stage writes to buffer `ref` are addressed: a GroupByKey's
    input is the group operator, everything else the readers."""
    return "gbk:%s" % ref.name if ref.kind == plan_lib.GROUP else str(ref)


@dataclasses.dataclass(frozen=True)
class TestStreamSource:
    name: str                                   # the TestStream transform id
    display_name: str
    payload: bytes                              # serialized TestStreamPayload
    outputs: Tuple[Tuple[str, str, str], ...]   # (tag, dest, windowed coder id)


@dataclasses.dataclass(frozen=True)
class Operator:
    kind: str                       # STATELESS, STATEFUL, SDF or GROUP
    name: str                       # unique: stage name or GBK transform id
    display_name: str
    inputs: Tuple[str, ...]         # dests this operator consumes
    stage: object = None            # StagePlan (all but GROUP)
    group: object = None            # GroupPlan (GROUP)
    side_inputs: Tuple = ()         # ((dest, SideInputPlan), ...) (SIDE_INPUTS, STATEFUL, SDF)
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
    impulse_dests: Tuple[str, ...]          # dests that receive Impulse's element
    operators: Tuple[Operator, ...]         # topological order
    keyed_dests: Dict[str, str]             # dest -> windowed KV coder id to key rows by
                                            # (None: key by the whole element)
    element_coders: Dict[str, str]          # dest -> element coder id, where keyed_dests is None
    broadcast_dests: Tuple[str, ...]        # side inputs: a copy for every key-group
    watermark_graph: Dict[str, StageInputs]  # keyed operators only, topological
    side_watermarks: Dict[str, Dict[str, StageInputs]]  # op -> side dest -> what feeds it
    components: bytes


    def describe(self) -> str:
        lines = []
        for s in self.sources:
            lines.append("Source %s (TestStream) -> %s" % (s.display_name, ", ".join(d for _, d, _ in s.outputs)))
        if self.impulse_dests:
            lines.append("Source Impulse -> %s" % ", ".join(self.impulse_dests))
        for i, op in enumerate(self.operators):
            how = {STATELESS: "mapInArrow" + (" after repartition by key-group" if op.rebalance_input else ""),
                   STATEFUL: "transformWithState by key-group",
                   SDF: "splittable DoFn as transformWithState by key-group",
                   SIDE_INPUTS: "side inputs held per key-group, transformWithState by key-group",
                   GROUP: "GroupByKey as transformWithState by key-group"}[op.kind]
            if op.stage is not None and op.stage.python_spec is not None:
                how += ", plain Python"
            lines.append("Operator %d: %s  [%s]" % (i, op.display_name, how))
            lines.append("    reads  %s" % ", ".join(op.inputs))
            if op.stage is not None:
                for port in op.stage.outputs:
                    lines.append("    writes %s" % write_dest(port.buffer))
            else:
                lines.append("    writes group:%s" % op.name)
        return "\n".join(lines)


def plan_streaming(pipeline_proto, drain=False, plain_python=True) -> StreamingPlan:
    """Plans an unbounded pipeline; raises UnsupportedPipelineError for what
    the streaming runner cannot run (checks common to both engines are in
    translation/requirements.py)."""
    context, stages = phases.create_stages(
        pipeline_proto, phases=phases.STREAMING_PHASES, drain=drain, runner_urns=phases.STREAMING_RUNNER_URNS)
    execution = plan_lib.build_plan(context, stages, plain_python=plain_python)
    test_streams = {}
    for stage in stages:
        for t in stage.transforms:
            if t.spec.urn == _TEST_STREAM_URN:
                test_streams[stage.name] = (t, {
                    next(iter(w.inputs.values())): w.unique_name for w in stage.transforms
                    if w.spec.urn == "beam:runner:sink:v1"})
    return from_execution_plan(execution, test_streams)


def from_execution_plan(execution: plan_lib.ExecutionPlan, test_streams) -> StreamingPlan:
    """`test_streams`: stage name -> (TestStream transform, {pcoll: sink id})."""
    sources, operators, impulse_dests = [], [], []
    keyed_dests, element_coders, broadcast = {}, {}, []
    sdf_outputs = {write_dest(port.buffer) for stage in execution.stages
                   if stage.rebalance and not stage.keyed for port in stage.outputs}
    for stage in execution.stages:
        if stage.name in test_streams:
            sources.append(_test_stream_source(stage, *test_streams[stage.name]))
            continue
        inputs = []
        for port in stage.inputs:
            if port.buffer.kind == plan_lib.IMPULSE:
                dest = "impulse:%s" % stage.name
                impulse_dests.append(dest)
            else:
                dest = read_dest(port.buffer)
            inputs.append(dest)
            if stage.keyed:
                keyed_dests[dest] = port.coder_id
            elif ((stage.rebalance or stage.side_inputs or dest in sdf_outputs)
                  and (dest.startswith(plan_lib.MATERIALIZE)
                       or (stage.side_inputs and port.buffer.kind == plan_lib.GROUP))):
                # One row per element: a stage with side inputs holds each
                # main-input element until its side windows are ready (a
                # GroupByKey's output too, not its blocks); restrictions are
                # spread over key-groups one by one.
                keyed_dests[dest] = None
                element_coders[dest] = port.coder_id
        for port in stage.outputs:
            if port.buffer.kind == plan_lib.GROUP:
                group = execution.groups[port.buffer.name]
                keyed_dests[write_dest(port.buffer)] = group.input_coder_id
        side = ()
        if stage.side_inputs:
            side = tuple((read_dest(plan_lib.BufferRef(plan_lib.MATERIALIZE, si.pcollection)), si)
                         for si in stage.side_inputs)
            broadcast.extend(d for d, _ in side if d not in broadcast)
        kind = STATEFUL if stage.keyed else SDF if stage.rebalance else SIDE_INPUTS if side else STATELESS
        operators.append(Operator(kind, stage.name, stage.display_name,
                                  tuple(inputs) + tuple(d for d, _ in side), stage=stage, side_inputs=side,
                                  rebalance_input=kind == STATELESS and any(d in sdf_outputs for d in inputs)))
    # A GroupByKey runs right before its first reader, after all its writers.
    ordered = []
    for op in operators:
        for dest in op.inputs:
            if dest.startswith(plan_lib.GROUP + ":"):
                gbk = dest.split(":", 1)[1]
                if gbk not in {o.name for o in ordered}:
                    group = execution.groups[gbk]
                    ordered.append(Operator(GROUP, gbk, group.display_name, ("gbk:%s" % gbk,), group=group))
        ordered.append(op)
    ordered = _with_pass_on(ordered)
    return StreamingPlan(
        sources=tuple(sources),
        impulse_dests=tuple(impulse_dests),
        operators=tuple(ordered),
        keyed_dests=keyed_dests,
        element_coders=element_coders,
        broadcast_dests=tuple(broadcast),
        watermark_graph=_watermark_graph(sources, impulse_dests, ordered),
        side_watermarks=_side_watermarks(sources, impulse_dests, ordered),
        components=execution.components,
    )


def _test_stream_source(stage, transform, by_pcoll):
    ports = {p.transform_id: p for p in stage.outputs}
    outputs = []
    for tag, pcoll in sorted(transform.outputs.items()):
        if pcoll in by_pcoll:   # an output nobody reads has no sink
            port = ports[by_pcoll[pcoll]]
            outputs.append((tag, write_dest(port.buffer), port.coder_id))
    return TestStreamSource(transform.unique_name, transform.unique_name,
                            transform.spec.payload, tuple(outputs))


def _watermark_graph(sources, impulse_dests, operators):
    """Which sources and keyed operators feed each keyed operator, looking
    through stateless operators (they hold nothing back)."""
    feeds = _feeds(sources, impulse_dests, operators)
    graph = {}
    for op in operators:
        if op.is_keyed:
            graph[op.name] = _stage_inputs(set().union(*(feeds.get(d, set()) for d in op.inputs)))
    return graph


def _placement(op, dest):
    """How rows of `dest` must be spread over key-groups for `op`: a copy in
    each ("broadcast", a side input), by user key ("key"), by element
    ("element"), or None when any spreading will do (a plain stateless op)."""
    if dest in {d for d, _ in op.side_inputs}:
        return "broadcast"
    if op.kind == STATEFUL:
        return "key"
    if op.kind in (SDF, SIDE_INPUTS) or op.rebalance_input:
        return "element"
    return None


def _with_pass_on(operators):
    """Sets each operator's `pass_on`: its inputs a later operator reads.
    Readers of one dest must agree on how its rows are spread over
    key-groups (the writer places each row once); otherwise the pipeline is
    rejected."""
    out = []
    for i, op in enumerate(operators):
        later = operators[i + 1:]
        shared = tuple(d for d in dict.fromkeys(op.inputs) if any(d in o.inputs for o in later))
        for dest in shared:
            readers = [op] + [o for o in later if dest in o.inputs]
            placements = {_placement(o, dest) for o in readers} - {None}
            if len(placements) > 1:
                raise UnsupportedPipelineError(
                    "%s and %s read the same PCollection (%s) in ways that need its elements spread "
                    "differently over Spark partitions (%s); not supported in streaming yet: %s" % (
                        readers[0].display_name, readers[1].display_name, dest,
                        " vs ".join(sorted(placements)), STREAMING_ISSUE))
        out.append(dataclasses.replace(op, pass_on=shared) if shared else op)
    return out


def _side_watermarks(sources, impulse_dests, operators):
    """For each side-input operator: what feeds each of its side inputs."""
    feeds = _feeds(sources, impulse_dests, operators)
    return {op.name: {dest: _stage_inputs(feeds.get(dest, set())) for dest, _ in op.side_inputs}
            for op in operators if op.side_inputs}


def _stage_inputs(upstream):
    return StageInputs(sources=tuple(sorted(n for k, n in upstream if k == "source")),
                       stages=tuple(sorted(n for k, n in upstream if k == "op")))


def _feeds(sources, impulse_dests, operators):
    """dest -> {("source", name) | ("op", keyed operator name)} feeding it."""
    feeds = {}
    for s in sources:
        for tag, dest, _ in s.outputs:
            feeds.setdefault(dest, set()).add(("source", source_key(s.name, tag)))
    for dest in impulse_dests:
        feeds.setdefault(dest, set()).add(("source", IMPULSE_SOURCE))
    for op in operators:
        upstream = set()
        for dest in op.inputs:
            upstream |= feeds.get(dest, set())
        produced = {("op", op.name)} if op.is_keyed else upstream
        for dest in _output_dests(op):
            feeds.setdefault(dest, set()).update(produced)
    return feeds


def _output_dests(op):
    if op.kind == GROUP:
        return ["group:%s" % op.name]
    return [write_dest(port.buffer) for port in op.stage.outputs]


__all__ = ["StreamingPlan", "Operator", "TestStreamSource", "plan_streaming",
           "STATELESS", "STATEFUL", "SDF", "SIDE_INPUTS", "GROUP", "IMPULSE_SOURCE", "read_dest", "write_dest", "source_key"]
