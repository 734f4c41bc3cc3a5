"""The per-key state-and-timers interface of the reduce driver.

One ``KeyState`` holds everything the driver knows about one key:

 * ``windows``: ``{window: WindowState}`` for every active (or finished but not
   yet garbage-collected) window, in first-seen order;
 * ``timers``: ``{window: {(name, domain): timestamp}}``;
 * ``input_watermark`` / ``output_watermark``: the last watermarks seen.

It is plain data: ``snapshot()`` returns a tuple of builtins, Beam windows and
``Timestamp``s (all picklable and ``FastPrimitivesCoder``-encodable) and
``KeyState.restore(snapshot)`` rebuilds an equal state.  A streaming runner
keeps the snapshot in its state store between micro-batches; batch and tests
keep the object in memory.  The driver only touches state through attributes
of ``KeyState``/``WindowState``, so another backend can subclass these.

Clocks: any object with ``time()`` returning a ``Timestamp`` (Beam's own test
clocks qualify); ``ManualClock`` is the injectable one used in tests and batch.
"""
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.timestamp import Timestamp


class ManualClock(object):
  """A processing-time clock that only moves when told to."""
  __slots__ = ('now',)

  def __init__(self, now=0):
    self.now = Timestamp.of(now)

  def time(self):
    return self.now

  def set(self, t):
    t = Timestamp.of(t)
    if t > self.now:
      self.now = t


class WindowState(object):
  """State of one window of one key.

  elements: values buffered for the next pane;  hold: combined output-time
  hold (None = none);  index / nonspec: pane counters;  finished: the trigger
  finished (tombstone: later elements are dropped until GC);  trig: trigger
  state dict;  last: ``(values, timestamp, window, pane)`` of the last pane
  emitted (RETRACTING only);  pending: emissions of windows merged into this
  one, to be retracted at the next firing (RETRACTING only).
  """
  __slots__ = ('elements', 'hold', 'index', 'nonspec', 'finished', 'trig',
               'last', 'pending')

  def __init__(self):
    self.elements = []
    self.hold = None
    self.index = 0
    self.nonspec = 0
    self.finished = False
    self.trig = {}
    self.last = None
    self.pending = []

  def snapshot(self):
    return (list(self.elements), self.hold, self.index, self.nonspec,
            self.finished, dict(self.trig), self.last, list(self.pending))

  @classmethod
  def restore(cls, snap):
    st = cls()
    (elements, st.hold, st.index, st.nonspec, st.finished, trig, st.last,
     pending) = snap
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
    self.input_watermark = MIN_TIMESTAMP
    self.output_watermark = MIN_TIMESTAMP

  def is_empty(self):
    return not self.windows and not self.timers

  def snapshot(self):
    return (
        tuple((w, st.snapshot()) for w, st in self.windows.items()),
        tuple((w, tuple(t.items())) for w, t in self.timers.items()),
        self.input_watermark, self.output_watermark)

  @classmethod
  def restore(cls, snap):
    ks = cls()
    windows, timers, ks.input_watermark, ks.output_watermark = snap
    ks.windows = {w: WindowState.restore(s) for w, s in windows}
    ks.timers = {w: dict(t) for w, t in timers}
    return ks

  def earliest_timer(self, domain):
    """Earliest pending timer in ``domain`` (None if there is none)."""
    best = None
    for tm in self.timers.values():
      for (name, dom), ts in tm.items():
        if dom == domain and (best is None or ts < best):
          best = ts
    return best

  def earliest_hold(self):
    """Earliest output-time hold: the output watermark may not pass it."""
    holds = [st.hold for st in self.windows.values() if st.hold is not None]
    return min(holds) if holds else None
