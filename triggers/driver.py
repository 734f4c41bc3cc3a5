"""The per-key, per-window reduce driver (Beam Java's ReduceFnRunner, ours).

``ReduceSpec`` is the immutable configuration (WindowFn, compiled trigger,
accumulation mode, output-time policy, allowed lateness).  It builds
``KeyReducer``s, one per key, over a ``KeyState`` (see ``triggers.state``) and
an injectable processing-time clock, so the same code runs in unit tests, in
batch and inside streaming operators.

Guarantees of ``KeyReducer``:
 * ``process(elements, input_watermark)`` buffers a bundle of WindowedValues
   (already assigned to windows), merges windows, and returns the panes the
   trigger fires while processing it;
 * ``advance_watermark(wm)`` fires every event-time timer at or before ``wm``
   (each with its own timestamp as the watermark, in timestamp order), then
   drops the state of every window whose GC time (``windowing.gc_time``) is
   before ``wm``;
 * ``advance_processing_time(t)`` fires every processing-time timer at or
   before ``t`` against the current input watermark;
 * elements for expired windows are dropped; elements for windows whose
   trigger finished are dropped until the window is garbage-collected;
 * outputs are ``WindowedValue(values, timestamp, (window,), PaneInfo)`` with
   ``values`` a fresh list; under RETRACTING each firing is preceded by
   ``WindowedValue(Retraction(old_values), old_ts, (old_window,), old_pane)``
   for every pane it supersedes (the window's own last pane and the last panes
   of all windows merged into it since).
A leftover, unfired buffer is *not* emitted at garbage collection (the Python
SDK's behaviour; the Java SDK would emit a final pane).
"""
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.utils.timestamp import MAX_TIMESTAMP
from apache_beam.utils.timestamp import Duration
from apache_beam.utils.timestamp import Timestamp
from apache_beam.utils.windowed_value import WindowedValue

from triggers import panes
from triggers.machines import compile_trigger
from triggers.machines import merge_trigger_states
from triggers.retractions import Retraction
from triggers.state import KeyState
from triggers.state import ManualClock
from triggers.state import WindowState
from windowing.merging import compute_merges
from windowing.timestamps import OutputTimePolicy
from windowing.timestamps import is_expired

WATERMARK = TimeDomain.WATERMARK
PROCESSING = TimeDomain.REAL_TIME

DISCARDING = 1
ACCUMULATING = 2
RETRACTING = 3


class _Ctx(object):
  """Trigger context for one window (see triggers.machines)."""
  __slots__ = ('window', 'state', '_timers', '_ks', '_clock')

  def __init__(self, ks, window, st, clock):
    self.window = window
    self.state = st.trig
    self._ks = ks
    self._timers = ks.timers.get(window)
    self._clock = clock

  def now(self):
    return self._clock.time()

  def set_timer(self, name, domain, timestamp):
    tm = self._timers
    if tm is None:
      tm = self._timers = self._ks.timers.setdefault(self.window, {})
    tm[(name, domain)] = timestamp

  def clear_timer(self, name, domain):
    tm = self._timers
    if tm is not None:
      tm.pop((name, domain), None)
      if not tm:
        self._ks.timers.pop(self.window, None)
        self._timers = None


class ReduceSpec(object):
  """Immutable per-transform configuration; builds per-key reducers."""

  def __init__(self, window_fn, trigger, accumulation_mode, timestamp_combiner=None,
               allowed_lateness=0):
    self.window_fn = window_fn
    self.trigger = compile_trigger(trigger)
    mode = int(accumulation_mode)
    if mode not in (DISCARDING, ACCUMULATING, RETRACTING):
      raise ValueError('Unknown accumulation mode %r' % (accumulation_mode,))
    self.accumulation_mode = mode
    self.policy = OutputTimePolicy(timestamp_combiner, window_fn)
    self.allowed_lateness = Duration.of(allowed_lateness)
    self.merging = window_fn.is_merging()

  @classmethod
  def from_windowing(cls, windowing):
    """From an ``apache_beam.transforms.core.Windowing``."""
    return cls(windowing.windowfn, windowing.triggerfn,
               windowing.accumulation_mode, windowing.timestamp_combiner,
               windowing.allowed_lateness)

  def new_reducer(self, state=None, clock=None):
    return KeyReducer(self, state if state is not None else KeyState(),
                      clock if clock is not None else ManualClock())

  def restore(self, snapshot, clock=None):
    return self.new_reducer(KeyState.restore(snapshot), clock)


