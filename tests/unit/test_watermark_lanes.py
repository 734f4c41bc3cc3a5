"""Percentile lanes of a watermark graph (streaming/watermark_lanes.py) and
the authority planning them (streaming/watermarks.py): a stage read at P < 1
is held at the time a share P of its holds passed; an exact stage beside it
keeps the exact watermark; lane stages are journaled like real ones."""

import pytest
from hypothesis import given, settings, strategies as st

from beam_spark_runner.streaming.timestamp_summary import TimestampSummary
from beam_spark_runner.streaming.watermark_lanes import lane_name, percentile_text, plan_lanes
from beam_spark_runner.streaming.watermarks import MIN_MICROS, StageInputs, WatermarkAuthority

S = StageInputs


def _graph():
    # src -> gbk -> (exact, approx): two consumers of one upstream stage.
    return {
        "gbk": S(sources=("src",)),
        "exact": S(stages=("gbk",)),
        "approx": S(stages=("gbk",)),
    }


def test_an_all_exact_graph_is_its_own_single_lane():
    lanes = plan_lanes(_graph(), {})
    assert lanes.graph == _graph()
    assert lanes.operator_graph == _graph()
    assert not lanes.summarized and not lanes.lane_sources and not lanes.hold_stage


def test_a_consumer_at_p_reads_its_upstream_in_lane_p_and_the_spark_source_at_p():
    lanes = plan_lanes(_graph(), {"approx": 0.95}, spark_sources=["src"])
    upstream = lane_name("gbk", 0.95)
    assert lanes.graph["approx"] == S(stages=(upstream,))
    assert lanes.graph[upstream] == S(sources=(lane_name("src", 0.95),))
    assert lanes.graph["exact"] == S(stages=("gbk",))
    assert lanes.hold_stage == {upstream: "gbk"}
    assert lanes.hold_percentiles == {"approx": 0.95, upstream: 0.95}
    assert lanes.lane_sources == {lane_name("src", 0.95): ("src", 0.95)}
    # gbk's holds are read at 0.95 by its lane stage; approx's own by itself.
    assert lanes.summarized == {"gbk", "approx"}
    order = list(lanes.graph)
    assert order.index(upstream) < order.index("approx")
    assert lanes.operator_graph == {op: lanes.graph[op] for op in ("gbk", "exact", "approx")}


def test_the_pipeline_percentile_everywhere_needs_no_lane_stages():
    lanes = plan_lanes(_graph(), {op: 0.9 for op in _graph()}, spark_sources=["src"])
    assert not lanes.hold_stage
    assert lanes.graph["gbk"] == S(sources=(lane_name("src", 0.9),))
    assert lanes.graph["approx"] == S(stages=("gbk",))


def test_an_exact_consumer_of_an_approximate_stage_reads_an_exact_copy_of_it():
    graph = {"a": S(sources=("src",)), "b": S(stages=("a",))}
    lanes = plan_lanes(graph, {"a": 0.9}, spark_sources=["src"])
    assert lanes.graph["b"] == S(stages=(lane_name("a", 1.0),))
    assert lanes.graph[lane_name("a", 1.0)] == S(sources=("src",))
    assert lanes.summarized == {"a"}


def test_bad_percentiles_and_unknown_operators_are_refused():
    with pytest.raises(ValueError, match="at most 1"):
        plan_lanes(_graph(), {"approx": 1.5})
    with pytest.raises(KeyError, match="nope"):
        plan_lanes(_graph(), {"nope": 0.5})


def test_percentiles_are_written_as_their_decimals():
    assert [percentile_text(p) for p in (1, 1.0, 0.95, 0.5)] == ["1", "1", "0.95", "0.5"]


def _authority(lanes, clock=lambda: 0, journal=None):
    return WatermarkAuthority(
        lanes.graph, clock, journal, hold_percentiles=lanes.hold_percentiles, hold_stage=lanes.hold_stage
    )


