"""A triggered side input is viewed at its latest firing (Beam's model:
"if the side input has multiple trigger firings, Beam uses the value from
the latest trigger firing"): a global combine that fired early and then
on time is one value to a singleton view, the on-time pane's, in batch and
in streaming. Before, the view held every firing's value, and a singleton
view of it failed ("more than one element")."""

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms import trigger, window

from beam_spark_runner import SparkRunner

VALUES = list(range(10))  # all in the window [0, 10)


def _side_sum(values):
    """The side input: VALUES in [0, 10), an early pane after every 3
    elements, accumulating, summed by a global combine: its panes' sums
    grow, and the last, on time, holds them all."""
    return (
        values
        | "Side window"
        >> beam.WindowInto(
            window.FixedWindows(10),
            trigger=trigger.AfterWatermark(early=trigger.AfterCount(3)),
            accumulation_mode=trigger.AccumulationMode.ACCUMULATING,
        )
        | beam.CombineGlobally(sum).without_defaults()
    )


@pytest.mark.parametrize("streaming", [False, True], ids=["batch", "streaming"])
def test_a_global_combine_that_fired_early_and_on_time_is_seen_at_its_on_time_value(streaming):
    p = beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(["--streaming"] if streaming else []))
    if streaming:
        events = TestStream()
        for v in VALUES:
            events = events.add_elements([window.TimestampedValue(v, v)], tag="side")
        events = events.add_elements([window.TimestampedValue("main", 5)], tag="main")
        streams = p | events.advance_watermark_to_infinity(tag="side").advance_watermark_to_infinity(tag="main")
        side, main = streams["side"], streams["main"]
    else:
        side = p | "Side" >> beam.Create(VALUES) | "Side times" >> beam.Map(lambda v: window.TimestampedValue(v, v))
        main = p | "Main" >> beam.Create(["main"]) | "Main time" >> beam.Map(lambda m: window.TimestampedValue(m, 5))
    out = (
        main
        | "Main window" >> beam.WindowInto(window.FixedWindows(10))
        | beam.Map(lambda m, total: (m, total), total=beam.pvalue.AsSingleton(_side_sum(side)))
    )
    assert_that(out, equal_to([("main", sum(VALUES))]))
    p.run().wait_until_finish()
