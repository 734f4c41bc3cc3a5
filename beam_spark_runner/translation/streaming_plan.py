"""The plan of an unbounded pipeline: micro-batch operators as plain data.

Beam's phases fuse the pipeline as for batch (TestStream kept out of SDK
stages); each stage's plan comes from translation/stage_plans.py, and this
module turns the stages into an ordered chain of operators for one
Structured Streaming query (plans.OperatorKind):

* a *source* (TestStream, Impulse) emits data rows for the buffers its
  outputs feed, plus the control rows carrying each batch's times;
* a *stateless* operator runs a fused SDK stage over the rows addressed to
  its inputs (Spark `mapInArrow`);
* a *group* operator is a GroupByKey with its windowing and trigger, a
  *stateful* operator a stage with user state or timers, and an *sdf*
  operator a stage running a splittable DoFn (PeriodicImpulse, unbounded
  reads), whose residuals wait in state until their resume time, and a
  *side_inputs* operator a stage reading side inputs, which keeps the side
  inputs seen so far (every key-group gets a copy) and holds back main input
  until the side input windows it needs are complete (an unbounded side
  input in the global window with a trigger: until it first fired, then it
  shows its latest firing); all keep state per key-group and run as a
  `transformWithState` keyed by key-group.

Rows name their destination (`plans.Dest`): a PCollection or a GroupByKey's
output for the stages that read it, a GroupByKey's input for the
GroupByKey, Impulse's element for the stage that reads it. Pure planning: no
Spark here.
"""

import dataclasses

from apache_beam.portability import common_urns

from beam_spark_runner.errors import UnsupportedPipelineError
from beam_spark_runner.plans import (
    IMPULSE_SOURCE,
    BufferKind,
    Dest,
    DestKind,
    Operator,
    OperatorKind,
    SparkSink,
    SparkSource,
    StreamingPlan,
    TestStreamSource,
    source_key,
)
from beam_spark_runner.streaming.watermark_lanes import plan_lanes
from beam_spark_runner.streaming.watermarks import StageInputs
from beam_spark_runner.translation import phases, runner_io
from beam_spark_runner.translation.same_batch_watermarks import same_batch_stages
from beam_spark_runner.translation.stage_plans import StagePlanner
from beam_spark_runner.translation.watermark_percentiles import operator_percentiles

_TEST_STREAM_URN = common_urns.primitives.TEST_STREAM.urn


def plan_streaming(pipeline_proto, drain=False, plain_python=True, watermark_percentile=1.0) -> StreamingPlan:
    """Plans an unbounded pipeline; raises UnsupportedPipelineError for what
    the streaming runner cannot run (checks common to both engines are in
    translation/requirements.py). `watermark_percentile`: what keyed
    operators run under unless their transforms ask for another
    (translation/watermark_percentiles.py)."""
    context, stages = phases.create_stages(pipeline_proto, phases=phases.STREAMING_PHASES, drain=drain, streaming=True)
    planner = StagePlanner(context, stages, plain_python=plain_python)
    planned = [(stage, planner.stage(stage, index)) for index, stage in enumerate(stages)]
    sources, operators, impulse_dests, spark_sources, spark_sinks = [], [], [], [], []
    keyed_dests, element_coders, broadcast = {}, {}, []
    # Stateless readers of a splittable DoFn's output get its rows one per
    # element, spread over key-groups.
    sdf_outputs = {
        Dest.written_to(port.buffer)
        for _, plan in planned
        if plan.splittable and not plan.stateful
        for port in plan.outputs
    }
    read_buffers = {port.buffer for _, plan in planned for port in plan.inputs}
    for stage, plan in planned:
        test_stream = _test_stream_of(stage)
        if test_stream is not None:
            sources.append(_test_stream_source(plan, test_stream, stage))
            continue
        io = runner_io.lookup(plan.native.urn) if plan.native is not None else None
        if io is not None and io.role is runner_io.IORole.SOURCE:
            spark_sources.append(io.plan_streaming_source(plan))
            continue
        if io is not None and io.role is runner_io.IORole.SINK:
            spark_sinks.append(_spark_sink(plan, io, read_buffers))
            continue
        inputs = []
        for port in plan.inputs:
            if port.buffer.kind == BufferKind.IMPULSE:
                dest = Dest.impulse(plan.name)
                impulse_dests.append(dest)
            else:
                dest = Dest.read_from(port.buffer)
            inputs.append(dest)
            if plan.stateful:
                keyed_dests[dest] = port.coder_id
            elif (plan.splittable or plan.side_inputs or plan.stable_input or dest in sdf_outputs) and (
                dest.kind == DestKind.MATERIALIZED
                or ((plan.side_inputs or plan.stable_input) and port.buffer.kind == BufferKind.GROUP)
            ):
                # One row per element: a stage with side inputs holds each
                # main-input element until its side windows are ready (a
                # GroupByKey's output too, not its blocks); restrictions are
                # spread over key-groups one by one; so is the input a
                # stage requiring stable input holds.
                keyed_dests[dest] = None
                element_coders[dest] = port.coder_id
        for port in plan.outputs:
            if port.buffer.kind == BufferKind.GROUP:
                keyed_dests[Dest.written_to(port.buffer)] = planner.groups[port.buffer.name].input_coder_id
        side = tuple((Dest.materialized(si.pcollection), si) for si in plan.side_inputs)
        broadcast.extend(d for d, _ in side if d not in broadcast)
        kind = _operator_kind(plan)
        _check_stable_input(plan, kind)
        operators.append(
            Operator(
                kind,
                plan.name,
                plan.display_name,
                tuple(inputs) + tuple(d for d, _ in side),
                stage=plan,
                side_inputs=side,
                rebalance_input=kind == OperatorKind.STATELESS
                and not plan.stable_input
                and any(d in sdf_outputs for d in inputs),
                stable_input=bool(plan.stable_input),
            )
        )
    sink_dests = frozenset(s.dest for s in spark_sinks)
    ordered = _with_pass_on(_with_group_operators(operators, planner.groups), sink_dests)
    spark_sources = [_with_fused_reader(s, ordered, sink_dests, keyed_dests, broadcast) for s in spark_sources]
    graph = _watermark_graph(sources + spark_sources, impulse_dests, ordered)
    ordered = _with_percentiles(ordered, graph, spark_sources, context.components, watermark_percentile)
    return StreamingPlan(
        sources=tuple(sources),
        impulse_dests=tuple(impulse_dests),
        operators=tuple(ordered),
        keyed_dests=keyed_dests,
        element_coders=element_coders,
        broadcast_dests=tuple(broadcast),
        watermark_graph=graph,
        side_watermarks=_side_watermarks(sources + spark_sources, impulse_dests, ordered),
        components=context.components.SerializeToString(),
        spark_sources=tuple(spark_sources),
        spark_sinks=tuple(spark_sinks),
        same_batch_stages=same_batch_stages(ordered, context.components),
    )


