"""A stateful DoFn's window expiry (streaming/window_expiry.py) without
Spark: which user state entries and timers go at a watermark."""

import collections

from apache_beam.coders import coders
from apache_beam.portability.api import beam_fn_api_pb2
from apache_beam.transforms.window import IntervalWindow
from apache_beam.utils.windowed_value import WindowedValue

from beam_spark_runner.streaming.window_expiry import WindowExpiry

S = 1_000_000  # micros per second
CODER = coders.IntervalWindowCoder()


def _expiry(lateness_s):
    expiry = WindowExpiry.__new__(WindowExpiry)
    expiry.enabled, expiry._window_coder = True, CODER
    expiry._lateness_us, expiry._decoded = lateness_s * S, {}
    return expiry


def _bag_key(window):
    return beam_fn_api_pb2.StateKey(
        bag_user_state=beam_fn_api_pb2.StateKey.BagUserState(
            transform_id="t", user_state_id="bag", window=CODER.encode(window), key=b"k"
        )
    )


class _Harness:
    def __init__(self, keys):
        self.keys = list(keys)

    def drop_user_state(self, is_dropped):
        self.keys = [k for k in self.keys if not is_dropped(k)]


class _Timers:
    def __init__(self, timers):
        self.timers = list(timers)

    def drop(self, is_dropped):
        self.timers = [t for t in self.timers if not is_dropped(t)]


Timer = collections.namedtuple("Timer", "windows")


def test_state_and_timers_of_windows_past_end_plus_lateness_go():
    first, second = IntervalWindow(0, 10), IntervalWindow(10, 20)
    side = beam_fn_api_pb2.StateKey(
        iterable_side_input=beam_fn_api_pb2.StateKey.IterableSideInput(
            transform_id="t", side_input_id="s", window=CODER.encode(first)
        )
    )
    harness = _Harness([_bag_key(first), _bag_key(second), side])
    timers = _Timers([Timer([first]), Timer([second]), Timer([first, second])])
    expiry = _expiry(lateness_s=5)
    expiry.collect(harness, timers, wm=15 * S - 1)  # = [0, 10)'s max timestamp + 5 s
    assert harness.keys == [_bag_key(first), _bag_key(second), side]
    expiry.collect(harness, timers, wm=15 * S)
    assert harness.keys == [_bag_key(second), side]  # side inputs are not user state
    assert timers.timers == [Timer([second]), Timer([first, second])]


def test_late_input_keeps_only_its_live_windows():
    first, second = IntervalWindow(0, 10), IntervalWindow(5, 15)
    expiry = _expiry(lateness_s=0)
    wv = WindowedValue(("k", 1), 7, [first, second])
    assert expiry.live(wv, wm=10 * S - 1) is wv
    assert expiry.live(wv, wm=10 * S).windows == [second]
    assert expiry.live(wv, wm=15 * S) is None
