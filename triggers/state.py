"""The per-key state-and-timers interface of the reduce driver.

One ``KeyState`` holds everything the driver knows about one key:

 * ``windows``: ``{window_key: WindowState}`` for every active (or finished
   but not yet garbage-collected) window, in first-seen order
   (``windowing.window_keys``: ints for Beam's interval and global windows);
 * ``timers``: ``{window_key: {(name, domain): timestamp}}``;
 * ``input_watermark`` / ``output_watermark``: the last watermarks seen.

It is plain data: ``snapshot()`` returns a tuple of builtins and Beam windows
(picklable and ``FastPrimitivesCoder``-encodable) and
``KeyState.restore(snapshot)`` rebuilds an equal state.  Every time in it
(watermarks, timers, holds, pane timestamps) is an int of microseconds since
the epoch (``windowing.timestamps.MIN_US`` .. ``MAX_US``).  A streaming runner
keeps the snapshot in its state store between micro-batches; batch and tests
keep the object in memory.  The driver only touches state through attributes
of ``KeyState``/``WindowState``, so another backend can subclass these.

Clocks: any object with ``time()`` returning a ``Timestamp`` or seconds
(Beam's own test clocks qualify); ``ManualClock`` is the injectable one used
in tests and batch, and also answers ``micros()`` directly.
"""

from apache_beam.utils.timestamp import Timestamp

from windowing.timestamps import MIN_US
from windowing.timestamps import from_us
from windowing.timestamps import to_us
from windowing.window_keys import window_bounds_us
from windowing.window_keys import window_key
from windowing.window_keys import window_of_key


class ManualClock(object):
    """A processing-time clock that only moves when told to."""

    __slots__ = ('now_us',)

    def __init__(self, now=0):
        self.now_us = to_us(now)

    @classmethod
    def at_us(cls, us):
        """A clock showing ``us`` micros."""
        clock = cls()
        clock.now_us = us
        return clock

    def time(self):
        return from_us(self.now_us)

    def micros(self):
        return self.now_us

    def set(self, t):
        self.set_us(to_us(t))

    def set_us(self, us):
        if us > self.now_us:
            self.now_us = us


def micros_reader(clock):
    """A function returning ``clock``'s time in micros."""
    if isinstance(clock, ManualClock):
        return clock.micros
    return lambda: Timestamp.of(clock.time()).micros


class WindowState(object):
    """State of one window of one key.

    window: the Beam window;  key: its window_key;  end / max: the window's
    end and max timestamp (micros);  elements: values
    buffered for the next pane;  hold: combined output-time hold (micros, None
    = none);  index / nonspec: pane counters;  finished: the trigger finished
    (tombstone: later elements are dropped until GC);  trig: trigger state
    dict;  last: ``(values, timestamp_us, window, pane)`` of the last pane
    emitted (RETRACTING only);  pending: emissions of windows merged into this
    one, to be retracted at the next firing (RETRACTING only);  fresh: an
    element arrived since the window last fired (the next pane is not empty,
    in the sense of ``triggers.closing``).
    """

    __slots__ = (
        'window',
        'key',
        'end',
        'max',
        'elements',
        'hold',
        'index',
        'nonspec',
        'finished',
        'trig',
        'last',
        'pending',
        'fresh',
    )

    def __init__(self, window, key=None):
        self.window = window
        self.key = key = window_key(window) if key is None else key
        self.end, self.max = window_bounds_us(window, key)
        self.elements = []
        self.hold = None
        self.index = 0
        self.nonspec = 0
        self.finished = False
        self.trig = {}
        self.last = None
        self.pending = []
        self.fresh = False

    def snapshot(self):
        """The window appears as its key (ints for Beam's interval and global
        windows: far cheaper to pickle than the window)."""
        return (
            self.key,
            list(self.elements),
            self.hold,
            self.index,
            self.nonspec,
            self.finished,
            dict(self.trig),
            self.last,
            list(self.pending),
            self.fresh,
        )

    @classmethod
    def restore(cls, snap):
        key = snap[0]
        st = cls(window_of_key(key), key)
        if len(snap) == 9:
            # Written before `fresh` existed (streaming checkpoints of earlier
            # releases): buffered values mean data since the last firing in
            # DISCARDING mode, the common case; in ACCUMULATING mode this may
            # emit one extra final pane, never lose one.
            snap = tuple(snap) + (bool(snap[1]),)
        (_, elements, st.hold, st.index, st.nonspec, st.finished, trig, st.last, pending, st.fresh) = snap
        st.elements = list(elements)
        st.trig = dict(trig)
        st.pending = list(pending)
        return st


class KeyState(object):
    """All windows and timers of one key (see module docstring)."""

    __slots__ = ('windows', 'timers', 'input_watermark', 'output_watermark')

    def __init__(self):
        self.windows = {}
        self.timers = {}
        self.input_watermark = MIN_US
        self.output_watermark = MIN_US

    def is_empty(self):
        return not self.windows and not self.timers

    def snapshot(self):
        return (
            tuple(st.snapshot() for st in self.windows.values()),
            tuple((k, tuple(t.items())) for k, t in self.timers.items()),
            self.input_watermark,
            self.output_watermark,
        )

    @classmethod
    def restore(cls, snap):
        ks = cls()
        windows, timers, ks.input_watermark, ks.output_watermark = snap
        for s in windows:
            st = WindowState.restore(s)
            ks.windows[st.key] = st
        ks.timers = {k: dict(t) for k, t in timers}
        return ks

    def earliest_timer(self, domain):
        """Earliest pending timer in ``domain`` (micros; None if there is none)."""
        best = None
        for tm in self.timers.values():
            for (name, dom), ts in tm.items():
                if dom == domain and (best is None or ts < best):
                    best = ts
        return best

    def earliest_hold(self):
        """Earliest output-time hold (micros): the output watermark may not pass it."""
        holds = [st.hold for st in self.windows.values() if st.hold is not None]
        return min(holds) if holds else None
