"""Drain without Spark: the source planner's drained offsets, the CONTROL
rows that tell operators, a splittable DoFn's truncation, and the states a
drained result goes through."""

import json
import pickle
import threading

import apache_beam as beam
import pytest
from apache_beam.io.restriction_trackers import OffsetRange
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.transforms import window
from apache_beam.utils.windowed_value import WindowedValue

from beam_spark_runner.plans import OperatorKind
from beam_spark_runner.result import NotDrainable, PipelineState, SparkPipelineResult
from beam_spark_runner.streaming import rows as R
from beam_spark_runner.streaming.operators import SdfOperator
from beam_spark_runner.streaming.script import compile_script
from beam_spark_runner.streaming.source_planner import SourcePlanner, request_drain, write_holds
from beam_spark_runner.streaming.watermarks import MAX_MICROS
from beam_spark_runner.translation.planner import pipeline_proto_of, plan_streaming_pipeline
from tests.splittable_dofns import TailPositions


def _stream_planner(tmp_path):
    p = beam.Pipeline(options=PipelineOptions(["--streaming"]))
    stream = (
        TestStream()
        .add_elements([window.TimestampedValue(("a", 1), 1)])
        .advance_watermark_to(10)
        .add_elements([window.TimestampedValue(("a", 2), 12)])
        .advance_processing_time(5)
        .advance_watermark_to_infinity()
    )
    _ = p | stream | beam.WindowInto(window.FixedWindows(5)) | beam.GroupByKey() | beam.Map(print)
    plan = plan_streaming_pipeline(pipeline_proto_of(p))
    return plan, SourcePlanner(compile_script(plan, key_groups=2), str(tmp_path))


def test_a_drained_batch_reads_no_more_events_and_puts_every_source_at_the_end(tmp_path):
    _, undrained = _stream_planner(tmp_path)
    assert not undrained.next_offset(undrained.initial_offset())["drain"]
    plan, planner = _stream_planner(tmp_path)
    start = planner.initial_offset()
    request_drain(str(tmp_path))
    first = planner.next_offset(start)
    assert first["drain"] and first["pos"] == start["pos"]  # no event read
    assert set(first["src_wm"].values()) == {MAX_MICROS}
    assert first["pt"] == start["pt"]  # the stream's clock stays where it was
    rows = planner.batch_rows(start, first)
    assert not [r for r in rows if r[0] == R.DATA]
    controls = [R.parse_control(r[4]) for r in rows if r[0] == R.CONTROL]
    assert controls and all(c.draining for c in controls)
    # A processing-time hold no longer holds the watermark back.
    (op,) = first["steps"]
    write_holds(str(tmp_path), 1, {op: {"0": [5_000_000, None]}})
    second = planner.next_offset(first)
    assert second["drain"] and second["done"]


def test_the_drain_is_kept_in_every_later_offset(tmp_path):
    """A replayed or resumed batch drains even where the driver's request
    (a file in its scratch directory) is gone."""
    plan, planner = _stream_planner(tmp_path)
    request_drain(str(tmp_path))
    first = planner.next_offset(planner.initial_offset())
    _, restarted = _stream_planner(tmp_path / "elsewhere")
    (tmp_path / "elsewhere").mkdir()
    write_holds(str(tmp_path / "elsewhere"), 1, {})
    assert restarted.next_offset(json.loads(json.dumps(first)))["drain"]


def test_control_rows_say_whether_the_pipeline_drains():
    steps = [[0, 5, 6], [1, 7, 8, {"side": 3}]]
    plain = R.control("op", 0, 1, steps)
    assert json.loads(plain[4]) == steps  # the format of before drains existed
    assert R.parse_control(plain[4]) == R.Control(((0, 5, 6), (1, 7, 8, {"side": 3})), False)
    draining = R.parse_control(R.control("op", 0, 1, steps, draining=True)[4])
    assert draining.steps == ((0, 5, 6), (1, 7, 8, {"side": 3})) and draining.draining


def _tail_operator():
    p = beam.Pipeline(options=PipelineOptions(["--streaming"]))
    _ = p | beam.Create([("log", 1000)]) | beam.ParDo(TailPositions()) | beam.Map(print)
    plan = plan_streaming_pipeline(pipeline_proto_of(p))
    op = next(op for op in plan.operators if op.kind == OperatorKind.SDF)
    return op, SdfOperator(op, plan, 1)


def _residual_restrictions(operator, blob):
    impl = operator._truncator_of()._impl
    return [impl.decode_nested(r[1]).value[0][1][0] for r in pickle.loads(blob)["residuals"]]


