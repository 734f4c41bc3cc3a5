"""Keeps combiner lifting from changing output timestamps.

Beam's `lift_combiners` phase pre-combines before the GroupByKey, and the
pre-combined accumulators carry the end of their window as timestamp, so a
CombinePerKey under OUTPUT_AT_EARLIEST or OUTPUT_AT_LATEST would emit its
pane at the end of the window (seen with trigger_test's
known_late_data_watermark transcript, where the pane must be stamped 7, not
9). For those, the CombinePerKey composite's spec is cleared: Beam's phases
then run its expansion (GroupByKey + CombineValues) as written, never lifted.
A pure proto -> proto function, applied before Beam's phases.
"""

from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_runner_api_pb2

_CPK = common_urns.composites.COMBINE_PER_KEY.urn
_END_OF_WINDOW = beam_runner_api_pb2.OutputTime.END_OF_WINDOW


def keep_timestamp_combiners(pipeline_proto):
    """A copy of the proto in which no CombinePerKey whose input's timestamp
    combiner is not END_OF_WINDOW can be lifted (the input is not modified)."""
    components = pipeline_proto.components
    unsafe = [
        tid
        for tid, t in components.transforms.items()
        if t.spec.urn == _CPK and t.subtransforms and _output_time(components, t) != _END_OF_WINDOW
    ]
    if not unsafe:
        return pipeline_proto
    result = beam_runner_api_pb2.Pipeline()
    result.CopyFrom(pipeline_proto)
    for tid in unsafe:
        result.components.transforms[tid].ClearField("spec")
    return result


def _output_time(components, transform):
    pcoll = components.pcollections[next(iter(transform.inputs.values()))]
    return components.windowing_strategies[pcoll.windowing_strategy_id].output_time
