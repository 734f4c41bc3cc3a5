"""Merging edge cases, GC and snapshot/restore of the reduce driver."""

import pickle

from apache_beam.transforms import trigger as T
from apache_beam.transforms import window as W
from apache_beam.transforms.window import IntervalWindow
from apache_beam.transforms.window import WindowFn
from apache_beam.utils.windowed_value import WindowedValue

from tests.core.windowfns import BucketMerging
from triggers import ReduceSpec
from windowing import compute_merges
from windowing import gc_time
from windowing import is_expired
from windowing.window_keys import window_key

SESSIONS = W.Sessions(10)


def _windows(reducer):
    """The Beam windows the reducer holds state for."""
    return {st.window for st in reducer.state.windows.values()}


def _wv(t, fn=SESSIONS):
    return WindowedValue(t, t, fn.assign(WindowFn.AssignContext(t)))


def _panes(out):
    return [
        (int(o.windows[0].start), int(o.windows[0].end), sorted(o.value), o.pane_info.timing, o.pane_info.index)
        for o in out
    ]


def test_compute_merges_reports_sessions_merges():
    ws = [IntervalWindow(1, 11), IntervalWindow(5, 15), IntervalWindow(30, 40)]
    (m,) = compute_merges(SESSIONS, ws)
    assert m.result == IntervalWindow(1, 15) and set(m.merged) == set(ws[:2])


def test_late_element_bridging_two_sessions():
    red = ReduceSpec(
        SESSIONS, T.AfterWatermark(late=T.AfterCount(1)), T.AccumulationMode.ACCUMULATING, allowed_lateness=100
    ).new_reducer()
    red.process([_wv(1), _wv(25)], 0)
    out = red.advance_watermark(50)
    assert _panes(out) == [(1, 11, [1], 1, 0), (25, 35, [25], 1, 0)]
    # Late elements (watermark 50) still merge within allowed lateness.
    out = red.process([_wv(12)], 50)  # [12, 22) overlaps nothing yet
    assert _panes(out) == [(12, 22, [12], 2, 0)]
    out = red.process([_wv(20)], 50)  # [20, 30) bridges [12, 22) and [25, 35)
    assert _panes(out) == [(12, 35, [12, 20, 25], 2, 0)]
    assert _windows(red) == {IntervalWindow(1, 11), IntervalWindow(12, 35)}


def test_merge_after_a_fire_resets_pane_index_and_keeps_elements():
    red = ReduceSpec(SESSIONS, T.Repeatedly(T.AfterCount(1)), T.AccumulationMode.ACCUMULATING).new_reducer()
    assert _panes(red.process([_wv(1)], 0)) == [(1, 11, [1], 0, 0)]
    assert _panes(red.process([_wv(1)], 0)) == [(1, 11, [1, 1], 0, 1)]
    # Window [5, 15) merges with [1, 11) into a new window: index restarts.
    assert _panes(red.process([_wv(5)], 0)) == [(1, 15, [1, 1, 5], 0, 0)]


def test_merge_into_existing_window_keeps_its_pane_index():
    red = ReduceSpec(SESSIONS, T.Repeatedly(T.AfterCount(1)), T.AccumulationMode.ACCUMULATING).new_reducer()
    red.process([_wv(1)], 0)
    red.process([_wv(5)], 0)  # [1, 15), index 0
    out = red.process([_wv(3)], 0)  # [3, 13) inside [1, 15): same window
    assert _panes(out) == [(1, 15, [1, 3, 5], 0, 1)]


def test_gc_of_merged_windows():
    red = ReduceSpec(SESSIONS, T.DefaultTrigger(), T.AccumulationMode.DISCARDING, allowed_lateness=5).new_reducer()
    red.process([_wv(1), _wv(8), _wv(40)], 0)
    merged = IntervalWindow(1, 18)
    assert merged in _windows(red)
    red.advance_watermark(gc_time(merged, 5))
    assert merged in _windows(red)  # still accepts late data
    red.advance_watermark(gc_time(merged, 5) + 0.000001)
    assert merged not in _windows(red) and window_key(merged) not in red.state.timers
    assert IntervalWindow(40, 50) in _windows(red)
    assert is_expired(merged, 5, 23) and not is_expired(merged, 5, 22)
    # A late element for the collected window is dropped.
    assert red.process([_wv(2)], 23) == [] and red.advance_watermark(30) == []


def test_finished_window_drops_elements_until_gc():
    red = ReduceSpec(W.FixedWindows(10), T.AfterCount(1), T.AccumulationMode.DISCARDING).new_reducer()
    fn = W.FixedWindows(10)
    assert len(red.process([_wv(1, fn)], 0)) == 1
    assert red.process([_wv(2, fn)], 0) == []
    assert red.state.windows[window_key(IntervalWindow(0, 10))].finished


def test_custom_merging_window_fn():
    fn = BucketMerging()
    red = ReduceSpec(fn, T.DefaultTrigger(), T.AccumulationMode.DISCARDING).new_reducer()
    red.process([_wv(1, fn), _wv(7, fn), _wv(12, fn)], 0)
    out = red.advance_watermark(100)
    assert _panes(out) == [(0, 8, [1, 7], 1, 0), (10, 13, [12], 1, 0)]


def test_snapshot_restore_round_trip_mid_stream():
    spec = ReduceSpec(
        SESSIONS,
        T.AfterWatermark(early=T.AfterCount(2)),
        T.AccumulationMode.ACCUMULATING,
        W.TimestampCombiner.OUTPUT_AT_EARLIEST,
    )
    a = spec.new_reducer()
    a.process([_wv(1), _wv(3)], 0)
    a.process([_wv(30)], 0)
    snap = pickle.loads(pickle.dumps(a.snapshot()))
    b = spec.restore(snap)
    assert b.snapshot() == a.snapshot()
    ra = a.process([_wv(5), _wv(31)], 0) + a.advance_watermark(100)
    rb = b.process([_wv(5), _wv(31)], 0) + b.advance_watermark(100)
    assert ra == rb and len(ra) == 3


def test_session_fast_path_equals_beams_sessions_merge():
    import random
    from windowing.merging import _Collect

    rnd = random.Random(5)
    for _ in range(200):
        ws = list(
            {IntervalWindow(s, s + rnd.randint(1, 9)) for s in (rnd.randint(0, 60) for _ in range(rnd.randint(1, 12)))}
        )
        for gap in (3, 10):
            fn = W.Sessions(gap)
            ctx = _Collect(ws)
            fn.merge(ctx)
            beam = [(sorted(m.merged, key=lambda w: w.start), m.result) for m in ctx.merges]
            ours = [(sorted(m.merged, key=lambda w: w.start), m.result) for m in compute_merges(fn, ws)]
            assert ours == beam