def test_a_splittable_dofn_truncates_its_residuals_once_the_pipeline_drains():
    op, operator = _tail_operator()
    truncator = operator._truncator_of()
    element = WindowedValue((("log", 1000), (OffsetRange(0, 1000), None)), 0, [window.GlobalWindow()])
    (dest,) = [d for i, d in enumerate(op.inputs) if i == truncator.main_index]
    row = R.data(R.dest_text(dest), truncator._impl.encode_nested(element.with_value((element.value, 1000.0))), 0)
    second = 10**6

    def step(t):  # the watermark at the end, processing time at t seconds
        return [[0, MAX_MICROS, t * second]]

    # The element runs position 0 (at the batch's time, 1 s); its residual
    # resumes 0.2 s later, in a later batch.
    running = operator.run(None, [row], step(1))
    assert _residual_restrictions(operator, running.blob) == [OffsetRange(1, 1000)]
    drained = operator.run(running.blob, [], step(2), draining=True)
    # The kept residual was truncated to three positions and the first ran;
    # what it left is the truncated rest (not the full range again).
    assert _residual_restrictions(operator, drained.blob) == [OffsetRange(2, 4)]
    assert pickle.loads(drained.blob)["drained"]
    for t in (3, 4):
        drained = operator.run(drained.blob, [], step(t), draining=True)
    assert not pickle.loads(drained.blob)["residuals"]
    assert drained.hold is None


def test_new_input_of_a_draining_splittable_dofn_is_truncated_before_it_runs():
    from apache_beam.transforms.periodicsequence import ImpulseSeqGenRestrictionProvider

    op, operator = _tail_operator()
    truncator = operator._truncator_of()
    encoded = truncator._impl.encode_nested(
        WindowedValue(((("log", 1000), (OffsetRange(0, 1000), None)), 1000.0), 0, [window.GlobalWindow()])
    )
    truncated = truncator._impl.decode_nested(truncator.truncate(truncator.main_index, encoded))
    assert truncated.value == ((("log", 1000), (OffsetRange(0, 3), None)), 3)
    truncator._provider = ImpulseSeqGenRestrictionProvider()  # truncates everything to nothing
    assert truncator.truncate(truncator.main_index, encoded) is None


class _Execution:
    def __init__(self):
        self.ended = threading.Event()
        self.drains = 0

    def __call__(self):
        self.ended.wait(30)
        return {}

    def drain(self):
        self.drains += 1


def test_a_drained_result_goes_draining_then_drained():
    execution = _Execution()
    result = SparkPipelineResult(execution, cancel_fn=execution.ended.set, drain_fn=execution.drain).start(dict)
    assert result.state == PipelineState.RUNNING
    assert result.drain() == PipelineState.DRAINING and result.drain() == PipelineState.DRAINING
    assert execution.drains == 1
    execution.ended.set()
    assert result.wait_until_finish() == PipelineState.DRAINED
    with pytest.raises(NotDrainable, match="DRAINED"):
        result.drain()


def test_a_draining_result_can_still_be_cancelled():
    execution = _Execution()
    result = SparkPipelineResult(execution, cancel_fn=execution.ended.set, drain_fn=execution.drain).start(dict)
    result.drain()
    assert result.cancel() == PipelineState.CANCELLED


def test_a_result_without_a_drain_is_a_batch_run():
    execution = _Execution()
    result = SparkPipelineResult(execution, cancel_fn=execution.ended.set).start(dict)
    with pytest.raises(NotDrainable, match="batch"):
        result.drain()
    execution.ended.set()
    assert result.wait_until_finish() == PipelineState.DONE


def test_the_splittable_dofn_blob_carries_its_format_version():
    """Blobs record `v` (SDF_BLOB_VERSION); one without it is version 1
    (written before the field); another version is refused by name."""
    from beam_spark_runner.streaming.operators import SDF_BLOB_VERSION

    op, operator = _tail_operator()
    truncator = operator._truncator_of()
    element = WindowedValue((("log", 1000), (OffsetRange(0, 1000), None)), 0, [window.GlobalWindow()])
    (dest,) = [d for i, d in enumerate(op.inputs) if i == truncator.main_index]
    row = R.data(R.dest_text(dest), truncator._impl.encode_nested(element.with_value((element.value, 1000.0))), 0)
    step = [[0, MAX_MICROS, 10**6]]
    running = operator.run(None, [row], step)
    saved = pickle.loads(running.blob)
    assert saved["v"] == SDF_BLOB_VERSION == 1
    without = pickle.dumps({k: v for k, v in saved.items() if k != "v"})
    assert _residual_restrictions(operator, operator.run(without, [], [[1, MAX_MICROS, 10**6]]).blob) == [
        OffsetRange(1, 1000)
    ]
    with pytest.raises(ValueError, match="format version 2; this runner reads version 1"):
        operator.run(pickle.dumps(dict(saved, v=2)), [], step)
