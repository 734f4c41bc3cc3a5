"""AfterProcessingTime triggers written by another SDK, as the runner's
Python trigger state machines read them
(translation/processing_time_triggers.py)."""

import apache_beam as beam
import pytest
from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.runners import pipeline_context
from apache_beam.transforms import trigger, window
from apache_beam.transforms.trigger import TriggerFn

from beam_spark_runner import UnsupportedPipelineError, plan_pipeline
from beam_spark_runner.translation.planner import pipeline_proto_of
from beam_spark_runner.translation.processing_time_triggers import normalize_processing_time_delays

Delay = beam_runner_api_pb2.TimestampTransform.Delay
AlignTo = beam_runner_api_pb2.TimestampTransform.AlignTo


def _triggered_proto(*transforms):
    """A GroupByKey under Repeatedly(AfterProcessingTime) whose timestamp
    transforms are `transforms`, as Beam Java writes them."""
    p = beam.Pipeline()
    _ = (
        p
        | beam.Create([("k", 1)])
        | beam.WindowInto(
            window.FixedWindows(10),
            trigger=trigger.Repeatedly(trigger.AfterProcessingTime(5)),
            accumulation_mode=trigger.AccumulationMode.DISCARDING,
        )
        | "Group" >> beam.GroupByKey()
    )
    proto = pipeline_proto_of(p)
    for strategy in proto.components.windowing_strategies.values():
        if strategy.trigger.WhichOneof("trigger") == "repeat":
            apt = strategy.trigger.repeat.subtrigger.after_processing_time
            del apt.timestamp_transforms[:]
            for transform in transforms:
                apt.timestamp_transforms.add().CopyFrom(transform)
    return proto


def _python_triggers(proto):
    context = pipeline_context.PipelineContext(proto.components)
    return [
        TriggerFn.from_runner_api(s.trigger, context)
        for s in proto.components.windowing_strategies.values()
        if s.trigger.WhichOneof("trigger") == "repeat"
    ]


def test_javas_past_first_element_in_pane_has_no_delay_and_reads_as_a_delay_of_zero():
    proto = _triggered_proto()
    with pytest.raises(IndexError):  # what Python's own reader does with it
        _python_triggers(proto)
    read = _python_triggers(normalize_processing_time_delays(proto))
    assert read and all(r.underlying.delay == 0 for r in read), read
    plan_pipeline(proto)


def test_two_delays_read_as_their_sum():
    proto = _triggered_proto(
        beam_runner_api_pb2.TimestampTransform(delay=Delay(delay_millis=2000)),
        beam_runner_api_pb2.TimestampTransform(delay=Delay(delay_millis=3000)),
    )
    read = _python_triggers(normalize_processing_time_delays(proto))
    assert read and all(r.underlying.delay == 5 for r in read), read


def test_one_delay_leaves_the_pipeline_as_it_is():
    proto = _triggered_proto(beam_runner_api_pb2.TimestampTransform(delay=Delay(delay_millis=5000)))
    assert normalize_processing_time_delays(proto) is proto


def test_an_aligned_processing_time_is_refused_naming_the_grouping():
    proto = _triggered_proto(beam_runner_api_pb2.TimestampTransform(align_to=AlignTo(period=60000)))
    with pytest.raises(UnsupportedPipelineError, match=r"Group: .*AfterProcessingTime aligned to a period"):
        plan_pipeline(proto)
