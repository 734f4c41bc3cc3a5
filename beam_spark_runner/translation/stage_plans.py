"""Beam's fused stages as the runner's stage plans, for both planners.

`StagePlanner.stage` turns one fused stage into a `StagePlan` (plans.py): its
ProcessBundleDescriptor with the runner's data ports, the buffers it reads
and writes, its side inputs (read with `runner_side_coder`), its timers,
whether it is stateful or runs a splittable DoFn or a runner-native read or
write, and the plain-Python spec when every transform can run as a plain loop
(translation/plain_stages.py). Each GroupByKey a stage writes gets a
`GroupPlan` (`planner.groups`), with the CombineFn of a lifted combiner
around it. translation/batch_plan.py orders them into an ExecutionPlan;
translation/streaming_plan.py makes them the operators of a streaming query.
Pure planning: no Spark.
"""

import dataclasses
from typing import Dict

from apache_beam.portability import common_urns, python_urns
from apache_beam.portability.api import beam_fn_api_pb2, beam_runner_api_pb2
from beam_spark_runner.translation.beam_translations import translations
from beam_spark_runner.worker import beam_internals as _beam_internals
from apache_beam.utils import proto_utils

from beam_spark_runner.plans import (
    BufferKind,
    BufferRef,
    DataPort,
    GroupPlan,
    LiftedCombine,
    NativeTransform,
    PYTHON_ENVIRONMENT,
    SideInputPlan,
    StagePlan,
)
from beam_spark_runner.translation.plain_stages import plan_plain_stage
from beam_spark_runner.translation.sdk_environments import python_decodes, stage_environment, upstream_environment
from beam_spark_runner.translation import runner_io
from beam_spark_runner.worker.beam_internals import (
    GENERIC_NON_MERGING_WINDOW_FN_URN,
    PYTHON_WINDOW_FN_URNS,
    fake_timer_endpoint,
)

_SDF_PROCESS_URN = common_urns.sdf_components.PROCESS_SIZED_ELEMENTS_AND_RESTRICTIONS.urn


def buffer_ref(buffer_id: bytes) -> BufferRef:
    """The buffer a data port's Beam buffer id names."""
    if buffer_id == translations.IMPULSE_BUFFER:
        return BufferRef(BufferKind.IMPULSE, "")
    kind, name = translations.split_buffer_id(buffer_id)
    return BufferRef(BufferKind(kind), name)


def _port(transform, coder_id):
    return DataPort(transform.unique_name, buffer_ref(transform.spec.payload), coder_id)