class KeyReducer(object):
  """Per-key driver logic over a KeyState (see module docstring)."""

  def __init__(self, spec, state, clock):
    self.spec = spec
    self.state = state
    self.clock = clock
    self._trigger = spec.trigger
    self._mode = spec.accumulation_mode

  def snapshot(self):
    return self.state.snapshot()

  # --- elements -----------------------------------------------------------

  def process(self, windowed_values, input_watermark=None, output_watermark=None):
    ks = self.state
    if input_watermark is None:
      input_watermark = ks.input_watermark
    if output_watermark is None:
      output_watermark = input_watermark
    ks.input_watermark = max(ks.input_watermark, input_watermark)
    ks.output_watermark = max(ks.output_watermark, output_watermark)
    lateness_us = self.spec.allowed_lateness.micros
    wm_us = Timestamp.of(input_watermark).micros

    groups = {}
    expired = {}
    for wv in windowed_values:
      value = wv.value
      ts = wv.timestamp
      for w in wv.windows:
        g = groups.get(w)
        if g is None:
          dead = expired.get(w)
          if dead is None:
            # is_expired(w, lateness, input_watermark) on integer micros.
            dead = expired[w] = wm_us > w.end.micros - 1 + lateness_us
          if dead:
            continue
          g = groups[w] = []
        g.append((value, ts))

    windows = ks.windows
    if self.spec.merging and any(w not in windows for w in groups):
      merged_into = {}
      for m in compute_merges(self.spec.window_fn,
                              list(windows) + [w for w in groups
                                               if w not in windows]):
        self._merge(m.merged, m.result)
        for w in m.merged:
          if w != m.result:
            merged_into[w] = m.result
      if merged_into:
        regrouped = {}
        for w, elems in groups.items():
          while w in merged_into:
            w = merged_into[w]
          regrouped.setdefault(w, []).extend(elems)
        groups = regrouped

    out = []
    trigger = self._trigger
    policy = self.spec.policy
    for w, elems in groups.items():
      st = windows.get(w)
      if st is None:
        st = windows[w] = WindowState()
      elif st.finished:
        continue
      hold = policy.hold_for(w, (ts for _, ts in elems), output_watermark)
      if hold is not None:
        st.hold = policy.combine(st.hold, hold)
      ctx = _Ctx(ks, w, st, self.clock)
      buf = st.elements
      for value, _ in elems:
        buf.append(value)
        trigger.on_element(ctx)
      if trigger.should_fire(ctx, input_watermark):
        finished = trigger.on_fire(ctx, input_watermark)
        self._emit(out, w, st, finished, output_watermark, False)
    return out

  def _merge(self, merged, result):
    ks = self.state
    windows = ks.windows
    own = windows.get(result)
    parts = [own] if own is not None else []
    for w in merged:
      if w != result and w in windows:
        parts.append(windows.pop(w))
    new = WindowState()
    policy = self.spec.policy
    for p in parts:
      new.elements.extend(p.elements)
      new.hold = policy.combine(new.hold, p.hold)
      new.finished = new.finished or p.finished
      new.pending.extend(p.pending)
      if p is not own and p.last is not None:
        new.pending.append(p.last)
    if own is not None:
      # Pane counters survive only for a window that merges into itself.
      new.index, new.nonspec, new.last = own.index, own.nonspec, own.last
    new.trig = merge_trigger_states([p.trig for p in parts]) if parts else {}
    windows[result] = new
    # Timers of merged-away windows now belong to the result.
    tm = ks.timers.get(result)
    for w in merged:
      if w != result:
        old = ks.timers.pop(w, None)
        if old:
          if tm is None:
            tm = ks.timers[result] = {}
          for k, ts in old.items():
            if k not in tm or ts < tm[k]:
              tm[k] = ts
    self._trigger.on_merge(_Ctx(ks, result, new, self.clock), merged)

  # --- output -------------------------------------------------------------

  def _emit(self, out, window, st, finished, output_watermark, by_wm_timer):
    pane = panes.next_pane(st, window, finished, output_watermark, by_wm_timer)
    values = st.elements
    mode = self._mode
    if finished or mode == DISCARDING:
      st.elements = []
    else:
      st.elements = list(values)
    if finished:
      st.finished = True
    hold = st.hold
    if hold is None:
      ts = window.max_timestamp()
    else:
      ts = hold
      if not (output_watermark < window.end and self._trigger.has_ontime_pane):
        # Keep the hold while an on-time pane is still to come.
        st.hold = None
    if mode == RETRACTING:
      for values_, ts_, w_, pane_ in st.pending:
        out.append(WindowedValue(Retraction(values_), ts_, (w_,), pane_))
      st.pending = []
      if st.last is not None:
        values_, ts_, w_, pane_ = st.last
        out.append(WindowedValue(Retraction(values_), ts_, (w_,), pane_))
      st.last = (list(values), ts, window, pane)
    out.append(WindowedValue(values, ts, (window,), pane))

  # --- time ---------------------------------------------------------------

  def _fire_timer(self, out, window, domain, timestamp):
    ks = self.state
    st = ks.windows.get(window)
    if st is None or st.finished:
      return
    if domain == WATERMARK:
      # As the Python SDK: the timer's own time is the watermark it sees.
      wm = out_wm = timestamp
    else:
      wm, out_wm = ks.input_watermark, ks.output_watermark
    ctx = _Ctx(ks, window, st, self.clock)
    if self._trigger.should_fire(ctx, wm):
      finished = self._trigger.on_fire(ctx, wm)
      self._emit(out, window, st, finished, out_wm, domain == WATERMARK)

  def _fire_due(self, out, domain, limit):
    ks = self.state
    while True:
      due = []
      for w, tm in ks.timers.items():
        for k, ts in tm.items():
          if k[1] == domain and ts <= limit:
            due.append((ts, w, k))
      if not due:
        return
      due.sort(key=lambda d: d[0])
      for ts, w, k in due:
        tm = ks.timers[w]
        del tm[k]
        if not tm:
          del ks.timers[w]
      for ts, w, k in due:
        self._fire_timer(out, w, domain, ts)

  def advance_watermark(self, input_watermark, output_watermark=None):
    """Moves the input watermark forward; returns the panes that fire."""
    ks = self.state
    input_watermark = Timestamp.of(input_watermark)
    if output_watermark is None:
      output_watermark = input_watermark
    ks.input_watermark = max(ks.input_watermark, input_watermark)
    ks.output_watermark = max(ks.output_watermark, output_watermark)
    out = []
    self._fire_due(out, WATERMARK, input_watermark)
    self.collect_garbage(input_watermark)
    return out

  def advance_processing_time(self, now):
    """Moves processing time to ``now``; returns the panes that fire."""
    if isinstance(self.clock, ManualClock):
      self.clock.set(now)
    out = []
    self._fire_due(out, PROCESSING, Timestamp.of(now))
    return out

  def collect_garbage(self, input_watermark):
    """Drops state and timers of windows expired at ``input_watermark``."""
    ks = self.state
    lateness = self.spec.allowed_lateness
    wm = Timestamp.of(input_watermark)
    dead = [w for w in ks.windows if is_expired(w, lateness, wm)]
    for w in dead:
      del ks.windows[w]
      ks.timers.pop(w, None)

  def next_timer(self, domain=WATERMARK):
    return self.state.earliest_timer(domain)

  def finish(self):
    """End of bounded input: the input watermark jumps to +infinity.

    Processing time does not advance (batch semantics), so processing-time
    triggers that have not fired by then never fire."""
    return self.advance_watermark(MAX_TIMESTAMP)
