"""The source planner with a Spark data source: its watermark follows what
earlier batches read (reported in their hold records), it is kept in every
offset, a query with such a source never idles without a batch, and a drain
closes the source once a batch read nothing from it. Clock and sleep are
injected; no Spark."""

from beam_spark_runner.streaming.source_planner import (
    IDLE_WAIT_SECONDS,
    SourcePlanner,
    SourceScript,
    hold_record,
    request_drain,
    write_holds,
)
from beam_spark_runner.streaming.source_watermarks import WatermarkRule
from beam_spark_runner.streaming.watermarks import MAX_MICROS, MIN_MICROS, BatchTimes, StageInputs
from tests.unit.planning_clock import PlanningClock

S = 10**6
NOW = 5_000 * S


def _planner(tmp_path, clock, rule=WatermarkRule(out_of_orderness_us=2 * S)):
    script = SourceScript(
        streams=(),
        impulse_rows=(),
        watermark_graph={"gbk": StageInputs(sources=("read",))},
        key_groups=1,
        spark_sources={"read": rule},
    )
    return SourcePlanner(script, str(tmp_path), clock=clock, sleep=clock.sleep)


def _input_wm(offset):
    return BatchTimes.from_json(offset["times"]).input_watermarks["gbk"]


def _after(tmp_path, planner, offset, read, hold=None):
    """The next offset once batch `offset` reported reading `read`."""
    write_holds(str(tmp_path), offset["batch"], hold_record({"gbk": {"0": [hold, hold, None]}}, None, read))
    return planner.next_offset(offset)


def test_the_watermark_follows_what_the_previous_batch_read(tmp_path):
    clock = PlanningClock(NOW)
    planner = _planner(tmp_path, clock)
    first = planner.next_offset(planner.initial_offset())
    assert _input_wm(first) == MIN_MICROS
    second = _after(tmp_path, planner, first, {"read": {"": 10 * S}})
    assert _input_wm(second) == 8 * S
    assert second["spark"]["read"]["partitions"] == {"": [10 * S, first["pt"]]}
    third = _after(tmp_path, planner, second, {"read": {"": 7 * S}})  # older: no move back
    assert _input_wm(third) == 8 * S


def test_a_replanned_batch_gets_the_same_watermark_from_the_offset_it_starts_at(tmp_path):
    clock = PlanningClock(NOW)
    planner = _planner(tmp_path, clock)
    first = planner.next_offset(planner.initial_offset())
    second = _after(tmp_path, planner, first, {"read": {"p0": 10 * S, "p1": 30 * S}})
    # A restarted driver: a new planner, the same offset and hold record.
    again = _planner(tmp_path, clock).next_offset(first)
    assert _input_wm(again) == _input_wm(second) == 8 * S
    assert again["spark"] == second["spark"]


def test_with_a_spark_source_an_idle_query_still_plans_a_batch_after_the_idle_wait(tmp_path):
    clock = PlanningClock(NOW)
    planner = _planner(tmp_path, clock)
    offset = planner.next_offset(planner.initial_offset())
    # Nothing read, nothing held, nothing due: without Spark sources no batch.
    for _ in range(3):
        following = _after(tmp_path, planner, offset, {})
        assert following is not offset and following["batch"] == offset["batch"] + 1
        offset = following
    assert clock.slept and all(s <= IDLE_WAIT_SECONDS for s in clock.slept)


def test_a_source_that_delivers_rows_is_never_waited_for(tmp_path):
    clock = PlanningClock(NOW)
    planner = _planner(tmp_path, clock)
    offset = planner.next_offset(planner.initial_offset())
    for i in range(3):
        offset = _after(tmp_path, planner, offset, {"read": {"": (10 + i) * S}})
    assert clock.slept == []


def test_a_drain_closes_the_source_once_a_batch_read_nothing_from_it(tmp_path):
    clock = PlanningClock(NOW)
    planner = _planner(tmp_path, clock)
    first = planner.next_offset(planner.initial_offset())
    request_drain(str(tmp_path))
    second = _after(tmp_path, planner, first, {"read": {"": 10 * S}})
    assert second["drain"] and _input_wm(second) == 8 * S and not second["done"]
    third = _after(tmp_path, planner, second, {})
    assert third["src_wm"]["read"] == MAX_MICROS
    assert _input_wm(third) == MAX_MICROS
    # Once the operator reported its state after that batch, the run is done.
    assert _after(tmp_path, planner, third, {})["done"]