class StagePlanner:
    """Plans the stages of one pipeline (Beam's `context` and `stages`).

    `plain_python`: stages made only of simple callables and combiner phases
    run as plain Python loops (worker/plain_stage.py); False keeps every
    stage on the SDK harness. `streamed_groups` (batch): the SDK harness
    reads GroupByKey outputs with Beam's state-backed iterable coder, so
    that a large group can be streamed to it (worker/grouped_values.py)."""

    def __init__(self, context, stages, plain_python=True, streamed_groups=False):
        self._context = context
        self._plain_python = plain_python
        self._streamed_groups = streamed_groups
        self._lifted = lifted_combines(context, stages)
        self.groups: Dict[str, GroupPlan] = {}

    def _runner_stage_environment(self, stage):
        """Where a stage of runner transforms only (a GroupByKey's output
        read and written again for a stateful DoFn after it) runs: in this
        Python SDK, unless its data's coders are another SDK's own, which
        only that SDK can decode; then in the environment of the SDK
        transform upstream that made them."""
        components, data_coders = self._context.components, self._context.data_channel_coders
        pcolls = [
            translations.only_element(t.outputs.values())
            for t in stage.transforms
            if t.spec.urn == _beam_internals.DATA_INPUT_URN
        ]
        if all(python_decodes(components, data_coders[p]) for p in pcolls if p in data_coders):
            return None
        return upstream_environment(components, pcolls)

    def stage(self, stage, index) -> StagePlan:
        """The StagePlan of `stage`, the `index`-th of the pipeline; the
        GroupByKeys it writes join `groups`."""
        context = self._context
        components = context.components
        data_coders, safe = context.data_channel_coders, context.safe_coders
        inputs, outputs, side_inputs, names = [], [], [], []
        transforms = {}
        native = None
        finalizes = False
        stable_input = []
        environment = stage_environment(components, stage.environment or self._runner_stage_environment(stage))
        for t in stage.transforms:
            t = _copy(t)
            if t.spec.urn == _beam_internals.DATA_INPUT_URN:
                coder_id = data_coders[translations.only_element(t.outputs.values())]
                port = _port(t, coder_id)
                if environment.is_java:
                    # The runner reads what a Java stage reads (its keys,
                    # its sized restrictions) with the safe coder: another
                    # SDK's coders as length-prefixed bytes, the same wire
                    # bytes as the data channel's length-prefixed coder.
                    port = dataclasses.replace(
                        port, coder_id=runner_side_coder(components, coder_id, safe.get(coder_id, coder_id))
                    )
                inputs.append(port)
                if self._streamed_groups and port.buffer.kind == BufferKind.GROUP:
                    # The runner's side keeps reading `coder_id`.
                    coder_id = state_backed_group_coder(components, coder_id)
                t.spec.payload = beam_fn_api_pb2.RemoteGrpcPort(coder_id=coder_id).SerializeToString()
            elif t.spec.urn == _beam_internals.DATA_OUTPUT_URN:
                pcoll = translations.only_element(t.inputs.values())
                coder_id = data_coders[pcoll]
                port = _port(t, coder_id)
                outputs.append(port)
                if port.buffer.kind == BufferKind.GROUP:
                    name = port.buffer.name
                    self.groups[name] = group_plan(context, name, self._lifted.get(name))
                t.spec.payload = beam_fn_api_pb2.RemoteGrpcPort(coder_id=coder_id).SerializeToString()
            else:
                names.append(t.unique_name)
                if runner_io.lookup(t.spec.urn) is not None:
                    native = NativeTransform(t.unique_name, t.spec.urn, t.spec.payload)
                if t.spec.urn in translations.PAR_DO_URNS:
                    payload = proto_utils.parse_Bytes(t.spec.payload, beam_runner_api_pb2.ParDoPayload)
                    finalizes = finalizes or payload.requests_finalization
                    if payload.requires_stable_input:
                        stable_input.append(t.unique_name)
                    for tag, si in payload.side_inputs.items():
                        pcoll = t.inputs[tag]
                        side_inputs.append(
                            SideInputPlan(
                                t.unique_name,
                                tag,
                                pcoll,
                                si.access_pattern.urn,
                                runner_side_coder(
                                    components, data_coders[pcoll], safe.get(data_coders[pcoll], data_coders[pcoll])
                                ),
                            )
                        )
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
        if environment.is_java:
            wrap_windowed_element_coders(descriptor)
        return StagePlan(
            name=stage.name,
            descriptor=descriptor.SerializeToString(),
            inputs=tuple(inputs),
            outputs=tuple(outputs),
            side_inputs=tuple(side_inputs),
            timers=tuple(sorted(stage.timers)),
            stateful=stage.is_stateful(),
            splittable=any(t.spec.urn == _SDF_PROCESS_URN for t in stage.transforms),
            sdk_transforms=tuple(names),
            plain_spec=(
                plan_plain_stage(descriptor, [p.transform_id for p in inputs], [p.transform_id for p in outputs])
                if self._plain_python and not side_inputs and native is None and environment == PYTHON_ENVIRONMENT
                else None
            ),
            native=native,
            finalizes=finalizes,
            environment=environment,
            stable_input=tuple(stable_input),
        )


_WINDOWED_VALUE_CODERS = (common_urns.coders.WINDOWED_VALUE.urn, common_urns.coders.PARAM_WINDOWED_VALUE.urn)


def wrap_windowed_element_coders(descriptor):
    """Gives each PCollection of a Java stage's `descriptor` whose elements
    are windowed values (what `Create.windowedValues` reads, what
    `Reify.windows` makes) its coder length-prefixed. Beam's Java harness
    takes a windowed-value PCollection coder for one a runner wrapped and
    measures the elements with the value coder inside it, which fails on a
    WindowedValue element (a ClassCastException to the value's type); a
    length prefix around it is kept, and encodes the same elements. The
    coders of the data ports, the only bytes that leave the harness, are
    other coder ids and unchanged."""
    for pcoll in descriptor.pcollections.values():
        coder = descriptor.coders.get(pcoll.coder_id)
        if coder is None or coder.spec.urn not in _WINDOWED_VALUE_CODERS:
            continue
        wrapped = pcoll.coder_id + "_length_prefixed"
        if wrapped not in descriptor.coders:
            descriptor.coders[wrapped].CopyFrom(
                beam_runner_api_pb2.Coder(
                    spec=beam_runner_api_pb2.FunctionSpec(urn=common_urns.coders.LENGTH_PREFIX.urn),
                    component_coder_ids=[pcoll.coder_id],
                )
            )
        pcoll.coder_id = wrapped


def state_backed_group_coder(components, coder_id) -> str:
    """The id of a coder encoding exactly as `coder_id`, a windowed
    KV<K, Iterable<V>>, whose Iterable is Beam's state-backed iterable (an
    encoding may end in a state token the SDK harness reads the rest of the
    values with, as Beam's FnApiRunner does with `use_state_iterables`),
    added to `components`; `coder_id` itself if it has another shape."""
    coders = components.coders
    windowed = coders[coder_id]
    if windowed.spec.urn != common_urns.coders.WINDOWED_VALUE.urn:
        return coder_id
    kv_id = windowed.component_coder_ids[0]
    kv = coders[kv_id]
    if kv.spec.urn != common_urns.coders.KV.urn:
        return coder_id
    iterable = coders[kv.component_coder_ids[1]]
    if iterable.spec.urn != common_urns.coders.ITERABLE.urn:
        return coder_id
    new_id = coder_id + "_state_backed"
    if new_id not in coders:
        coders[kv_id + "_state_backed_iterable"].CopyFrom(
            beam_runner_api_pb2.Coder(
                spec=beam_runner_api_pb2.FunctionSpec(urn=common_urns.coders.STATE_BACKED_ITERABLE.urn, payload=b"1"),
                component_coder_ids=iterable.component_coder_ids,
            )
        )
        coders[kv_id + "_state_backed"].CopyFrom(
            beam_runner_api_pb2.Coder(
                spec=kv.spec,
                component_coder_ids=[kv.component_coder_ids[0], kv_id + "_state_backed_iterable"],
            )
        )
        coders[new_id].CopyFrom(
            beam_runner_api_pb2.Coder(
                spec=windowed.spec,
                component_coder_ids=[kv_id + "_state_backed", windowed.component_coder_ids[1]],
            )
        )
    return new_id


