"""Side windows of a streaming side-input stage expire (side_input_wait.WaitingForSides
with collect=True), without Spark and without a harness: the side input's
rows, windows and main elements are stand-ins whose window ends are given."""
from beam_spark_runner.streaming import side_input_wait
from beam_spark_runner.streaming.side_input_wait import SideInputs, WaitingForSides

SIDE = "side"


class _Sides:
    """SideInputs' interface over stand-in rows: a side row's payload is its
    window end; a main row's payload is (earliest, latest) side window end."""
    dests = frozenset([SIDE])
    expiry = {SIDE: 5}                       # the main input's allowed lateness
    advance = staticmethod(SideInputs.advance)
    split_ready = staticmethod(SideInputs.split_ready)

    @staticmethod
    def window_end(dest, row):
        return row

    @staticmethod
    def pending(row, seq):
        earliest, latest = row[4]
        return (row[1], row[4], seq, earliest, {SIDE: latest}, {SIDE: earliest})

    @staticmethod
    def state_entries(side):
        return sorted(end for rows in side.values() for end in rows)


class _Harness:
    def __init__(self):
        self.installed = []

    def install_side_inputs(self, entries):
        self.installed.append(entries)


def _side_row(end):
    return ("data", SIDE, 0, None, end, 0, 1)


def _main_row(earliest, latest):
    return ("data", "main", 0, None, (earliest, latest), 0, 1)


def _step(wm, side_wm):
    return (wm, 0, {SIDE: side_wm})


def test_side_windows_go_once_the_watermark_passes_them_plus_lateness_unless_an_element_waits_for_them():
    harness = _Harness()
    waiting = WaitingForSides(_Sides(), {}, harness, collect=True)
    waiting.take([_side_row(10), _side_row(20), _side_row(40)], seq=0)
    waiting.take([_main_row(10, 20)], seq=0)       # sliding windows: needs sides ending at 10 and 20
    waiting.advance(_step(40, side_wm=15))         # 40 - 5 lateness = 35, but the element needs 10
    assert [end for end, _ in waiting.side[SIDE]] == [10, 20, 40]
    assert waiting.ready_bundles({"main": 0}) == []     # still waits: side watermark 15 < 20
    waiting.advance(_step(40, side_wm=25))
    assert waiting.ready_bundles({"main": 0}) == [(0, [(0, (10, 20))])]
    assert harness.installed[-1] == [10, 20, 40]   # the element ran with every window it needs
    waiting.advance(_step(40, side_wm=25))         # nothing waits now: windows ending before 35 go
    assert [end for end, _ in waiting.side[SIDE]] == [40]
    assert waiting.saved()["side_collected"] == {SIDE: 35}


def test_an_element_needing_an_expired_side_window_is_dropped_and_counted():
    waiting = WaitingForSides(_Sides(), {}, _Harness(), collect=True)
    waiting.take([_side_row(10), _side_row(30)], seq=0)
    waiting.advance(_step(20, side_wm=50))         # the side window ending at 10 goes (before 15)
    waiting.take([_main_row(10, 30), _main_row(30, 30)], seq=1)
    assert waiting.ready_bundles({"main": 0}) == [(1, [(0, (30, 30))])]
    assert waiting.dropped == 1


def test_without_collect_and_for_state_saved_before_expiry_side_rows_stay():
    """Stateful and splittable stages keep their side data (timers and
    residuals read it later); rows saved without a window end never expire."""
    waiting = WaitingForSides(_Sides(), {}, _Harness(), collect=False)
    waiting.take([_side_row(10)], seq=0)
    waiting.advance(_step(1000, side_wm=1000))
    assert [end for end, _ in waiting.side[SIDE]] == [None]
    restored = WaitingForSides(_Sides(), {"side": {SIDE: [b"old row"]}}, _Harness(), collect=True)
    restored.advance(_step(1000, side_wm=1000))
    assert restored.side[SIDE] == [(None, b"old row")]


def test_only_beams_default_window_mapping_lets_side_windows_expire():
    from apache_beam.transforms import sideinputs, window
    assert side_input_wait._maps_via_end(sideinputs.default_window_mapping_fn(window.FixedWindows(10)))
    assert not side_input_wait._maps_via_end(sideinputs.default_window_mapping_fn(window.GlobalWindows()))
    assert not side_input_wait._maps_via_end(lambda w: w)
