"""CombinePerKeys that combiner lifting would answer wrongly run unlifted.

Beam's `lift_combiners` phase pre-combines before the GroupByKey. For the
combines below, the CombinePerKey composite's spec is cleared: Beam's
phases then run its expansion (GroupByKey + CombineValues) as written,
never lifted. Pure proto -> proto functions, applied before Beam's phases.

- `keep_timestamp_combiners`: the pre-combined accumulators carry the end
  of their window as timestamp, so a CombinePerKey under
  OUTPUT_AT_EARLIEST or OUTPUT_AT_LATEST would emit its pane at the end of
  the window (seen with trigger_test's known_late_data_watermark
  transcript, where the pane must be stamped 7, not 9).
- `keep_empty_pane_java_combines`: a strategy that fires empty panes
  (FIRE_ALWAYS on time or EMIT_ALWAYS on closing, after a trigger that
  fired before the window's end) hands the lifted merge no
  accumulators for such a pane, and the merge's output, the CombineFn's
  empty accumulator, is encoded with the accumulator coder, which a Java
  CombineFn's need not encode (`Latest`'s `TimestampedValue(null)` with a
  `VarLongCoder` fails). Unlifted, the empty pane reaches the CombineFn's
  `extractOutput`, whose output coder holds it, as in Beam Java's own
  runners. Python CombineFns' accumulators are pickled and always encode.
"""

from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_runner_api_pb2

from beam_spark_runner.plans import EnvironmentKind
from beam_spark_runner.translation.sdk_environments import kind_of

_CPK = common_urns.composites.COMBINE_PER_KEY.urn
_END_OF_WINDOW = beam_runner_api_pb2.OutputTime.END_OF_WINDOW


def keep_timestamp_combiners(pipeline_proto):
    """A copy of the proto in which no CombinePerKey whose input's timestamp
    combiner is not END_OF_WINDOW can be lifted (the input is not modified)."""
    return _unlifted(pipeline_proto, lambda components, t: _strategy(components, t).output_time != _END_OF_WINDOW)


def keep_empty_pane_java_combines(pipeline_proto):
    """A copy of the proto in which no Java CombinePerKey whose input's
    strategy fires empty panes can be lifted (the input is not modified)."""
    return _unlifted(
        pipeline_proto,
        lambda components, t: _fires_empty_panes(_strategy(components, t)) and _in_java(components, t),
    )


def _fires_empty_panes(strategy):
    """Whether a pane of the strategy can be empty: FIRE_ALWAYS on time or
    EMIT_ALWAYS on closing, under a trigger that can fire before the window
    ends (under the default trigger, or AfterWatermark without early
    firings, the on-time pane holds the window's elements: a window exists
    only once an element is in it)."""
    trigger = strategy.trigger
    fires_early = not (
        trigger.HasField("default")
        or (trigger.HasField("after_end_of_window") and not trigger.after_end_of_window.HasField("early_firings"))
    )
    return fires_early and (
        strategy.on_time_behavior == beam_runner_api_pb2.OnTimeBehavior.FIRE_ALWAYS
        or strategy.closing_behavior == beam_runner_api_pb2.ClosingBehavior.EMIT_ALWAYS
    )


def _in_java(components, transform):
    ids = [transform.environment_id] + [components.transforms[s].environment_id for s in transform.subtransforms]
    return any(
        kind_of(components.environments[env_id]) is EnvironmentKind.JAVA
        for env_id in ids
        if env_id and env_id in components.environments
    )


def _unlifted(pipeline_proto, is_unsafe):
    """The proto with the spec of every CombinePerKey composite for which
    `is_unsafe(components, transform)` holds cleared (a copy; the proto
    itself when there is none)."""
    components = pipeline_proto.components
    unsafe = [
        tid
        for tid, t in components.transforms.items()
        if t.spec.urn == _CPK and t.subtransforms and is_unsafe(components, t)
    ]
    if not unsafe:
        return pipeline_proto
    result = beam_runner_api_pb2.Pipeline()
    result.CopyFrom(pipeline_proto)
    for tid in unsafe:
        result.components.transforms[tid].ClearField("spec")
    return result


def _strategy(components, transform):
    pcoll = components.pcollections[next(iter(transform.inputs.values()))]
    return components.windowing_strategies[pcoll.windowing_strategy_id]