def group_plan(context, gbk_id, combine=None) -> GroupPlan:
    """The GroupPlan of GroupByKey `gbk_id`."""
    components = context.components
    gbk = components.transforms[gbk_id]
    in_pcoll = translations.only_element(gbk.inputs.values())
    out_pcoll = translations.only_element(gbk.outputs.values())
    data_coders, safe = context.data_channel_coders, context.safe_coders
    return GroupPlan(
        name=gbk_id,
        display_name=gbk.unique_name or gbk_id,
        input_coder_id=runner_side_coder(components, data_coders[in_pcoll], safe[data_coders[in_pcoll]]),
        output_coder_id=runner_side_coder(components, data_coders[out_pcoll], safe[data_coders[out_pcoll]]),
        windowing_strategy_id=runner_side_windowing(
            components, components.pcollections[in_pcoll].windowing_strategy_id
        ),
        combine=combine,
    )


def runner_side_windowing(components, strategy_id) -> str:
    """The windowing strategy the runner groups with: `strategy_id`, or,
    when its WindowFn is another SDK's (a Java expansion's), a copy added to
    `components` whose WindowFn is Beam's generic non-merging one (its
    windows decoded with the strategy's window coder; never assigned by the
    runner, which only groups already-windowed elements). The stages keep
    the original, which their own SDK reads. A merging WindowFn of another
    SDK is refused at submission (requirements.check_windowing)."""
    strategy = components.windowing_strategies[strategy_id]
    if strategy.window_fn.urn in PYTHON_WINDOW_FN_URNS:
        return strategy_id
    safe_id = strategy_id + "_runner_side"
    if safe_id not in components.windowing_strategies:
        safe = components.windowing_strategies[safe_id]
        safe.CopyFrom(strategy)
        safe.window_fn.urn = GENERIC_NON_MERGING_WINDOW_FN_URN
        safe.window_fn.payload = strategy.window_coder_id.encode("utf-8")
    return safe_id


_OPAQUE_WINDOW_URN = python_urns.TIMESTAMP_PREFIXED_OPAQUE_WINDOW_CODER


def runner_side_coder(components, data_coder_id, safe_coder_id) -> str:
    """The coder the runner reads and writes a GroupByKey or side input with: Beam's *safe*
    coder (unknown value coders as bytes: the runner never looks at
    values), except that a custom window type is decoded with the WindowFn's
    own window coder. Beam's safe coder turns such windows into opaque
    windows, fit for a runner that cannot run the SDK's code; this runner
    calls the WindowFn (merge, GC time) and must hand it its own windows.
    Both encode to the same bytes (the max timestamp, then the length-prefixed
    window). Returns `safe_coder_id` when the window coder is a standard one;
    otherwise the id of a coder added to `components`."""
    coders = components.coders
    safe, data = coders[safe_coder_id], coders[data_coder_id]
    if safe.spec.urn != common_urns.coders.WINDOWED_VALUE.urn or len(safe.component_coder_ids) != 2:
        return safe_coder_id
    if coders[safe.component_coder_ids[1]].spec.urn != _OPAQUE_WINDOW_URN:
        return safe_coder_id
    if data.spec.urn != common_urns.coders.WINDOWED_VALUE.urn or len(data.component_coder_ids) != 2:
        return safe_coder_id
    new_id = safe_coder_id + "_own_window"
    if new_id not in coders:
        coders[new_id].CopyFrom(
            beam_runner_api_pb2.Coder(
                spec=safe.spec, component_coder_ids=[safe.component_coder_ids[0], data.component_coder_ids[1]]
            )
        )
    return new_id


_PRECOMBINE_URN = common_urns.combine_components.COMBINE_PER_KEY_PRECOMBINE.urn
_MERGE_URN = common_urns.combine_components.COMBINE_PER_KEY_MERGE_ACCUMULATORS.urn
_RUNNER_IO_URNS = (_beam_internals.DATA_INPUT_URN, _beam_internals.DATA_OUTPUT_URN)


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
        if stage_environment(context.components, pre.environment_id).is_java:
            continue  # the runner merges accumulators in Python: a Java CombineFn's stay in its stages
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
