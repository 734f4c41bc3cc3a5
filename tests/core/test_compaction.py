"""A window's buffer compacted by ReduceSpec(compact=...): what a lifted
combiner's GroupByKey uses to merge accumulators as they arrive."""

from apache_beam.transforms import trigger as T
from apache_beam.transforms import window as W
from apache_beam.transforms.window import IntervalWindow
from apache_beam.transforms.window import WindowFn
from apache_beam.utils.windowed_value import WindowedValue

from triggers import ReduceSpec

FIXED = W.FixedWindows(10)
SESSIONS = W.Sessions(10)
EARLY_EVERY_ELEMENT = T.AfterWatermark(early=T.AfterCount(1), late=T.AfterCount(1))


def _sum(values):
    return [sum(values)]


def _wv(value, t, fn=FIXED):
    return WindowedValue(value, t, fn.assign(WindowFn.AssignContext(t)))


def _panes(out):
    return [(int(o.windows[0].start), list(o.value), o.pane_info.timing) for o in out]


def _buffers(reducer):
    return {(int(st.window.start), int(st.window.end)): list(st.elements) for st in reducer.state.windows.values()}


def test_accumulating_panes_carry_one_compacted_value_not_every_element():
    plain = ReduceSpec(FIXED, EARLY_EVERY_ELEMENT, T.AccumulationMode.ACCUMULATING).new_reducer()
    compacted = ReduceSpec(
        FIXED, EARLY_EVERY_ELEMENT, T.AccumulationMode.ACCUMULATING, allowed_lateness=100, compact=_sum
    ).new_reducer()
    for i in range(1, 6):
        assert _panes(plain.process([_wv(i, 3)], 0)) == [(0, list(range(1, i + 1)), 0)]
        assert _panes(compacted.process([_wv(i, 3)], 0)) == [(0, [sum(range(1, i + 1))], 0)]
    assert _buffers(plain) == {(0, 10): [1, 2, 3, 4, 5]}
    assert _buffers(compacted) == {(0, 10): [15]}
    # The on-time pane and a late one: the same totals, one value each.
    assert _panes(compacted.advance_watermark(10)) == [(0, [15], 1)]
    assert _panes(compacted.process([_wv(100, 4)], 10)) == [(0, [115], 2)]


def test_triggers_still_count_every_element():
    red = ReduceSpec(FIXED, T.Repeatedly(T.AfterCount(3)), T.AccumulationMode.DISCARDING, compact=_sum).new_reducer()
    assert red.process([_wv(1, 1), _wv(2, 2)], 0) == []
    assert _buffers(red) == {(0, 10): [3]}
    assert _panes(red.process([_wv(4, 3)], 0)) == [(0, [7], 0)]
    assert _buffers(red) == {(0, 10): []}  # discarding: nothing kept


def test_merging_windows_compact_their_buffers():
    red = ReduceSpec(SESSIONS, T.AfterWatermark(), T.AccumulationMode.DISCARDING, compact=_sum).new_reducer()
    red.process([_wv(1, 1, SESSIONS)], 0)
    red.process([_wv(20, 20, SESSIONS)], 0)
    assert _buffers(red) == {(1, 11): [1], (20, 30): [20]}
    red.process([_wv(8, 8, SESSIONS), _wv(15, 15, SESSIONS)], 0)  # bridges both sessions
    assert _buffers(red) == {(1, 30): [44]}
    assert _panes(red.advance_watermark(100)) == [(1, [44], 1)]
    assert {st.window for st in red.state.windows.values()} <= {IntervalWindow(1, 30)}


def test_a_compacted_reducer_snapshots_and_restores():
    spec = ReduceSpec(FIXED, EARLY_EVERY_ELEMENT, T.AccumulationMode.ACCUMULATING, compact=_sum)
    red = spec.new_reducer()
    red.process([_wv(2, 1), _wv(3, 2)], 0)
    restored = spec.restore(red.snapshot())
    assert _panes(restored.process([_wv(5, 3)], 0)) == [(0, [10], 0)]
