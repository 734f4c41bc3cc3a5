"""triggers.closing: which panes a window emits, and its state across the
closing (the transcripts in tests/core/data/closing.yaml drive whole cases)."""

import pytest
from apache_beam.portability.api import beam_runner_api_pb2 as pb
from apache_beam.transforms import trigger as T
from apache_beam.transforms import window as W
from apache_beam.utils.windowed_value import PaneInfoTiming
from apache_beam.utils.windowed_value import WindowedValue

from triggers import ReduceSpec
from triggers.closing import EMIT_ALWAYS, EMIT_IF_NONEMPTY, FIRE_ALWAYS, FIRE_IF_NONEMPTY
from triggers.closing import ClosingRules, UnspecifiedBehavior
from triggers.state import KeyState
from triggers.state import WindowState

EARLY, ON_TIME, LATE = PaneInfoTiming.EARLY, PaneInfoTiming.ON_TIME, PaneInfoTiming.LATE


@pytest.mark.parametrize(
    'closing,on_time,is_empty,is_final,timing,emitted',
    [
        # A pane with new data is always emitted.
        (EMIT_IF_NONEMPTY, FIRE_IF_NONEMPTY, False, False, EARLY, True),
        (EMIT_IF_NONEMPTY, FIRE_IF_NONEMPTY, False, True, LATE, True),
        # An empty ON_TIME pane: only under FIRE_ALWAYS, final or not.
        (EMIT_IF_NONEMPTY, FIRE_ALWAYS, True, False, ON_TIME, True),
        (EMIT_IF_NONEMPTY, FIRE_IF_NONEMPTY, True, False, ON_TIME, False),
        (EMIT_IF_NONEMPTY, FIRE_ALWAYS, True, True, ON_TIME, True),
        # An empty final pane: under EMIT_ALWAYS, whatever its timing.
        (EMIT_ALWAYS, FIRE_IF_NONEMPTY, True, True, LATE, True),
        (EMIT_ALWAYS, FIRE_IF_NONEMPTY, True, True, ON_TIME, True),
        (EMIT_IF_NONEMPTY, FIRE_ALWAYS, True, True, LATE, False),
        # Empty EARLY and LATE panes that are not final: never.
        (EMIT_ALWAYS, FIRE_ALWAYS, True, False, EARLY, False),
        (EMIT_ALWAYS, FIRE_ALWAYS, True, False, LATE, False),
    ],
)
def test_should_emit_follows_beams_need_to_emit(closing, on_time, is_empty, is_final, timing, emitted):
    assert ClosingRules(closing, on_time).should_emit(is_empty, is_final, timing) is emitted


def test_unspecified_behaviours_are_refused_naming_the_field():
    strategy = pb.WindowingStrategy(on_time_behavior=FIRE_ALWAYS)
    with pytest.raises(UnspecifiedBehavior, match='closing_behavior'):
        ClosingRules.from_proto(strategy)
    strategy = pb.WindowingStrategy(closing_behavior=EMIT_ALWAYS)
    with pytest.raises(UnspecifiedBehavior, match='on_time_behavior'):
        ClosingRules.from_proto(strategy)


def test_python_sdk_writes_emit_always_and_fire_always():
    from apache_beam.runners import pipeline_context
    from apache_beam.transforms.core import Windowing

    proto = Windowing(W.FixedWindows(10)).to_runner_api(pipeline_context.PipelineContext())
    assert ClosingRules.from_proto(proto) == ClosingRules(EMIT_ALWAYS, FIRE_ALWAYS)


def _wv(t):
    return WindowedValue(t, t, (W.IntervalWindow(0, 10),))


def test_suppressed_pane_leaves_the_pane_counters_alone():
    """An empty ON_TIME pane under FIRE_IF_NONEMPTY is not counted: the pane
    after it has index 1 and non-speculative index 0 (Beam Java's
    PaneInfoTracker stores only emitted panes)."""
    spec = ReduceSpec(
        W.FixedWindows(10),
        T.AfterWatermark(early=T.AfterCount(1), late=T.AfterCount(1)),
        2,
        allowed_lateness=100,
        closing=ClosingRules(EMIT_ALWAYS, FIRE_IF_NONEMPTY),
    )
    r = spec.new_reducer()
    (early,) = r.process([_wv(1)], 0)
    assert (early.pane_info.index, early.pane_info.timing) == (0, EARLY)
    assert r.advance_watermark(20) == []  # nothing new since the early pane
    (late,) = r.process([_wv(2)], 20)
    assert (late.value, late.pane_info.timing, late.pane_info.index, late.pane_info.nonspeculative_index) == (
        [1, 2],
        LATE,
        1,
        0,
    )


