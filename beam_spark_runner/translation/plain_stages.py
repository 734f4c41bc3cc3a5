"""Which fused stages run as plain Python loops, planned on the driver.

`plan_plain_stage` looks at a stage's ProcessBundleDescriptor and returns
the `PlainStageSpec` worker/plain_stage.py runs, or None when any transform
of the stage needs Beam's SDK harness: every transform must be a ParDo the
plain path can run (`worker.plain_callables.plain_callable`: Map, FlatMap,
Filter, MapTuple, simple DoFn classes; or, reading a stage input, one
stateful ParDo `plain_stateful_dofn` accepts), a WindowInto, or a phase of
a lifted combiner (precombine, merge, extract, convert, grouped values),
or a Flatten of one input.
Pure planning: no Spark.
"""

from typing import Optional

from apache_beam.portability import common_urns
from beam_spark_runner.worker import beam_internals as _beam_internals

from beam_spark_runner.worker.plain_callables import plain_callable, plain_stateful_dofn
from beam_spark_runner.worker.plain_stage import PlainStageSpec, StepSpec
from beam_spark_runner.worker.plain_steps import ASSIGN_WINDOWS, FLATTEN, PARDO, PRECOMBINE
from beam_spark_runner.worker.stateful_step import STATEFUL_PARDO

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
_ASSIGN_WINDOWS_URN = common_urns.primitives.ASSIGN_WINDOWS.urn
_FLATTEN_URN = common_urns.primitives.FLATTEN.urn


def plan_plain_stage(descriptor, input_ids, output_ids) -> Optional[PlainStageSpec]:
    """The PlainStageSpec of a stage, or None if it needs the SDK harness.

    `input_ids` / `output_ids`: the stage's data input / output transform ids
    in the order of the stage plan's ports.
    """
    transforms = descriptor.transforms
    steps = []
    for tid, t in transforms.items():
        urn = t.spec.urn
        if urn in (_beam_internals.DATA_INPUT_URN, _beam_internals.DATA_OUTPUT_URN):
            continue
        if len(t.inputs) != 1:
            return None
        input_pcoll = next(iter(t.inputs.values()))
        outputs = tuple(sorted(t.outputs.items()))
        if urn == _PAR_DO_URN:
            if plain_callable(t) is not None:
                kind = PARDO
            elif plain_stateful_dofn(t):
                kind = STATEFUL_PARDO
            else:
                return None
        elif urn == _PRECOMBINE_URN:
            kind = PRECOMBINE
        elif urn == _ASSIGN_WINDOWS_URN:
            kind = ASSIGN_WINDOWS
        elif urn == _FLATTEN_URN:
            kind = FLATTEN
        elif urn in _COMBINE_PHASES:
            kind = _COMBINE_PHASES[urn]
        else:
            return None
        steps.append(StepSpec(tid, t.unique_name, kind, input_pcoll, outputs))
    if not steps:
        return None
    input_pcolls = tuple(next(iter(transforms[i].outputs.values())) for i in input_ids)
    stateful = [s for s in steps if s.kind == STATEFUL_PARDO]
    # The runner keys a stateful ParDo's input, so it must read a stage input.
    if len(stateful) > 1 or (stateful and stateful[0].input_pcoll not in input_pcolls):
        return None
    output_pcolls = tuple(next(iter(transforms[o].inputs.values())) for o in output_ids)
    ordered = _topological(steps, input_pcolls)
    if ordered is None:
        return None
    return PlainStageSpec(input_pcolls, ordered, output_pcolls)


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