def _with_percentiles(operators, graph, spark_sources, components, default):
    """Each keyed operator with the watermark percentile it runs under, and
    whether its key-groups must summarize their holds (a lane reads them
    at a percentile below 1: streaming/watermark_lanes.py)."""
    percentiles = operator_percentiles(operators, components, default)
    lanes = plan_lanes(graph, percentiles, [s.name for s in spark_sources])
    return [
        dataclasses.replace(op, watermark_percentile=percentiles[op.name], summarize_holds=op.name in lanes.summarized)
        if op.is_keyed
        else op
        for op in operators
    ]


def _with_fused_reader(source, operators, sink_dests, keyed_dests, broadcast):
    """The source with `fused_operator` set when one plain-Python stateless
    operator alone reads its rows (no side inputs, no rebalancing, no other
    input): that operator then runs in the source's task on the rows as
    read, which saves encoding and decoding every row."""
    readers = [op for op in operators if source.dest in op.inputs]
    if len(readers) != 1 or source.dest in sink_dests or source.dest in keyed_dests or source.dest in broadcast:
        return source
    (op,) = readers
    fusable = (
        op.kind == OperatorKind.STATELESS
        and not op.stable_input
        and op.stage.plain_spec is not None
        and op.inputs == (source.dest,)
        and not op.rebalance_input
        and not op.pass_on
    )
    return dataclasses.replace(source, fused_operator=op.name) if fusable else source


def _spark_sink(plan, io, read_buffers):
    """A runner sink's stage (`io`, registered in translation/runner_io.py):
    the rows addressed to its input are staged at the end of each
    micro-batch. Its output (the destination written) has no micro-batch
    to be produced in: a pipeline reading it is refused."""
    (port,) = plan.inputs
    label = io.label_of(plan.native.payload)
    if any(out.buffer in read_buffers for out in plan.outputs):
        raise UnsupportedPipelineError(
            "%s: in a streaming pipeline its output (the destination written) cannot be read by another "
            "transform; read what it wrote in another pipeline" % label
        )
    return SparkSink(
        plan.native.transform_id,
        label,
        plan.native.payload,
        Dest.read_from(port.buffer),
        port.coder_id,
        urn=plan.native.urn,
    )


def _operator_kind(plan) -> OperatorKind:
    """What runs a stage: its user state and timers, its splittable DoFn or
    its side inputs need state per key-group; anything else is stateless."""
    if plan.stateful:
        return OperatorKind.STATEFUL
    if plan.splittable:
        return OperatorKind.SDF
    if plan.side_inputs:
        return OperatorKind.SIDE_INPUTS
    return OperatorKind.STATELESS


_STABLE_INPUT_URN = common_urns.requirements.REQUIRES_STABLE_INPUT.urn