def test_window_state_of_an_earlier_release_restores_fresh_from_its_buffer():
    st = WindowState(W.IntervalWindow(0, 10))
    st.elements = [1]
    old = st.snapshot()[:9]
    assert WindowState.restore(old).fresh is True
    st.elements = []
    assert WindowState.restore(st.snapshot()[:9]).fresh is False
    st.fresh = True
    assert WindowState.restore(st.snapshot()).fresh is True


def test_reducer_wakes_when_the_watermark_passes_a_window_end_before_its_expiry():
    """With allowed lateness the final pane's timing depends on whether the
    advance that closes the window also passed its end; a runner that only
    restores a key's reducer when it has something to do must wake it then."""
    spec = ReduceSpec(W.FixedWindows(10), T.Repeatedly(T.AfterProcessingTime(5)), 1, allowed_lateness=20)
    r = spec.new_reducer()
    r.process([_wv(1)], 0)
    wm, _ = r.next_wake_up_us()
    assert wm == 10 * 10**6  # the end of [0, 10), not its GC time
    r.advance_watermark(15)
    wm, _ = r.next_wake_up_us()
    assert wm == 30 * 10**6  # now its GC time + 1 us
    (final,) = r.advance_watermark(31)
    assert final.pane_info.timing == LATE and final.pane_info.is_last


def test_a_window_closes_with_its_timers():
    spec = ReduceSpec(W.FixedWindows(10), T.Repeatedly(T.AfterProcessingTime(5)), 1)
    r = spec.new_reducer()
    r.process([_wv(1)], 0)
    assert r.state.timers
    (final,) = r.advance_watermark(50)
    assert final.pane_info.is_last and final.pane_info.timing == ON_TIME
    assert isinstance(r.state, KeyState) and r.state.is_empty()
    assert r.advance_processing_time(100) == []


def test_elements_of_expired_windows_are_dropped_and_counted_per_window():
    """As Beam's droppedDueToLateness: each (element, expired window) once."""
    spec = ReduceSpec(W.SlidingWindows(10, 5), T.AfterWatermark(), 1, allowed_lateness=0)
    reducer = spec.new_reducer()
    reducer.advance_watermark(30)
    # t=12 is in [5, 15) and [10, 20), both expired at 30; t=28 in live windows.
    late = WindowedValue("x", 12, (W.IntervalWindow(5, 15), W.IntervalWindow(10, 20)))
    assert reducer.process([late, late], 30) == [] and reducer.dropped_late == 4
    reducer.process([WindowedValue("y", 28, (W.IntervalWindow(25, 35),))], 30)
    assert reducer.dropped_late == 4
    assert spec.restore(reducer.snapshot()).dropped_late == 0  # a count per reducer object


def test_elements_behind_the_watermark_within_allowed_lateness_are_counted_late_and_kept():
    """MillWheel's late records: each (element, window) whose window the
    input watermark had passed when it arrived, not yet expired: it fires
    a LATE pane; expired ones are dropped and counted apart."""
    spec = ReduceSpec(W.SlidingWindows(10, 5), T.AfterWatermark(late=T.AfterCount(1)), 1, allowed_lateness=10)
    reducer = spec.new_reducer()
    on_time = WindowedValue("a", 12, (W.IntervalWindow(5, 15), W.IntervalWindow(10, 20)))
    assert reducer.process([on_time], 0) == [] and reducer.late == 0
    reducer.advance_watermark(17)  # [5, 15) ended at 17, [10, 20) is still open
    late = WindowedValue("b", 13, (W.IntervalWindow(5, 15), W.IntervalWindow(10, 20)))
    (pane,) = reducer.process([late, late], 17)
    assert pane.windows == (W.IntervalWindow(5, 15),) and pane.pane_info.timing == LATE
    assert reducer.late == 2 and reducer.dropped_late == 0  # [5, 15) twice; [10, 20) on time
    reducer.advance_watermark(26)  # [5, 15) expired (end + 10 s), [10, 20) late
    reducer.process([late], 26)
    assert (reducer.late, reducer.dropped_late) == (3, 1)
    assert spec.restore(reducer.snapshot()).late == 0  # a count per reducer object
