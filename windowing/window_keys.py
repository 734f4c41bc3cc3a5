"""Cheap dictionary keys for Beam windows.

The reduce driver keeps per-key state in dicts indexed by window and touches
them a dozen times per key and micro-batch. In Beam 2.77 hashing an
``IntervalWindow`` reads ``MIN_TIMESTAMP.micros`` and ``MAX_TIMESTAMP.micros``
(Python properties) and reading ``window.end`` on a decoded window builds a
``Timestamp``: about 0.5 us per hash, a large share of a key's cost.
``window_key`` returns an equal-for-equal-windows key made of ints instead.

Private API: ``IntervalWindow`` (Cython ``_IntervalWindowBase``) keeps its
bounds as ints in ``_start_micros`` / ``_end_micros``; reading them is the
only way to get the bounds without building Timestamps. This module is the
one place that reads them, and it falls back to the public ``start`` /
``end`` if a Beam release drops them.
"""

from apache_beam.transforms.window import GlobalWindow
from apache_beam.transforms.window import IntervalWindow
from apache_beam.utils.timestamp import MAX_TIMESTAMP
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.timestamp import Timestamp

_MIN_US = MIN_TIMESTAMP.micros
_MAX_US = MAX_TIMESTAMP.micros
_HAS_MICROS_FIELDS = hasattr(IntervalWindow(0, 1), '_end_micros')
_GLOBAL = GlobalWindow()
_INTERNED_LIMIT = 1 << 14
_interned = {}


def window_key(window):
    """A hashable key, equal for equal windows: ``None`` for the global window,
    ``(start_us, end_us)`` for an IntervalWindow (clamped to the timestamp
    range, as IntervalWindow equality is), the window itself otherwise."""
    t = type(window)
    if t is IntervalWindow:
        if _HAS_MICROS_FIELDS:
            start, end = window._start_micros, window._end_micros
        else:
            start, end = window.start.micros, window.end.micros
        return (start if start > _MIN_US else _MIN_US, end if end < _MAX_US else _MAX_US)
    if t is GlobalWindow:
        return None
    return window


def window_of_key(key):
    """The window a ``window_key`` stands for. IntervalWindows are interned:
    every key of a micro-batch restoring the same window shares one object."""
    if key is None:
        return _GLOBAL
    if type(key) is tuple:
        w = _interned.get(key)
        if w is None:
            if len(_interned) >= _INTERNED_LIMIT:
                _interned.clear()
            w = _interned[key] = IntervalWindow(Timestamp(micros=key[0]), Timestamp(micros=key[1]))
        return w
    return key


_GLOBAL_BOUNDS = (_GLOBAL.end.micros, _GLOBAL.max_timestamp().micros)


def window_bounds_us(window, key):
    """(end, max timestamp) of ``window`` in micros; ``key`` is its window_key."""
    if key is None:
        return _GLOBAL_BOUNDS
    if type(key) is tuple:
        return key[1], key[1] - 1  # IntervalWindow: max_timestamp() = end - 1 us
    return window.end.micros, window.max_timestamp().micros
