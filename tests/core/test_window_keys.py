"""window_keys: int keys equal exactly when Beam's windows are equal."""

from apache_beam.coders.coders import IntervalWindowCoder
from apache_beam.transforms.window import BoundedWindow
from apache_beam.transforms.window import GlobalWindow
from apache_beam.transforms.window import IntervalWindow
from apache_beam.utils.timestamp import MAX_TIMESTAMP
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.timestamp import Timestamp

from windowing.window_keys import window_bounds_us
from windowing.window_keys import window_key
from windowing.window_keys import window_of_key


class _TaggedWindow(BoundedWindow):
    """A custom window type: keyed by itself."""

    def __init__(self, end, tag):
        super().__init__(end)
        self.tag = tag

    def __eq__(self, other):
        return type(other) is _TaggedWindow and (self.end, self.tag) == (other.end, other.tag)

    def __hash__(self):
        return hash((self.end, self.tag))


def test_interval_windows_key_by_their_micros_and_round_trip():
    w = IntervalWindow(Timestamp(micros=1_500_000), 10)
    assert window_key(w) == (1_500_000, 10_000_000)
    decoded = IntervalWindowCoder().decode(IntervalWindowCoder().encode(w))
    assert window_key(decoded) == window_key(w)
    back = window_of_key(window_key(w))
    assert back == w and type(back) is IntervalWindow
    assert window_of_key(window_key(w)) is back  # interned
    assert window_bounds_us(w, window_key(w)) == (10_000_000, w.max_timestamp().micros)


def test_bounds_beyond_the_timestamp_range_clamp_as_window_equality_does():
    beyond = IntervalWindow(MIN_TIMESTAMP - 1, MAX_TIMESTAMP + 1)
    at_limits = IntervalWindow(MIN_TIMESTAMP, MAX_TIMESTAMP)
    assert beyond == at_limits
    assert window_key(beyond) == window_key(at_limits)


def test_global_and_custom_windows():
    g = GlobalWindow()
    assert window_key(g) is None and window_of_key(None) == g
    assert window_bounds_us(g, None) == (g.end.micros, g.max_timestamp().micros)
    a, b = _TaggedWindow(5, "a"), _TaggedWindow(5, "b")
    assert window_key(a) is a and window_of_key(a) is a
    assert window_key(a) != window_key(b)
    assert window_bounds_us(a, a) == (5_000_000, 4_999_999)
    # Different window types never share a key.
    assert len({window_key(IntervalWindow(0, 5)), window_key(a), window_key(g)}) == 3
