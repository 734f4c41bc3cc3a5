"""Idle costs nothing: when no event is read, no watermark moves and no
key-group (nor the driver) has a processing-time wake-up due, the source
planner answers Spark's offset request with the offset it was given, so
Spark runs no batch, after waiting for the next wake-up (at most
IDLE_WAIT_SECONDS per request). Clock and sleep are injected."""

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import window
from apache_beam.transforms.periodicsequence import PeriodicImpulse

from beam_spark_runner.plans import OperatorKind
from beam_spark_runner.streaming.keyed_state import DictStore
from beam_spark_runner.streaming.script import compile_script
from beam_spark_runner.streaming.source_planner import (
    IDLE_WAIT_SECONDS,
    HoldReport,
    SourcePlanner,
    hold_record,
    request_drain,
    write_holds,
)
from tests.unit.planning_clock import PlanningClock

SECOND = 10**6
START = 1_000 * SECOND  # the ticks' first event time


def _planner(tmp_path, clock):
    p = beam.Pipeline(options=PipelineOptions(["--streaming"]))
    _ = (
        p
        | PeriodicImpulse(start_timestamp=START / SECOND, stop_timestamp=START / SECOND + 100, fire_interval=10)
        | beam.Map(lambda t: ("k", 1))
        | beam.WindowInto(window.FixedWindows(10))
        | beam.GroupByKey()
    )
    from beam_spark_runner.translation.planner import pipeline_proto_of, plan_streaming_pipeline

    plan = plan_streaming_pipeline(pipeline_proto_of(p))
    (sdf,) = [op.name for op in plan.operators if op.kind == OperatorKind.SDF]
    (gbk,) = [op.name for op in plan.operators if op.kind == OperatorKind.GROUP]
    planner = SourcePlanner(compile_script(plan, key_groups=1), str(tmp_path), clock=clock, sleep=clock.sleep)
    return planner, sdf, gbk


def _settle(tmp_path, planner, clock, record_of):
    """Runs batches (writing `record_of(batch)` as each one's hold record)
    until the planner idles; returns (the last offset, the idle answer)."""
    offset = planner.next_offset(planner.initial_offset())
    for _ in range(10):
        write_holds(str(tmp_path), offset["batch"], record_of(offset["batch"]))
        following = planner.next_offset(offset)
        if following is offset:
            return offset, following
        offset = following
    raise AssertionError("the planner never idled")


def test_an_idle_pipeline_runs_no_batch_until_its_next_wake_up(tmp_path):
    clock = PlanningClock(START + 5 * SECOND)
    planner, sdf, gbk = _planner(tmp_path, clock)
    tick = START + 10 * SECOND  # the SDF's residual resumes at the next tick

    def record(batch):
        return hold_record({sdf: {"0": [tick, tick, tick]}, gbk: {"0": [None, None, None]}})

    last, idle = _settle(tmp_path, planner, clock, record)
    assert idle is last  # the same offset: Spark runs no batch
    assert clock.slept[-1] == IDLE_WAIT_SECONDS  # the tick is 5 s away: one bounded wait
    # Asked again and again, it waits until the tick, then plans the batch
    # at the processing time it runs at.
    while planner.next_offset(last) is last:
        pass
    assert clock.micros >= tick
    woken = planner.next_offset(last)
    assert woken["batch"] == last["batch"] + 1 and woken["pt"] >= tick
    assert sum(clock.slept) <= (tick - (START + 5 * SECOND)) / SECOND + 2 * IDLE_WAIT_SECONDS


def test_a_wake_up_sooner_than_the_bounded_wait_ends_the_wait_then(tmp_path):
    clock = PlanningClock(START + 5 * SECOND)
    planner, sdf, gbk = _planner(tmp_path, clock)
    soon = clock.micros + 50_000  # wakes 50 ms from now

    last, _ = _settle(
        tmp_path, planner, clock, lambda b: hold_record({sdf: {"0": [START, START, soon]}, gbk: {"0": [None] * 3}})
    )
    assert clock.slept[-1] <= 0.05 + 1e-9


def test_no_idling_while_the_driver_needs_batches_or_a_drain_was_requested(tmp_path):
    clock = PlanningClock(START + 5 * SECOND)
    planner, sdf, gbk = _planner(tmp_path, clock)
    later = START + 100 * SECOND
    holds = {sdf: {"0": [START, START, later]}, gbk: {"0": [None, None, None]}}
    last, _ = _settle(tmp_path, planner, clock, lambda b: hold_record(holds))
    # The driver's coordinator holds side effects back until more batches complete.
    write_holds(str(tmp_path), last["batch"], hold_record(holds, driver_wake=0))
    assert planner.next_offset(last)["batch"] == last["batch"] + 1
    write_holds(str(tmp_path), last["batch"], hold_record(holds))
    request_drain(str(tmp_path))
    assert planner.next_offset(last)["drain"]


def test_a_hold_record_without_wake_ups_never_idles(tmp_path):
    """Records written before wake-ups were reported (format 1, in a
    checkpoint resumed by this runner) say nothing of them."""
    clock = PlanningClock(START + 5 * SECOND)
    planner, sdf, gbk = _planner(tmp_path, clock)
    offset = planner.next_offset(planner.initial_offset())
    for _ in range(5):
        write_holds(str(tmp_path), offset["batch"], {sdf: {"0": [START, START]}, gbk: {"0": [None, None]}})
        following = planner.next_offset(offset)
        assert following is not offset
        offset = following
    assert HoldReport.from_json({"a": {}}).wake_known is False
    report = HoldReport.from_json(hold_record({"a": {"0": [1, 1, 7]}, "b": {"0": [None, None, None]}}, 9))
    assert report.wake_known and report.wake == 7


def test_a_group_by_key_wakes_at_its_processing_time_trigger():
    from apache_beam.transforms import trigger
    from apache_beam.utils.windowed_value import WindowedValue

    from beam_spark_runner.streaming import rows as R
    from beam_spark_runner.streaming.operators import GroupOperator
    from beam_spark_runner.streaming.source_planner import AFTER_ALL
    from beam_spark_runner.translation.planner import pipeline_proto_of, plan_streaming_pipeline

    p = beam.Pipeline(options=PipelineOptions(["--streaming"]))
    _ = (
        p
        | beam.Create([("k", 1)])
        | beam.WindowInto(
            window.GlobalWindows(),
            trigger=trigger.Repeatedly(trigger.AfterProcessingTime(30)),
            accumulation_mode=trigger.AccumulationMode.DISCARDING,
        )
        | beam.GroupByKey()
    )
    plan = plan_streaming_pipeline(pipeline_proto_of(p))
    group_op = next(op for op in plan.operators if op.kind == OperatorKind.GROUP)
    operator = GroupOperator(group_op, plan, 1)
    codec = operator._codec
    element = codec.pre_impl.encode_nested(WindowedValue(("k", 1), 0, (window.GlobalWindow(),)))
    key = codec.key_impl.encode_nested("k")
    row = R.data("gbk:" + group_op.name, element, 0, 0, key)
    now = START
    store = DictStore()
    started = operator.run(store, [], [[AFTER_ALL, 0, now]])  # the first batch: no data yet
    assert started.wake is None
    buffered = operator.run(store, [row], [[AFTER_ALL, 0, now]])
    assert buffered.wake == now + 30 * SECOND  # the pane is due 30 s after its first element
    fired = operator.run(store, [], [[AFTER_ALL, 0, now + 30 * SECOND]])
    assert [r for r in fired.rows if r[0] == R.DATA] and fired.wake is None
