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

from apache_beam.portability import common_urns

from beam_spark_runner import plans
from beam_spark_runner.plans import (
    GROUP,
    IMPULSE_SOURCE,
    SDF,
    SIDE_INPUTS,
    STATEFUL,
    STATELESS,
    Operator,
    StreamingPlan,
    TestStreamSource,
    read_dest,
    source_key,
    write_dest,
)
from beam_spark_runner.streaming.watermarks import StageInputs
from beam_spark_runner.translation import phases, batch_plan as plan_lib
from beam_spark_runner.errors import UnsupportedPipelineError

_TEST_STREAM_URN = common_urns.primitives.TEST_STREAM.urn


def plan_streaming(pipeline_proto, drain=False, plain_python=True) -> StreamingPlan:
    """Plans an unbounded pipeline; raises UnsupportedPipelineError for what
    the streaming runner cannot run (checks common to both engines are in
    translation/requirements.py)."""
    context, stages = phases.create_stages(
        pipeline_proto, phases=phases.STREAMING_PHASES, drain=drain, runner_urns=phases.STREAMING_RUNNER_URNS
    )
    execution = plan_lib.build_plan(context, stages, plain_python=plain_python)
    test_streams = {}
    for stage in stages:
        for t in stage.transforms:
            if t.spec.urn == _TEST_STREAM_URN:
                test_streams[stage.name] = (
                    t,
                    {
                        next(iter(w.inputs.values())): w.unique_name
                        for w in stage.transforms
                        if w.spec.urn == "beam:runner:sink:v1"
                    },
                )
    return from_execution_plan(execution, test_streams)


def from_execution_plan(execution: plans.ExecutionPlan, test_streams) -> StreamingPlan:
    """`test_streams`: stage name -> (TestStream transform, {pcoll: sink id})."""
    sources, operators, impulse_dests = [], [], []
    keyed_dests, element_coders, broadcast = {}, {}, []
    sdf_outputs = {
        write_dest(port.buffer)
        for stage in execution.stages
        if stage.rebalance and not stage.keyed
        for port in stage.outputs
    }
    for stage in execution.stages:
        if stage.name in test_streams:
            sources.append(_test_stream_source(stage, *test_streams[stage.name]))
            continue
        inputs = []
        for port in stage.inputs:
            if port.buffer.kind == plans.IMPULSE:
                dest = "impulse:%s" % stage.name
                impulse_dests.append(dest)
            else:
                dest = read_dest(port.buffer)
            inputs.append(dest)
            if stage.keyed:
                keyed_dests[dest] = port.coder_id
            elif (stage.rebalance or stage.side_inputs or dest in sdf_outputs) and (
                dest.startswith(plans.MATERIALIZE) or (stage.side_inputs and port.buffer.kind == GROUP)
            ):
                # One row per element: a stage with side inputs holds each
                # main-input element until its side windows are ready (a
                # GroupByKey's output too, not its blocks); restrictions are
                # spread over key-groups one by one.
                keyed_dests[dest] = None
                element_coders[dest] = port.coder_id
        for port in stage.outputs:
            if port.buffer.kind == GROUP:
                group = execution.groups[port.buffer.name]
                keyed_dests[write_dest(port.buffer)] = group.input_coder_id
        side = ()
        if stage.side_inputs:
            side = tuple(
                (read_dest(plans.BufferRef(plans.MATERIALIZE, si.pcollection)), si) for si in stage.side_inputs
            )
            broadcast.extend(d for d, _ in side if d not in broadcast)
        kind = STATEFUL if stage.keyed else SDF if stage.rebalance else SIDE_INPUTS if side else STATELESS
        operators.append(
            Operator(
                kind,
                stage.name,
                stage.display_name,
                tuple(inputs) + tuple(d for d, _ in side),
                stage=stage,
                side_inputs=side,
                rebalance_input=kind == STATELESS and any(d in sdf_outputs for d in inputs),
            )
        )
    # A GroupByKey runs right before its first reader, after all its writers.
    ordered = []
    for op in operators:
        for dest in op.inputs:
            if dest.startswith(GROUP + ":"):
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
        if pcoll in by_pcoll:  # an output nobody reads has no sink
            port = ports[by_pcoll[pcoll]]
            outputs.append((tag, write_dest(port.buffer), port.coder_id))
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
        later = operators[i + 1 :]
        shared = tuple(d for d in dict.fromkeys(op.inputs) if any(d in o.inputs for o in later))
        for dest in shared:
            readers = [op] + [o for o in later if dest in o.inputs]
            placements = {_placement(o, dest) for o in readers} - {None}
            if len(placements) > 1:
                raise UnsupportedPipelineError(
                    "%s and %s read the same PCollection (%s) in ways that need its elements spread "
                    "differently over Spark partitions (%s), which a streaming run cannot do for one "
                    "PCollection: give one of them a copy of its own (pcoll | beam.Map(lambda x: x), or "
                    "beam.Reshuffle()) and read that instead"
                    % (readers[0].display_name, readers[1].display_name, dest, " vs ".join(sorted(placements)))
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
