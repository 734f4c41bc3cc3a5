"""Chained GroupByKeys on the runner: a GroupByKey without allowed lateness
and with end-of-window timestamps passes its input watermark on in the same
micro-batch (streaming/watermarks.py), so an ON_TIME pane crosses the whole
chain in the batch whose watermark fired it; with allowed lateness each
GroupByKey still adds one batch of watermark lag. Either way every pane is
ON_TIME and nothing is dropped as late."""

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms import window

from beam_spark_runner import SparkRunner
from beam_spark_runner.streaming.watermarks import MAX_MICROS

GROUPS = ("G1", "G2", "G3")


def _stream():
    """Two windows of [0, 10) and [10, 20), closed one at a time."""
    return (
        TestStream()
        .add_elements([window.TimestampedValue(("k%d" % (i % 3), i), i) for i in range(1, 8)])
        .advance_watermark_to(12)
        .add_elements([window.TimestampedValue(("k%d" % (i % 3), i), i) for i in range(13, 18)])
        .advance_watermark_to(25)
        .advance_watermark_to_infinity()
    )


class _Timing(beam.DoFn):
    def process(self, kv, w=beam.DoFn.WindowParam, pane=beam.DoFn.PaneInfoParam):
        yield int(w.start), pane.timing, kv[1]


def _run(allowed_lateness):
    p = beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(["--streaming"]))
    windowed = p | _stream() | beam.WindowInto(window.FixedWindows(10), allowed_lateness=allowed_lateness)
    counts = (
        windowed
        | "G1" >> beam.GroupByKey()
        | "Sum1" >> beam.MapTuple(lambda k, vs: (k[:1], sum(vs)))
        | "G2" >> beam.GroupByKey()
        | "Sum2" >> beam.MapTuple(lambda k, vs: ("all", sum(vs)))
        | "G3" >> beam.GroupByKey()
        | "Sum3" >> beam.MapTuple(lambda k, vs: (k, sum(vs)))
    )
    on_time = beam.utils.windowed_value.PaneInfoTiming.ON_TIME
    assert_that(
        counts | beam.ParDo(_Timing()), equal_to([(0, on_time, sum(range(1, 8))), (10, on_time, sum(range(13, 18)))])
    )
    result = p.run()
    result.wait_until_finish()
    return [{name: r.stage(name) for name in GROUPS} for r in result.streaming_progress()]


def _firing_batches(records, name):
    """The indexes of the batches in which GroupByKey `name` emitted panes."""
    return [i for i, r in enumerate(records) if r[name].rows_out]


def test_without_allowed_lateness_an_on_time_pane_crosses_three_group_by_keys_in_one_batch():
    records = _run(allowed_lateness=0)
    for r in records:
        # Each GroupByKey reads the watermark the one before it reached in the same batch.
        assert r["G2"].input_watermark == r["G1"].output_watermark == r["G1"].input_watermark
        assert r["G3"].input_watermark == r["G2"].output_watermark == r["G2"].input_watermark
        assert all(s.dropped_late == 0 and s.late == 0 for s in r.values())
    assert records[-1]["G3"].output_watermark == MAX_MICROS
    assert _firing_batches(records, "G1") == _firing_batches(records, "G2") == _firing_batches(records, "G3")


def test_with_allowed_lateness_each_group_by_key_adds_one_batch_of_watermark_lag():
    records = _run(allowed_lateness=1)
    assert all(s.dropped_late == 0 and s.late == 0 for r in records for s in r.values())
    g1, g2, g3 = (_firing_batches(records, name) for name in GROUPS)
    assert g2[-1] == g1[-1] + 1 and g3[-1] == g2[-1] + 1
    assert records[-1]["G3"].output_watermark == MAX_MICROS
