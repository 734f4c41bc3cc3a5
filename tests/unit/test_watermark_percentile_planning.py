"""Planning percentile watermarks per transform: `watermark_percentile(P)`
annotates the steps built inside it; the plan gives each keyed operator its
percentile and asks the key-groups a lane reads at P < 1 for summaries of
their holds; bad or conflicting values are refused naming the transforms."""

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.transforms import window
from apache_beam.utils.windowed_value import WindowedValue

import beam_spark_runner
from beam_spark_runner.errors import UnsupportedPipelineError
from beam_spark_runner.streaming import rows as R
from beam_spark_runner.streaming.keyed_state import DictStore
from beam_spark_runner.streaming.operators import GroupOperator
from beam_spark_runner.streaming.script import compile_script
from beam_spark_runner.streaming.source_planner import AFTER_ALL
from beam_spark_runner.streaming.timestamp_summary import TimestampSummary
from beam_spark_runner.streaming.watermark_lanes import lane_name
from beam_spark_runner.streaming.watermarks import MIN_MICROS
from beam_spark_runner.translation.planner import pipeline_proto_of, plan_streaming_pipeline
from beam_spark_runner.translation.watermark_percentiles import ANNOTATION


def _events(p):
    stream = TestStream().add_elements([window.TimestampedValue(("a", 1), 1)]).advance_watermark_to_infinity()
    return p | stream | beam.WindowInto(window.FixedWindows(10))


def _two_consumers(percentile=0.95):
    """One keyed stage feeding an exact and an approximate aggregation."""
    p = beam.Pipeline(options=PipelineOptions(["--streaming"]))
    grouped = _events(p) | "First" >> beam.CombinePerKey(sum)
    _ = grouped | "Exact" >> beam.GroupByKey()
    with beam_spark_runner.watermark_percentile(percentile):
        _ = grouped | "Approx" >> beam.CombinePerKey(sum)
    return p


def _keyed(plan):
    return {op.display_name: op for op in plan.operators if op.is_keyed}


def test_the_annotated_aggregation_runs_at_its_percentile_and_the_rest_exactly():
    plan = plan_streaming_pipeline(pipeline_proto_of(_two_consumers()))
    ops = _keyed(plan)
    assert ops["Approx/Group"].watermark_percentile == 0.95
    assert ops["Exact"].watermark_percentile == 1.0
    assert ops["First/Group"].watermark_percentile == 1.0
    # Approx's lane reads First at 0.95: both summarize their holds.
    assert ops["First/Group"].summarize_holds and ops["Approx/Group"].summarize_holds
    assert not ops["Exact"].summarize_holds


def test_the_source_script_plans_the_approximate_lane():
    plan = plan_streaming_pipeline(pipeline_proto_of(_two_consumers()))
    ops = _keyed(plan)
    script = compile_script(plan, key_groups=2)
    first, approx = ops["First/Group"].name, ops["Approx/Group"].name
    assert script.watermark_graph[approx].stages == (lane_name(first, 0.95),)
    assert script.lanes.hold_stage == {lane_name(first, 0.95): first}
    exact = ops["Exact"].name
    assert script.watermark_graph[exact].stages == (first,)


def test_the_pipeline_percentile_is_the_default_and_an_annotation_overrides_it():
    plan = plan_streaming_pipeline(pipeline_proto_of(_two_consumers(0.5)), watermark_percentile=0.9)
    ops = _keyed(plan)
    assert ops["Approx/Group"].watermark_percentile == 0.5
    assert ops["Exact"].watermark_percentile == 0.9


def test_an_annotation_outside_the_accepted_range_is_refused_naming_the_transform():
    p = beam.Pipeline(options=PipelineOptions(["--streaming"]))
    events = _events(p)
    with beam.pipeline.transform_annotations(**{ANNOTATION: "1.5"}):
        _ = events | "Sum" >> beam.CombinePerKey(sum)
    with pytest.raises(UnsupportedPipelineError, match=r"Sum.*'1.5' must be a number above 0 and at most 1"):
        plan_streaming_pipeline(pipeline_proto_of(p))


def test_the_helper_refuses_a_bad_percentile_when_called():
    for bad in (0, 1.01, -0.5, "0.9", True):
        with pytest.raises(ValueError, match="above 0 and at most 1"):
            beam_spark_runner.watermark_percentile(bad)


def test_one_operator_asked_for_two_percentiles_is_refused():
    class KeepState(beam.DoFn):
        STATE = beam.transforms.userstate.ReadModifyWriteStateSpec("n", beam.coders.VarIntCoder())

        def process(self, element, n=beam.DoFn.StateParam(STATE)):
            n.write((n.read() or 0) + 1)
            yield element

    p = beam.Pipeline(options=PipelineOptions(["--streaming"]))
    events = _events(p)
    with beam_spark_runner.watermark_percentile(0.9):
        counted = events | "Count" >> beam.ParDo(KeepState())
    with beam_spark_runner.watermark_percentile(0.5):
        _ = counted | "After" >> beam.Map(lambda kv: kv)  # fused into Count's stage
    with pytest.raises(UnsupportedPipelineError, match="different watermark percentiles"):
        plan_streaming_pipeline(pipeline_proto_of(p))


def test_a_summarizing_group_reports_the_holds_of_all_its_keys():
    p = beam.Pipeline(options=PipelineOptions(["--streaming"]))
    events = _events(p)
    _ = events | "Exact" >> beam.GroupByKey()
    with beam_spark_runner.watermark_percentile(0.9):
        _ = events | "Approx" >> beam.GroupByKey()
    plan = plan_streaming_pipeline(pipeline_proto_of(p))
    group_op = _keyed(plan)["Approx"]
    assert group_op.summarize_holds and not _keyed(plan)["Exact"].summarize_holds
    operator = GroupOperator(group_op, plan, 2)
    codec = operator._codec

    def row(key, ts):
        # The runner sees the GroupByKey's safe coders: bytes.
        w = window.IntervalWindow(ts - ts % 10, ts - ts % 10 + 10)
        element = codec.pre_impl.encode_nested(WindowedValue((key, b"1"), ts, (w,)))
        return R.data("gbk:" + group_op.name, element, 0, 0, codec.key_impl.encode_nested(key))

    # Nine keys in [90, 100), one straggler in [0, 10).
    rows = [row(b"k%d" % i, 95) for i in range(9)] + [row(b"straggler", 1)]
    result = operator.run(DictStore(), rows, [[AFTER_ALL, MIN_MICROS, 0]])
    assert result.hold == 9_999_999
    assert result.hold_summary == TimestampSummary.of([99_999_999] * 9 + [9_999_999])
    # 90% of the keys hold at 100 s (less the summary's 1 ms buckets).
    assert result.hold_summary.low_watermark(0.9) == 99_999_000
    exact = GroupOperator(_keyed(plan)["Exact"], plan, 2).run(DictStore(), [], [[AFTER_ALL, MIN_MICROS, 0]])
    assert exact.hold_summary is None
