"""Progress records of a streaming run (streaming/progress.py), without
Spark: counters read from operator metrics, records built from the
source planner's batch times, the bounded log."""

from apache_beam.metrics import monitoring_infos

from beam_spark_runner.streaming import progress
from beam_spark_runner.streaming.script import compile_script
from beam_spark_runner.streaming.source_planner import SourcePlanner, write_holds
from beam_spark_runner.streaming.watermarks import MAX_MICROS, BatchTimes
from beam_spark_runner.translation.planner import pipeline_proto_of, plan_streaming_pipeline
from beam_spark_runner.plans import OperatorKind
from tests.unit.test_streaming_planning import _two_gbk_pipeline


def test_operator_counters_are_read_from_the_runners_namespace_only():
    infos = [
        monitoring_infos.int64_user_counter(progress.NAMESPACE, "rows_in", 3, ptransform="g1"),
        monitoring_infos.int64_user_counter(progress.NAMESPACE, "rows_in", 2, ptransform="g1"),
        monitoring_infos.int64_user_counter(progress.NAMESPACE, "dropped_due_to_lateness", 1, ptransform="g1"),
        monitoring_infos.int64_user_counter("user", "rows_in", 100, ptransform="g1"),
    ]
    assert progress.operator_counters(infos) == {("g1", "rows_in"): 5, ("g1", "dropped_due_to_lateness"): 1}


def test_late_input_kept_and_dropped_makes_a_stages_late_fraction():
    times = BatchTimes(2, 7_000_000, {"g1": 5_000_000}, {"g1": 1_000_000})
    counters = {
        ("g1", "rows_in"): 8,
        ("g1", progress.LATE_COUNTER): 3,
        ("g1", "dropped_due_to_lateness"): 1,
    }
    record = progress.batch_progress(times, 50, {"g1": "Group"}, counters)
    stage = record.stage("Group")
    assert (stage.late, stage.dropped_late, stage.late_fraction) == (3, 1, 0.5)
    assert "3 late, 1 dropped late" in progress.describe(record)
    assert progress.StageProgress("g1", "Group", 0, 0).late_fraction == 0.0


def test_a_batch_record_names_each_keyed_operator_in_plan_order():
    times = BatchTimes(4, 7_000_000, {"g2": 1_000_000, "g1": 5_000_000}, {"g2": 0, "g1": 1_000_000})
    counters = {("g1", "rows_in"): 3, ("g1", "rows_out"): 1, ("g1", "dropped_late_for_side_input"): 2}
    record = progress.batch_progress(times, 120, {"g1": "First", "g2": "Second"}, counters)
    assert (record.batch, record.processing_time, record.duration_ms) == (4, 7_000_000, 120)
    assert [s.display_name for s in record.stages] == ["First", "Second"]
    assert record.stage("First") == progress.StageProgress("g1", "First", 5_000_000, 1_000_000, 3, 1, 2)
    assert record.stage("Second").rows_in == 0
    try:
        record.stage("Third")
    except KeyError as e:
        assert "Third" in str(e)
    else:
        raise AssertionError("an unknown operator was found")


def test_watermarks_per_stage_never_go_back_and_a_chained_stage_follows_its_upstream(tmp_path):
    """The two chained GroupByKeys of a TestStream pipeline: each stage's
    watermarks are non-decreasing batch to batch, the second stage's input
    watermark is the first's output watermark of the same batch, and every
    watermark reaches +infinity."""
    plan = plan_streaming_pipeline(pipeline_proto_of(_two_gbk_pipeline()))
    g1, g2 = [op.name for op in plan.operators if op.kind == OperatorKind.GROUP]
    names = {op.name: op.display_name for op in plan.operators if op.is_keyed}
    planner = SourcePlanner(compile_script(plan, key_groups=2), str(tmp_path))
    offset, records = planner.initial_offset(), []
    while not offset["done"]:
        offset = planner.next_offset(offset)
        times = BatchTimes.from_json(offset["times"])
        records.append(progress.batch_progress(times, 10, names, {}))
        write_holds(str(tmp_path), offset["batch"], {g1: {}, g2: {}})
    for op in (g1, g2):
        inputs = [next(s for s in r.stages if s.name == op).input_watermark for r in records]
        outputs = [next(s for s in r.stages if s.name == op).output_watermark for r in records]
        assert inputs == sorted(inputs) and outputs == sorted(outputs)
        assert outputs[-1] == MAX_MICROS
    for r in records:
        first, second = (next(s for s in r.stages if s.name == op) for op in (g1, g2))
        assert second.input_watermark == first.output_watermark


def test_the_log_keeps_the_last_batches():
    log = progress.ProgressLog(capacity=2)
    for batch in range(1, 4):
        log.record(progress.BatchProgress(batch, 0, 1, ()))
    assert [r.batch for r in log.batches()] == [2, 3]


def test_batch_metrics_describe_the_operators_not_the_lane_stages_of_percentile_watermarks():
    times = BatchTimes(
        3, 10_000, {"gbk": 5_000, "gbk@watermark_p0.9": 8_000}, {"gbk": 4_000, "gbk@watermark_p0.9": 7_000}
    )
    labels = progress.batch_metrics(times, 12, 1.0, {"gbk": "GroupByKey"})
    assert set(labels) == {"gbk", progress.RUN}
    gauges = {monitoring_infos.parse_namespace_and_name(i)[1]: i for i in labels["gbk"]}
    assert set(gauges) == {"input_watermark_ms", "output_watermark_ms", "watermark_lag_ms"}


def test_a_batch_record_leaves_the_lane_stages_out():
    times = BatchTimes(
        3, 10_000, {"gbk": 5_000, "gbk@watermark_p0.9": 8_000}, {"gbk": 4_000, "gbk@watermark_p0.9": 7_000}
    )
    record = progress.batch_progress(times, 12, {"gbk": "GroupByKey"}, {})
    assert [s.name for s in record.stages] == ["gbk"]
