"""The driver-side watermark authority (MillWheel low watermarks with holds)."""

import pytest

from beam_spark_runner.streaming.watermarks import (
    MAX_MICROS,
    MIN_MICROS,
    BatchTimes,
    StageInputs,
    WatermarkAuthority,
    chain,
)


class FakeClock:
    def __init__(self, now=0):
        self.now = now

    def __call__(self):
        return self.now


def test_watermarks_flow_down_a_chain_and_are_held_by_buffered_state():
    clock = FakeClock(1_000)
    wm = WatermarkAuthority(chain(["gbk1", "gbk2", "gbk3"], "src"), clock)
    assert wm.plan(0).input_watermarks == {"gbk1": MIN_MICROS, "gbk2": MIN_MICROS, "gbk3": MIN_MICROS}
    wm.report_source("src", 100)
    wm.report_holds("gbk1", {0: 40, 1: 70})  # EARLIEST combiner: pane may be stamped 40
    times = wm.plan(1)
    assert times.input_watermarks["gbk1"] == 100
    # gbk1 may still emit what reaches it in batch 1, stamped at or after its
    # previous input watermark: downstream waits one batch.
    assert times.input_watermarks["gbk2"] == MIN_MICROS
    times = wm.plan(2)
    assert times.output_watermarks["gbk1"] == 40
    # The bug class of beam#23129: with one pipeline-wide watermark gbk2 would
    # see 100 and drop gbk1's pane stamped 40 as late. Here it sees 40.
    assert times.input_watermarks["gbk2"] == 40
    assert times.input_watermarks["gbk3"] == MIN_MICROS
    # Each further stateful stage adds one batch of lag, no more.
    assert wm.plan(3).input_watermarks["gbk3"] == 40
    wm.report_holds("gbk1", {0: None, 1: None})
    assert [wm.plan(b).input_watermarks["gbk3"] for b in (4, 5, 6)] == [40, 100, 100]


def test_holds_release_when_key_groups_report_nothing_held():
    wm = WatermarkAuthority(chain(["a", "b"], "src"), FakeClock())
    wm.report_source("src", 500)
    wm.report_holds("a", {3: 200})
    assert wm.plan(0).input_watermarks["b"] == MIN_MICROS
    assert wm.plan(1).input_watermarks["b"] == 200
    wm.report_holds("a", {3: None})
    assert wm.plan(2).input_watermarks["b"] == 500


def test_watermarks_never_go_back():
    wm = WatermarkAuthority(chain(["a"], "src"), FakeClock())
    wm.report_source("src", 500)
    wm.plan(0)
    assert wm.plan(1).output_watermarks["a"] == 500
    wm.report_source("src", 100)  # a late, smaller estimate
    wm.report_holds("a", {0: 50})  # a hold below what was already emitted
    times = wm.plan(2)
    assert times.input_watermarks["a"] == 500
    assert times.output_watermarks["a"] == 500


def test_min_over_several_inputs():
    graph = {
        "left": StageInputs(sources=("s1",)),
        "right": StageInputs(sources=("s2",)),
        "join": StageInputs(stages=("left", "right")),
    }
    wm = WatermarkAuthority(graph, FakeClock())
    wm.report_source("s1", 300)
    wm.report_source("s2", 100)
    wm.plan(0)
    assert wm.plan(1).input_watermarks["join"] == 100


def test_replayed_batch_gets_its_journaled_times():
    clock = FakeClock(10)
    wm = WatermarkAuthority(chain(["a"], "src"), clock)
    wm.report_source("src", 100)
    first = wm.plan(7)
    # A restarted driver with the journal replays batch 7 after time moved on.
    clock.now = 99_999
    restarted = WatermarkAuthority(chain(["a"], "src"), clock, journal=dict(wm.journal))
    restarted.report_source("src", 900)
    assert restarted.plan(7) == first
    assert BatchTimes.from_json(wm.journal[7]) == first


def test_processing_time_is_monotonic_and_from_the_injected_clock():
    clock = FakeClock(50)
    wm = WatermarkAuthority(chain(["a"], "src"), clock)
    assert wm.plan(0).processing_time == 50
    clock.now = 20  # a clock that jumps back
    assert wm.plan(1).processing_time == 50
    clock.now = 70
    assert wm.plan(2).processing_time == 70
    assert wm.lag_micros("a") == 70 - MIN_MICROS


