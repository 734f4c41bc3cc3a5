"""A streaming run's progress records (SparkPipelineResult.streaming_progress)."""

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.transforms import window

from beam_spark_runner import SparkRunner
from beam_spark_runner.streaming.watermarks import MAX_MICROS


def test_progress_lists_every_batch_with_monotonic_watermarks_rows_and_late_drops():
    stream = (
        TestStream()
        .add_elements([window.TimestampedValue(("a", 1), 1), window.TimestampedValue(("b", 2), 2)])
        .advance_watermark_to(20)
        .add_elements([window.TimestampedValue(("a", 3), 3)])  # behind the watermark: dropped
        .add_elements([window.TimestampedValue(("a", 4), 25)])
        .advance_watermark_to_infinity()
    )
    p = beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(["--streaming"]))
    _ = (
        p
        | stream
        | beam.WindowInto(window.FixedWindows(10))
        | "Group" >> beam.GroupByKey()
        | "Sizes" >> beam.MapTuple(lambda k, vs: ("all", len(vs)))
        | "Regroup" >> beam.GroupByKey()
    )
    result = p.run()
    result.wait_until_finish()
    records = result.streaming_progress()
    assert [r.batch for r in records] == list(range(1, len(records) + 1))
    assert all(r.duration_ms >= 0 for r in records)
    for name in ("Group", "Regroup"):
        stages = [r.stage(name) for r in records]
        for attribute in ("input_watermark", "output_watermark"):
            values = [getattr(s, attribute) for s in stages]
            assert values == sorted(values), (name, attribute, values)
        assert stages[-1].output_watermark == MAX_MICROS
    group = [r.stage("Group") for r in records]
    assert sum(s.rows_in for s in group) == 4  # every element reached the GroupByKey ...
    assert sum(s.dropped_late for s in group) == 1  # ... and the late one was dropped there
    # Its panes (a [0, 10), b [0, 10), a [20, 30)) reach Regroup as one row each.
    regroup = [r.stage("Regroup") for r in records]
    assert sum(s.rows_in for s in regroup) == 3


def test_a_batch_run_has_no_streaming_progress():
    p = beam.Pipeline(runner=SparkRunner(), options=PipelineOptions([]))
    _ = p | beam.Create([1]) | beam.Map(lambda x: x)
    result = p.run()
    result.wait_until_finish()
    assert result.streaming_progress() == ()