def _report_gbk(authority, holds):
    """gbk's key-groups: kg i holds its keys at `holds[i]` (one key each), summarized."""
    authority.report_holds(
        "gbk",
        {kg: min(ts) for kg, ts in enumerate(holds)},
        {kg: TimestampSummary.of(ts) for kg, ts in enumerate(holds)},
    )


def test_a_straggling_key_holds_the_exact_consumer_but_not_the_approximate_one():
    lanes = plan_lanes(_graph(), {"approx": 0.9})
    authority = _authority(lanes)
    authority.report_source("src", 100_000_000)
    authority.plan(1)  # inputs move to the source's watermark
    # Twenty keys: nineteen hold at 60 s, one straggler at 5 s.
    _report_gbk(authority, [[60_000_000] * 10, [60_000_000] * 9 + [5_000_000]])
    authority.plan(2)
    times = authority.plan(3)
    assert times.input_watermarks["exact"] == 5_000_000
    assert times.input_watermarks["approx"] == 60_000_000
    assert times.output_watermarks["gbk"] == 5_000_000


def test_without_summaries_a_key_group_counts_as_its_earliest_hold():
    lanes = plan_lanes(_graph(), {"approx": 0.5})
    authority = _authority(lanes)
    authority.report_source("src", 100_000_000)
    authority.plan(1)
    authority.report_holds("gbk", {0: 10_000_000, 1: 50_000_000, 2: 50_000_000})
    authority.plan(2)
    times = authority.plan(3)
    assert times.input_watermarks["approx"] == 50_000_000
    assert times.input_watermarks["exact"] == 10_000_000


def test_lane_stages_are_journaled_and_a_replay_plans_the_same_times():
    lanes = plan_lanes(_graph(), {"approx": 0.9})
    authority = _authority(lanes)
    authority.report_source("src", 100_000_000)
    authority.plan(1)
    _report_gbk(authority, [[60_000_000] * 19 + [5_000_000]])
    authority.plan(2)
    planned = authority.plan(3)
    assert lane_name("gbk", 0.9) in planned.output_watermarks
    # A restarted planner replays batch 3 from the journal: same times.
    again = _authority(lanes, journal=authority.journal)
    assert again.plan(3) == planned
    # One resumed from batch 3's times continues from them, lanes included.
    resumed = _authority(lanes)
    resumed.restore(planned, {"src": 100_000_000})
    assert resumed.plan(4).input_watermarks["approx"] >= planned.input_watermarks["approx"]


def test_times_of_a_run_without_lanes_resume_a_run_with_them():
    exact = _authority(plan_lanes(_graph(), {}))
    exact.report_source("src", 7)
    times = exact.plan(1)
    resumed = _authority(plan_lanes(_graph(), {"approx": 0.9}))
    resumed.restore(times, {"src": 7})
    later = resumed.plan(2)
    assert later.input_watermarks[lane_name("gbk", 0.9)] == 7
    assert later.output_watermarks[lane_name("gbk", 0.9)] >= MIN_MICROS


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    st.lists(
        st.lists(st.lists(st.integers(0, 10**9), min_size=1, max_size=6), min_size=1, max_size=4),
        min_size=1,
        max_size=6,
    ),
    st.sampled_from([0.5, 0.9, 0.99]),
)
def test_every_lane_is_monotonic_never_passes_its_input_and_never_lags_the_exact_lane(batches, p):
    lanes = plan_lanes(_graph(), {"approx": p})
    authority = _authority(lanes)
    previous = None
    for n, holds in enumerate(batches, start=1):
        authority.report_source("src", n * 10**8)
        _report_gbk(authority, holds)
        times = authority.plan(n)
        for stage in lanes.graph:
            assert times.output_watermarks[stage] <= times.input_watermarks[stage]
            if previous is not None:
                assert times.input_watermarks[stage] >= previous.input_watermarks[stage]
                assert times.output_watermarks[stage] >= previous.output_watermarks[stage]
        assert times.input_watermarks["approx"] >= times.input_watermarks["exact"]
        previous = times
