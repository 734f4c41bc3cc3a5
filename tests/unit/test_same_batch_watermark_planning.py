"""Which keyed operators the plan marks as same-batch stages (their input
watermark passed on in the same micro-batch): a GroupByKey without allowed
lateness stamping its panes at the window's end, on the exact watermark;
nothing else. The cases are data: each names a windowing or stage and
whether its operator qualifies."""

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.transforms import trigger, userstate, window
from apache_beam.transforms.timeutil import TimeDomain

import beam_spark_runner
from beam_spark_runner.streaming.script import compile_script
from beam_spark_runner.translation.planner import pipeline_proto_of, plan_streaming_pipeline


class _CountInState(beam.DoFn):
    COUNT = userstate.ReadModifyWriteStateSpec("count", beam.coders.VarIntCoder())
    FLUSH = userstate.TimerSpec("flush", TimeDomain.WATERMARK)

    def process(self, kv, count=beam.DoFn.StateParam(COUNT), flush=beam.DoFn.TimerParam(FLUSH)):
        count.write((count.read() or 0) + 1)
        flush.set(10)
        yield kv

    @userstate.on_timer(FLUSH)
    def on_flush(self, count=beam.DoFn.StateParam(COUNT)):
        yield "flushed", count.read()


def _windowed(**kwargs):
    return lambda pcoll: pcoll | beam.WindowInto(window.FixedWindows(10), **kwargs) | "Op" >> beam.GroupByKey()


CASES = {
    "fixed windows, default trigger": (_windowed(), True),
    "sessions": (lambda pcoll: pcoll | beam.WindowInto(window.Sessions(5)) | "Op" >> beam.GroupByKey(), True),
    "global window, repeated count trigger": (
        lambda pcoll: (
            pcoll
            | beam.WindowInto(
                window.GlobalWindows(),
                trigger=trigger.Repeatedly(trigger.AfterCount(2)),
                accumulation_mode=trigger.AccumulationMode.DISCARDING,
            )
            | "Op" >> beam.GroupByKey()
        ),
        True,
    ),
    "early and on-time panes": (
        _windowed(
            trigger=trigger.AfterWatermark(early=trigger.AfterCount(1)),
            accumulation_mode=trigger.AccumulationMode.ACCUMULATING,
        ),
        True,
    ),
    "a lifted combine": (
        lambda pcoll: pcoll | beam.WindowInto(window.FixedWindows(10)) | "Op" >> beam.CombinePerKey(sum),
        True,
    ),
    "allowed lateness": (_windowed(allowed_lateness=1), False),
    "late panes": (
        _windowed(
            trigger=trigger.AfterWatermark(late=trigger.AfterCount(1)),
            accumulation_mode=trigger.AccumulationMode.DISCARDING,
            allowed_lateness=60,
        ),
        False,
    ),
    "EARLIEST timestamps": (_windowed(timestamp_combiner=window.TimestampCombiner.OUTPUT_AT_EARLIEST), False),
    "LATEST timestamps": (_windowed(timestamp_combiner=window.TimestampCombiner.OUTPUT_AT_LATEST), False),
    "a stateful DoFn with a timer": (lambda pcoll: pcoll | "Op" >> beam.ParDo(_CountInState()), False),
}


def _plan(apply):
    p = beam.Pipeline(options=PipelineOptions(["--streaming"]))
    events = p | TestStream().add_elements([window.TimestampedValue(("a", 1), 1)]).advance_watermark_to_infinity()
    _ = apply(events)
    return plan_streaming_pipeline(pipeline_proto_of(p))


def _op_names(plan):
    """display name -> operator name of the plan's keyed operators"""
    return {op.display_name: op.name for op in plan.operators if op.is_keyed}


@pytest.mark.parametrize("case", sorted(CASES))
def test_which_keyed_operators_pass_their_watermark_on_in_the_same_batch(case):
    apply, expected = CASES[case]
    plan = _plan(apply)
    (name,) = [n for display, n in _op_names(plan).items() if display.startswith("Op")]
    assert (name in plan.same_batch_stages) is expected
    # The source planner's authority gets them.
    assert compile_script(plan, 2).same_batch_stages == plan.same_batch_stages


def test_an_aggregation_on_a_percentile_watermark_is_held_as_before():
    def apply(pcoll):
        with beam_spark_runner.watermark_percentile(0.9):
            return pcoll | beam.WindowInto(window.FixedWindows(10)) | "Op" >> beam.GroupByKey()

    plan = _plan(apply)
    assert plan.same_batch_stages == frozenset()