def test_finishes_when_sources_reach_infinity_and_nothing_is_held():
    wm = WatermarkAuthority(chain(["a", "b"], "src"), FakeClock())
    wm.report_source("src", MAX_MICROS)
    wm.report_holds("a", {0: 5})
    wm.plan(0)
    assert not wm.finished()
    wm.report_holds("a", {0: None})
    wm.plan(1)
    assert not wm.finished()  # b learns of a's release one batch later
    wm.plan(2)
    assert wm.finished()


def test_graph_must_be_topologically_ordered():
    with pytest.raises(ValueError, match="not listed before"):
        WatermarkAuthority({"b": StageInputs(stages=("a",)), "a": StageInputs(sources=("s",))}, FakeClock())


def test_a_same_batch_stage_passes_its_new_input_watermark_on_in_the_same_batch():
    wm = WatermarkAuthority(chain(["gbk1", "gbk2", "stateful"], "src"), FakeClock(), same_batch={"gbk1", "gbk2"})
    wm.plan(0)
    wm.report_source("src", 100)
    wm.report_holds("gbk1", {0: 100})  # a window ending at 100, still open
    times = wm.plan(1)
    assert times.input_watermarks == {"gbk1": 100, "gbk2": 100, "stateful": 100}
    assert times.output_watermarks == {"gbk1": 100, "gbk2": 100, "stateful": MIN_MICROS}
    # While the batch's data is still arriving they are held as any stage.
    assert times.held_output_watermarks == {"gbk1": MIN_MICROS, "gbk2": MIN_MICROS, "stateful": MIN_MICROS}
    # The window ending at 100 fires in batch 2's step, when the watermark passes it.
    wm.report_source("src", 250)
    times = wm.plan(2)
    assert times.input_watermarks == {"gbk1": 250, "gbk2": 250, "stateful": 250}
    assert times.output_watermarks == {"gbk1": 250, "gbk2": 250, "stateful": 100}
    assert times.held_output_watermarks == {"gbk1": 100, "gbk2": 100, "stateful": 100}


def test_without_same_batch_stages_each_stage_adds_one_batch_of_lag():
    wm = WatermarkAuthority(chain(["gbk1", "gbk2"], "src"), FakeClock())
    wm.report_source("src", 100)
    assert [wm.plan(b).input_watermarks["gbk2"] for b in (0, 1, 2)] == [MIN_MICROS, 100, 100]
    assert wm.plan(3).held_output_watermarks == wm.plan(3).output_watermarks


def test_a_same_batch_stage_holding_something_behind_its_input_watermark_is_held():
    wm = WatermarkAuthority(chain(["gbk1", "gbk2"], "src"), FakeClock(), same_batch={"gbk1"})
    wm.report_source("src", 100)
    wm.plan(0)
    wm.report_holds("gbk1", {0: 40})  # behind its input watermark 100: not what a same-batch stage does
    wm.report_source("src", 300)
    times = wm.plan(1)
    # Not advanced to 300 (and, as every watermark, never moved back).
    assert times.output_watermarks["gbk1"] == 100 and times.input_watermarks["gbk2"] == 100
    wm.report_holds("gbk1", {0: None})
    assert wm.plan(2).input_watermarks["gbk2"] == 300


def test_same_batch_times_survive_the_journal_and_older_entries_read_as_held():
    wm = WatermarkAuthority(chain(["gbk1", "gbk2"], "src"), FakeClock(), same_batch={"gbk1"})
    wm.plan(0)
    wm.report_source("src", 100)
    first = wm.plan(1)
    restarted = WatermarkAuthority(chain(["gbk1", "gbk2"], "src"), FakeClock(), journal=dict(wm.journal))
    assert restarted.plan(1) == first
    assert restarted.plan(1).held_output_watermarks != first.output_watermarks
    # Times journaled before held outputs existed: held at their output watermarks.
    old = '{"batch_id": 3, "input_watermarks": {"a": 5}, "output_watermarks": {"a": 4}, "processing_time": 1}'
    assert BatchTimes.from_json(old).held_output_watermarks == {"a": 4}
