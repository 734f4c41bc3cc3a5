"""Window assignment for every WindowFn the Python SDK can produce.

Guarantee: ``assign_windows(fn, value, timestamp, windows)`` returns exactly the
windows ``fn.assign(WindowFn.AssignContext(timestamp, value, window))`` returns
for each of the element's current windows (deduplicated, in first-seen order).
Fixed, sliding and global windows take arithmetic fast paths that produce
equal ``IntervalWindow``/``GlobalWindow`` objects without building an
``AssignContext`` per element.
"""

from apache_beam.transforms import window as beam_window
from apache_beam.transforms.window import GlobalWindow
from apache_beam.transforms.window import IntervalWindow
from apache_beam.transforms.window import WindowFn
from apache_beam.utils.timestamp import Timestamp

_GLOBAL = (GlobalWindow(),)


def is_merging(window_fn):
    """True if ``window_fn`` may merge windows (sessions, custom merging fns)."""
    return window_fn.is_merging()


def _fixed(fn, ts):
    # Same arithmetic as FixedWindows.assign, kept in integer micros.
    size = fn.size.micros
    offset = fn.offset.micros
    t = ts.micros
    start = t - (t - offset) % size
    return [IntervalWindow(Timestamp(micros=start), Timestamp(micros=start + size))]


def _sliding(fn, ts):
    size = fn.size.micros
    period = fn.period.micros
    offset = fn.offset.micros
    t = ts.micros
    start = t - ((t - offset) % period)
    out = []
    s = start
    while s > t - size:
        out.append(IntervalWindow(Timestamp(micros=s), Timestamp(micros=s + size)))
        s -= period
    return out


def window_assigner(window_fn):
    """Returns ``f(value, timestamp, current_window) -> list of windows``.

    Exact subclasses of the standard fns use the fast paths; subclasses (which
    may override ``assign``) always go through Beam's public ``assign``.
    """
    t = type(window_fn)
    if t is beam_window.GlobalWindows:
        return lambda value, ts, window: _GLOBAL
    if t is beam_window.FixedWindows:
        return lambda value, ts, window: _fixed(window_fn, ts)
    if t is beam_window.SlidingWindows:
        return lambda value, ts, window: _sliding(window_fn, ts)

    def generic(value, ts, window):
        return window_fn.assign(WindowFn.AssignContext(ts, value, window))

    return generic


def assign_windows(window_fn, value, timestamp, windows=_GLOBAL):
    """Windows ``value`` at ``timestamp`` belongs to under ``window_fn``."""
    assign = window_assigner(window_fn)
    ts = Timestamp.of(timestamp)
    out = []
    for w in windows:
        for nw in assign(value, ts, w):
            if nw not in out:
                out.append(nw)
    return out