def test_an_idle_partition_stops_holding_the_watermark(tmp_path):
    clock = PlanningClock(NOW)
    planner = _planner(tmp_path, clock, WatermarkRule(idle_timeout_us=10 * S))
    offset = planner.next_offset(planner.initial_offset())
    offset = _after(tmp_path, planner, offset, {"read": {"a": 5 * S, "b": 50 * S}})
    assert _input_wm(offset) == 5 * S
    for second in range(4):
        clock.micros += 5 * S
        offset = _after(tmp_path, planner, offset, {"read": {"b": (60 + second) * S}})
    assert _input_wm(offset) == 63 * S


def _lanes_planner(tmp_path, clock):
    """One Spark source read by "gbk" (exact) and "approx" (at 0.9), and
    "after" reading gbk at 0.9: a lane source and a lane stage."""
    from beam_spark_runner.streaming.watermark_lanes import plan_lanes

    graph = {
        "gbk": StageInputs(sources=("read",)),
        "approx": StageInputs(sources=("read",)),
        "after": StageInputs(stages=("gbk",)),
    }
    lanes = plan_lanes(graph, {"approx": 0.9, "after": 0.9}, ["read"])
    rules = {"read": WatermarkRule()}
    for lane_source, (_, p) in lanes.lane_sources.items():
        rules[lane_source] = WatermarkRule(percentile=p)
    script = SourceScript((), (), lanes.operator_graph, 1, spark_sources=rules, lanes=lanes)
    return SourcePlanner(script, str(tmp_path), clock=clock, sleep=clock.sleep)


def _lane_holds(offset, tmp_path, read, gbk_holds):
    """gbk's one key-group holds its ten keys at `gbk_holds`, summarized."""
    from beam_spark_runner.streaming.source_planner import KeyGroupHold
    from beam_spark_runner.streaming.timestamp_summary import TimestampSummary

    summary = TimestampSummary.of(gbk_holds).to_json()
    entry = KeyGroupHold(min(gbk_holds), min(gbk_holds), None, summary, summary).to_json()
    none = KeyGroupHold(None, None).to_json()
    record = hold_record({"gbk": {"0": entry}, "approx": {"0": none}, "after": {"0": none}}, None, read)
    write_holds(str(tmp_path), offset["batch"], record)


def test_percentile_lanes_plan_from_the_same_reads_and_replay_the_same(tmp_path):
    clock = PlanningClock(NOW)
    planner = _lanes_planner(tmp_path, clock)
    first = planner.next_offset(planner.initial_offset())
    # Ten partitions: nine at 50 s, one laggard at 5 s; gbk holds nine keys at 40 s and one at 2 s.
    read = {"read": dict({"p%d" % i: 50 * S for i in range(9)}, laggard=5 * S)}
    _lane_holds(first, tmp_path, read, [40 * S] * 9 + [2 * S])
    second = planner.next_offset(first)
    _lane_holds(second, tmp_path, {}, [40 * S] * 9 + [2 * S])
    third = planner.next_offset(second)
    times = BatchTimes.from_json(third["times"])
    assert times.input_watermarks["gbk"] == 5 * S  # the laggard partition holds the exact lane
    assert times.input_watermarks["approx"] == 50 * S  # not the 90% one
    assert times.input_watermarks["after"] == 40 * S  # gbk at 90%: its straggling key does not hold it
    assert times.output_watermarks["gbk"] == 2 * S
    # The CONTROL steps carry each operator's own lane.
    assert third["steps"]["approx"][-1][1] == 50 * S and third["steps"]["gbk"][-1][1] == 5 * S
    # A restarted driver replans batch 3 from batch 2's offset: the same times, lanes included.
    again = _lanes_planner(tmp_path, clock).next_offset(second)
    assert again["times"] == third["times"] and again["spark"] == third["spark"]