def _check_stable_input(plan, kind):
    """A stage requiring stable input runs one micro-batch behind its
    input (streaming/stable_input.py); a splittable DoFn's restrictions and
    a side-input stage's waiting elements live in state the delay cannot
    replay, so those are refused, naming the transforms."""
    if plan.stable_input and kind in (OperatorKind.SDF, OperatorKind.SIDE_INPUTS):
        raise UnsupportedPipelineError(
            "%s: requires stable input (%s) in a stage that %s, which a streaming run does not support; "
            "move the DoFn that requires stable input after a GroupByKey or Reshuffle of its own"
            % (
                ", ".join(plan.stable_input),
                _STABLE_INPUT_URN,
                "runs a splittable DoFn" if kind == OperatorKind.SDF else "reads side inputs",
            )
        )


def _with_group_operators(operators, groups):
    """The operators with each GroupByKey's operator right before its first
    reader (after all its writers)."""
    ordered, placed = [], set()
    for op in operators:
        for dest in op.inputs:
            if dest.kind == DestKind.GROUPED and dest.name not in placed:
                group = groups[dest.name]
                ordered.append(
                    Operator(
                        OperatorKind.GROUP,
                        dest.name,
                        group.display_name,
                        (Dest.group_input(dest.name),),
                        group=group,
                    )
                )
                placed.add(dest.name)
        ordered.append(op)
    return ordered


def _test_stream_of(stage):
    """(TestStream transform, {pcoll: sink id}) of a stage holding a
    TestStream, else None."""
    for t in stage.transforms:
        if t.spec.urn == _TEST_STREAM_URN:
            sinks = {
                next(iter(w.inputs.values())): w.unique_name
                for w in stage.transforms
                if w.spec.urn == "beam:runner:sink:v1"
            }
            return t, sinks
    return None


def _test_stream_source(plan, test_stream, stage):
    transform, by_pcoll = test_stream
    ports = {p.transform_id: p for p in plan.outputs}
    outputs = []
    for tag, pcoll in sorted(transform.outputs.items()):
        if pcoll in by_pcoll:  # an output nobody reads has no sink
            port = ports[by_pcoll[pcoll]]
            outputs.append((tag, Dest.written_to(port.buffer), port.coder_id))
    return TestStreamSource(transform.unique_name, transform.unique_name, transform.spec.payload, tuple(outputs))


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
    if op.kind == OperatorKind.STATEFUL:
        return "key"
    if op.kind in (OperatorKind.SDF, OperatorKind.SIDE_INPUTS) or op.rebalance_input:
        return "element"
    if op.stable_input:
        return "element"
    return None


def _with_pass_on(operators, sink_dests=frozenset()):
    """Sets each operator's `pass_on`: its inputs a later operator or a
    Spark sink (`sink_dests`) reads.
    Readers of one dest must agree on how its rows are spread over
    key-groups (the writer places each row once); otherwise the pipeline is
    rejected."""
    out = []
    for i, op in enumerate(operators):
        later = operators[i + 1 :]
        shared = tuple(d for d in dict.fromkeys(op.inputs) if d in sink_dests or any(d in o.inputs for o in later))
        for dest in shared:
            readers = [op] + [o for o in later if dest in o.inputs]
            placements = {_placement(o, dest) for o in readers} - {None}
            if len(placements) > 1:
                raise UnsupportedPipelineError(
                    "%s and %s read the same PCollection (%s) in ways that need its elements spread "
                    "differently over Spark partitions (%s), which a streaming run cannot do for one "
                    "PCollection: give one of them a copy of its own (pcoll | beam.Map(lambda x: x), or "
                    "beam.Reshuffle()) and read that instead"
                    % (
                        readers[0].display_name,
                        readers[1].display_name,
                        dest.describe(),
                        " vs ".join(sorted(placements)),
                    )
                )
        out.append(dataclasses.replace(op, pass_on=shared) if shared else op)
    return out


def _side_watermarks(sources, impulse_dests, operators):
    """For each side-input operator: what feeds each of its side inputs."""
    feeds = _feeds(sources, impulse_dests, operators)
    return {
        op.name: {dest: _stage_inputs(feeds.get(dest, set())) for dest, _ in op.side_inputs}
        for op in operators
        if op.side_inputs
    }


def _stage_inputs(upstream):
    return StageInputs(
        sources=tuple(sorted(n for k, n in upstream if k == "source")),
        stages=tuple(sorted(n for k, n in upstream if k == "op")),
    )


def _feeds(sources, impulse_dests, operators):
    """dest -> {("source", name) | ("op", keyed operator name)} feeding it."""
    feeds = {}
    for s in sources:
        if isinstance(s, SparkSource):
            feeds.setdefault(s.dest, set()).add(("source", s.name))
            continue
        for tag, dest, _ in s.outputs:
            feeds.setdefault(dest, set()).add(("source", source_key(s.name, tag)))
    for dest in impulse_dests:
        feeds.setdefault(dest, set()).add(("source", IMPULSE_SOURCE))
    for op in operators:
        upstream = set()
        for dest in op.inputs:
            upstream |= feeds.get(dest, set())
        produced = {("op", op.name)} if op.is_keyed else upstream
        for dest in op.output_dests():
            feeds.setdefault(dest, set()).update(produced)
    return feeds
