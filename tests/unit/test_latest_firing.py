"""An unbounded side input in the global window with a trigger is seen at its
latest firing (side_input_wait.LatestFiring inside WaitingForSides), without
Spark and without a harness."""

import pickle

from apache_beam.coders import coders
from apache_beam.transforms import trigger as T
from apache_beam.transforms import window as W
from apache_beam.utils.windowed_value import WindowedValue

from beam_spark_runner.streaming import rows as R
from beam_spark_runner.streaming.side_input_wait import LatestFiring, SideInputs, WaitingForSides
from triggers.driver import ReduceSpec
from windowing.timestamps import MIN_US

SIDE = "side"
S = 1_000_000  # micros
_IMPL = coders.WindowedValueCoder(coders.StrUtf8Coder(), coders.GlobalWindowCoder()).get_impl()


def _block(*values):
    return b"".join(_IMPL.encode_nested(WindowedValue(v, 0, (W.GlobalWindow(),))) for v in values)


def _values(block):
    from beam_spark_runner.worker.grouping import decode_elements

    return [wv.value for wv, _ in decode_elements(block, _IMPL)]


def _spec(mode, trigger=T.Repeatedly(T.AfterProcessingTime(1))):
    return ReduceSpec(W.GlobalWindows(), trigger, mode)


def test_each_firing_replaces_the_view_discarding_shows_what_came_since_the_last():
    firing = LatestFiring(_spec(T.AccumulationMode.DISCARDING), _IMPL, now_us=0)
    assert not firing.take(_block("m1"), MIN_US)
    assert not firing.advance(MIN_US, S // 2) and firing.pane is None
    assert firing.advance(MIN_US, S)  # 1 s after m1 arrived
    assert _values(firing.pane) == ["m1"]
    assert not firing.take(_block("m2", "m3"), MIN_US)
    assert _values(firing.pane) == ["m1"]  # until the next firing
    assert firing.advance(MIN_US, 2 * S + 1)
    assert _values(firing.pane) == ["m2", "m3"]


def test_accumulating_shows_everything_so_far_and_state_survives_a_pickle():
    spec = _spec(T.AccumulationMode.ACCUMULATING, T.Repeatedly(T.AfterCount(1)))
    firing = LatestFiring(spec, _IMPL, now_us=0)
    assert firing.take(_block("m1"), MIN_US) and _values(firing.pane) == ["m1"]
    restored = LatestFiring(spec, _IMPL, pickle.loads(pickle.dumps(firing.saved())))
    assert restored.take(_block("m2"), MIN_US) and _values(restored.pane) == ["m1", "m2"]


class _Sides:
    """SideInputs' interface: one triggered side input; main rows' payload is
    their name."""

    dests = frozenset([SIDE])
    expiry = {}
    triggered = {SIDE: (_spec(T.AccumulationMode.DISCARDING), _IMPL)}
    advance = staticmethod(SideInputs.advance)
    split_ready = staticmethod(SideInputs.split_ready)

    @staticmethod
    def pending(row, seq):
        return (row.dest, row.payload, seq, 0, {SIDE: W.GlobalWindow().max_timestamp().micros}, {})

    @staticmethod
    def state_entries(side):
        return [v for block in side.get(SIDE, []) for v in _values(block)]


class _Harness:
    def __init__(self):
        self.installed = []

    def install_side_inputs(self, entries):
        self.installed.append(entries)


def _row(dest, payload):
    return R.data(dest, payload, 0)


def _step(pt):
    return (MIN_US, pt, {SIDE: MIN_US})


def test_main_input_waits_for_the_first_firing_then_runs_with_the_latest_one():
    harness = _Harness()
    waiting = WaitingForSides(_Sides(), {}, harness)
    waiting.take([_row(SIDE, _block("m1"))], seq=0)
    waiting.take([_row("main", "a")], seq=1)
    assert waiting.ready_bundles({"main": 0}) == []  # the side input has not fired
    assert waiting.hold() == 0  # the waiting element holds the watermark
    # m1 came before any time step: it counts as arriving at the first
    # step's processing time, so the trigger fires 1 s after that.
    waiting.advance(_step(5 * S))
    assert waiting.ready_bundles({"main": 0}) == []
    waiting.advance(_step(6 * S))
    assert waiting.ready_bundles({"main": 0}) == [(1, [(0, "a")])]
    assert harness.installed[-1] == ["m1"]
    # Saved and restored between micro-batches: the view stays until the next firing.
    waiting = WaitingForSides(_Sides(), pickle.loads(pickle.dumps(waiting.saved())), harness)
    waiting.take([_row(SIDE, _block("m2"))], seq=2)
    waiting.take([_row("main", "b")], seq=3)
    assert waiting.ready_bundles({"main": 0}) == [(3, [(0, "b")])]
    assert harness.installed[-1] == ["m1"]
    waiting.advance(_step(7 * S + 1))
    waiting.take([_row("main", "c")], seq=4)
    assert waiting.ready_bundles({"main": 0}) == [(4, [(0, "c")])]
    assert harness.installed[-1] == ["m2"]
    assert not waiting.is_empty()


def test_main_input_runs_when_the_side_window_completes_without_a_firing():
    """A triggered side input that never fired (no elements) and whose
    watermark passed the end of the global window: the window is complete,
    so the waiting element runs, seeing it empty (a singleton view's
    default), instead of waiting for ever."""
    harness = _Harness()
    waiting = WaitingForSides(_Sides(), {}, harness)
    waiting.take([_row("main", "a")], seq=1)
    waiting.advance(_step(5 * S))
    assert waiting.ready_bundles({"main": 0}) == []
    end_of_time = W.GlobalWindow().max_timestamp().micros + 1
    waiting.advance((end_of_time, 6 * S, {SIDE: end_of_time}))
    assert waiting.ready_bundles({"main": 0}) == [(1, [(0, "a")])]
