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
 * ``advance_watermark(wm)`` closes every window whose GC time
   (``windowing.gc_time``) is before ``wm``: if its trigger has not finished,
   the window emits its final pane (``is_last``; ON_TIME if this advance
   also passed the end of the window and no non-early pane came before,
   else LATE), as ``triggers.closing`` rules, and its state and timers are
   dropped.  Before that it fires every event-time timer at or before ``wm``
   of the other windows (each with its own timestamp as the watermark, in
   timestamp order);
 * ``advance_processing_time(t)`` fires every processing-time timer at or
   before ``t`` against the current input watermark;
 * elements for expired windows are dropped, each (element, window)
   counted in ``dropped_late`` (as Beam's ``droppedDueToLateness``; the
   count starts at 0 for each KeyReducer object); elements for windows
   whose trigger finished are dropped until the window is
   garbage-collected;
 * elements for windows the input watermark has passed (max timestamp
   behind it) but that have not expired are late: kept (they go to LATE
   panes) and each (element, window) counted in ``late`` (MillWheel's
   late records; per KeyReducer object too). Windows merging away do not
   change the count: it is taken as elements arrive, before merging;
 * a firing whose pane is empty (no element since the window's last
   firing) emits nothing unless ``triggers.closing`` says so (the ON_TIME
   pane under FIRE_ALWAYS, the final pane under EMIT_ALWAYS);
 * outputs are ``WindowedValue(values, timestamp, (window,), PaneInfo)`` with
   ``values`` a fresh list; under RETRACTING each firing is preceded by
   ``WindowedValue(Retraction(old_values), old_ts, (old_window,), old_pane)``
   for every pane it supersedes (the window's own last pane and the last panes
   of all windows merged into it since).

With ``weight`` (a function from a buffered value to how many records it
stands for: a lifted combiner's accumulator holds several), ``late`` and
``dropped_late`` add each element's weight instead of 1.

With ``compact`` (a function from a window's buffered values to an
equivalent, usually shorter, list: a lifted combiner's accumulators merged
into one, as Beam's runners combine in their GroupAlsoByWindow), a window's
buffer is compacted whenever elements join it or windows merge into it:
panes then carry the compacted values. Triggers still see every element
(``on_element`` runs before compaction), so element counts are unchanged.

Times: the methods above take Timestamps (or seconds, as ``Timestamp.of``);
their ``*_us`` twins take int microseconds, which is what the driver keeps
internally (``triggers.state``) and what a runner that already has micros
should call.
"""

from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.utils.timestamp import Duration
from apache_beam.utils.windowed_value import WindowedValue

from triggers import panes
from triggers.closing import PYTHON_SDK_DEFAULT
from triggers.closing import ClosingRules
from triggers.machines import compile_trigger
from triggers.machines import merge_trigger_states
from triggers.retractions import Retraction
from triggers.state import KeyState
from triggers.state import ManualClock
from triggers.state import WindowState
from triggers.state import micros_reader
from windowing.merging import compute_merges
from windowing.timestamps import MAX_US
from windowing.timestamps import OutputTimePolicy
from windowing.timestamps import from_us
from windowing.timestamps import gc_time_us
from windowing.timestamps import to_us
from windowing.window_keys import window_bounds_us
from windowing.window_keys import window_key

WATERMARK = TimeDomain.WATERMARK
PROCESSING = TimeDomain.REAL_TIME

DISCARDING = 1
ACCUMULATING = 2
RETRACTING = 3


class _Ctx(object):
    """Trigger context for one window (see triggers.machines)."""

    __slots__ = ('window', 'end', 'state', '_key', '_timers', '_ks', 'now')

    def __init__(self, ks, st, now):
        self.window = st.window
        self.end = st.end
        self.state = st.trig
        self._key = st.key
        self._ks = ks
        self._timers = ks.timers.get(st.key)
        self.now = now

    def set_timer(self, name, domain, timestamp):
        tm = self._timers
        if tm is None:
            tm = self._timers = self._ks.timers.setdefault(self._key, {})
        tm[(name, domain)] = timestamp

    def clear_timer(self, name, domain):
        tm = self._timers
        if tm is not None:
            tm.pop((name, domain), None)
            if not tm:
                self._ks.timers.pop(self._key, None)
                self._timers = None


class ReduceSpec(object):
    """Immutable per-transform configuration; builds per-key reducers."""

    def __init__(
        self,
        window_fn,
        trigger,
        accumulation_mode,
        timestamp_combiner=None,
        allowed_lateness=0,
        compact=None,
        closing=PYTHON_SDK_DEFAULT,
        weight=None,
    ):
        self.window_fn = window_fn
        self.compact = compact
        self.weight = weight
        self.closing = closing
        self.trigger = compile_trigger(trigger)
        mode = int(accumulation_mode)
        if mode not in (DISCARDING, ACCUMULATING, RETRACTING):
            raise ValueError('Unknown accumulation mode %r' % (accumulation_mode,))
        self.accumulation_mode = mode
        self.policy = OutputTimePolicy(timestamp_combiner, window_fn)
        self.allowed_lateness = Duration.of(allowed_lateness)
        self.allowed_lateness_us = self.allowed_lateness.micros
        self.merging = window_fn.is_merging()

    @classmethod
    def from_windowing(cls, windowing, compact=None, closing=PYTHON_SDK_DEFAULT, weight=None):
        """From an ``apache_beam.transforms.core.Windowing`` (which does not
        carry the closing rules: Beam's Python SDK always writes
        ``PYTHON_SDK_DEFAULT``; pass the proto's with ``closing``)."""
        return cls(
            windowing.windowfn,
            windowing.triggerfn,
            windowing.accumulation_mode,
            windowing.timestamp_combiner,
            windowing.allowed_lateness,
            compact,
            closing,
            weight,
        )

    @classmethod
    def from_proto(cls, windowing_strategy, context, compact=None):
        """From a runner-API ``WindowingStrategy`` and the
        ``PipelineContext`` its components live in, closing rules included."""
        from apache_beam.transforms.core import Windowing

        return cls.from_windowing(
            Windowing.from_runner_api(windowing_strategy, context), compact, ClosingRules.from_proto(windowing_strategy)
        )

    def new_reducer(self, state=None, clock=None):
        return KeyReducer(
            self, state if state is not None else KeyState(), clock if clock is not None else ManualClock()
        )

    def restore(self, snapshot, clock=None):
        return self.new_reducer(KeyState.restore(snapshot), clock)

    def gc_time_us(self, window_state):
        """Last input watermark (micros) at which the window still accepts data."""
        return gc_time_us(window_state.max, self.allowed_lateness_us)


class KeyReducer(object):
    """Per-key driver logic over a KeyState (see module docstring)."""

    def __init__(self, spec, state, clock):
        self.spec = spec
        self.state = state
        self.clock = clock
        self._now = micros_reader(clock)
        self._trigger = spec.trigger
        self._mode = spec.accumulation_mode
        self.dropped_late = 0
        self.late = 0

    def snapshot(self):
        return self.state.snapshot()

    # --- elements -----------------------------------------------------------

    def process(self, windowed_values, input_watermark=None, output_watermark=None):
        return self.process_us(
            windowed_values,
            None if input_watermark is None else to_us(input_watermark),
            None if output_watermark is None else to_us(output_watermark),
        )

    def process_us(self, windowed_values, input_watermark=None, output_watermark=None):
        ks = self.state
        if input_watermark is None:
            input_watermark = ks.input_watermark
        if output_watermark is None:
            output_watermark = input_watermark
        if input_watermark > ks.input_watermark:
            ks.input_watermark = input_watermark
        if output_watermark > ks.output_watermark:
            ks.output_watermark = output_watermark
        lateness_us = self.spec.allowed_lateness_us
        weight = self.spec.weight

        groups = {}  # window key -> (window, [WindowedValue])
        expired = {}
        for wv in windowed_values:
            for w in wv.windows:
                k = window_key(w)
                g = groups.get(k)
                if g is None:
                    dead = expired.get(k)
                    if dead is None:
                        # Expired: the watermark is past max timestamp + allowed lateness.
                        dead = expired[k] = input_watermark > window_bounds_us(w, k)[1] + lateness_us
                    if dead:
                        self.dropped_late += 1 if weight is None else weight(wv.value)
                        continue
                    g = groups[k] = (w, [])
                g[1].append(wv)
        for k, (w, elems) in groups.items():
            if input_watermark > window_bounds_us(w, k)[1]:
                self.late += len(elems) if weight is None else sum(weight(wv.value) for wv in elems)

        windows = ks.windows
        if self.spec.merging and any(k not in windows for k in groups):
            groups = self._merge_new_windows(groups)

        out = []
        trigger = self._trigger
        policy = self.spec.policy
        compact = self.spec.compact
        for k, (w, elems) in groups.items():
            st = windows.get(k)
            if st is None:
                st = windows[k] = WindowState(w, k)
            elif st.finished:
                continue
            # (A generator: reading a WindowedValue's timestamp builds a Timestamp,
            # and end-of-window holds never look at it.)
            hold = policy.hold_for(st.window, st.max, (wv.timestamp for wv in elems), output_watermark)
            if hold is not None:
                st.hold = policy.combine(st.hold, hold)
            ctx = _Ctx(ks, st, self._now)
            buf = st.elements
            for wv in elems:
                buf.append(wv.value)
                trigger.on_element(ctx)
            st.fresh = True
            if compact is not None and len(buf) > 1:
                st.elements = compact(buf)
            if trigger.should_fire(ctx, input_watermark):
                finished = trigger.on_fire(ctx, input_watermark)
                self._emit(out, st, finished, output_watermark, False)
        return out

    def _merge_new_windows(self, groups):
        """Merges the windows of ``groups`` with the key's windows; returns the
        groups regrouped by the windows they merged into."""
        windows = self.state.windows
        merged_into = {}
        candidates = [st.window for st in windows.values()] + [w for k, (w, _) in groups.items() if k not in windows]
        for m in compute_merges(self.spec.window_fn, candidates):
            self._merge(m.merged, m.result)
            result_key = window_key(m.result)
            for w in m.merged:
                k = window_key(w)
                if k != result_key:
                    merged_into[k] = (result_key, m.result)
        if not merged_into:
            return groups
        regrouped = {}
        for k, (w, elems) in groups.items():
            while k in merged_into:
                k, w = merged_into[k]
            g = regrouped.get(k)
            if g is None:
                regrouped[k] = (w, list(elems))
            else:
                g[1].extend(elems)
        return regrouped

    def _merge(self, merged, result):
        ks = self.state
        windows = ks.windows
        result_key = window_key(result)
        merged_keys = [window_key(w) for w in merged]
        own = windows.get(result_key)
        parts = [own] if own is not None else []
        for k in merged_keys:
            if k != result_key and k in windows:
                parts.append(windows.pop(k))
        new = WindowState(result, result_key)
        policy = self.spec.policy
        for p in parts:
            new.elements.extend(p.elements)
            new.hold = policy.combine(new.hold, p.hold)
            new.finished = new.finished or p.finished
            new.fresh = new.fresh or p.fresh
            new.pending.extend(p.pending)
            if p is not own and p.last is not None:
                new.pending.append(p.last)
        if own is not None:
            # Pane counters survive only for a window that merges into itself.
            new.index, new.nonspec, new.last = own.index, own.nonspec, own.last
        new.trig = merge_trigger_states([p.trig for p in parts]) if parts else {}
        if self.spec.compact is not None and len(new.elements) > 1:
            new.elements = self.spec.compact(new.elements)
        windows[result_key] = new
        # Timers of merged-away windows now belong to the result.
        tm = ks.timers.get(result_key)
        for k in merged_keys:
            if k != result_key:
                old = ks.timers.pop(k, None)
                if old:
                    if tm is None:
                        tm = ks.timers[result_key] = {}
                    for timer, ts in old.items():
                        if timer not in tm or ts < tm[timer]:
                            tm[timer] = ts
        self._trigger.on_merge(_Ctx(ks, new, self._now), merged)

    # --- output -------------------------------------------------------------

    def _emit(self, out, st, finished, output_watermark, on_time_eligible):
        """Fires the window whose state is ``st``: a pane (with the retractions
        it supersedes) if the closing rules emit it, and the accumulation
        mode's effect on the buffer either way."""
        pane = panes.describe(st, finished, output_watermark, on_time_eligible)
        emitted = self.spec.closing.should_emit(not st.fresh, finished, pane.timing)
        st.fresh = False
        values = st.elements
        mode = self._mode
        if finished or mode == DISCARDING:
            st.elements = []
        elif emitted:
            st.elements = list(values)
        if finished:
            st.finished = True
        hold = st.hold
        if hold is None:
            ts = st.max
        else:
            ts = hold
            if not (output_watermark < st.end and self._trigger.has_ontime_pane):
                # Keep the hold while an on-time pane is still to come.
                st.hold = None
        if not emitted:
            return
        panes.record(st, pane)
        if mode == RETRACTING:
            for values_, ts_, w_, pane_ in st.pending:
                out.append(WindowedValue(Retraction(values_), from_us(ts_), (w_,), pane_))
            st.pending = []
            if st.last is not None:
                values_, ts_, w_, pane_ = st.last
                out.append(WindowedValue(Retraction(values_), from_us(ts_), (w_,), pane_))
            st.last = (list(values), ts, st.window, pane)
        out.append(WindowedValue(values, from_us(ts), (st.window,), pane))

    # --- time ---------------------------------------------------------------

    def _fire_timer(self, out, key, domain, timestamp):
        ks = self.state
        st = ks.windows.get(key)
        if st is None or st.finished:
            return
        if domain == WATERMARK:
            # As the Python SDK: the timer's own time is the watermark it sees.
            wm = out_wm = timestamp
        else:
            wm, out_wm = ks.input_watermark, ks.output_watermark
        ctx = _Ctx(ks, st, self._now)
        if self._trigger.should_fire(ctx, wm):
            finished = self._trigger.on_fire(ctx, wm)
            self._emit(out, st, finished, out_wm, domain == WATERMARK)

    def _fire_due(self, out, domain, limit):
        ks = self.state
        while True:
            due = []
            for key, tm in ks.timers.items():
                for timer, ts in tm.items():
                    if timer[1] == domain and ts <= limit:
                        due.append((ts, key, timer))
            if not due:
                return
            due.sort(key=lambda d: d[0])
            for ts, key, timer in due:
                tm = ks.timers[key]
                del tm[timer]
                if not tm:
                    del ks.timers[key]
            for ts, key, timer in due:
                self._fire_timer(out, key, domain, ts)

    def advance_watermark(self, input_watermark, output_watermark=None):
        """Moves the input watermark forward; returns the panes that fire."""
        return self.advance_watermark_us(
            to_us(input_watermark), None if output_watermark is None else to_us(output_watermark)
        )

    def advance_watermark_us(self, input_watermark, output_watermark=None):
        ks = self.state
        previous = ks.input_watermark
        if output_watermark is None:
            output_watermark = input_watermark
        if input_watermark > ks.input_watermark:
            ks.input_watermark = input_watermark
        if output_watermark > ks.output_watermark:
            ks.output_watermark = output_watermark
        out = []
        closing = self._closing(input_watermark)
        for key, _ in closing:
            # A window that closes in this advance is handled once, by its
            # closing (Java's ReduceFnRunner: the garbage-collection activation
            # takes precedence over the window's timers, so end of window and
            # expiry reached together give one pane, ON_TIME and last).
            ks.timers.pop(key, None)
        self._fire_due(out, WATERMARK, input_watermark)
        for _, st in closing:
            if not st.finished:
                self._emit(out, st, True, input_watermark, previous <= st.max)
        self.collect_garbage_us(input_watermark)
        return out

    def _closing(self, input_watermark):
        """[(window key, state)] of the windows that close at
        ``input_watermark`` (none if the closing rules do not close windows)."""
        if not self.spec.closing.closes_windows:
            return ()
        gc_time = self.spec.gc_time_us
        return [(k, st) for k, st in self.state.windows.items() if input_watermark > gc_time(st)]

    def advance_processing_time(self, now):
        """Moves processing time to ``now``; returns the panes that fire."""
        return self.advance_processing_time_us(to_us(now))

    def advance_processing_time_us(self, now):
        if isinstance(self.clock, ManualClock):
            self.clock.set_us(now)
        out = []
        self._fire_due(out, PROCESSING, now)
        return out

    def collect_garbage(self, input_watermark):
        """Drops state and timers of windows expired at ``input_watermark``."""
        self.collect_garbage_us(to_us(input_watermark))

    def collect_garbage_us(self, input_watermark):
        ks = self.state
        gc_time = self.spec.gc_time_us
        dead = [k for k, st in ks.windows.items() if input_watermark > gc_time(st)]
        for k in dead:
            del ks.windows[k]
            ks.timers.pop(k, None)

    def next_timer(self, domain=WATERMARK):
        """Earliest pending timer of ``domain`` as a Timestamp (None: none)."""
        us = self.state.earliest_timer(domain)
        return None if us is None else from_us(us)

    def next_wake_up_us(self):
        """(earliest input watermark, earliest processing time), in micros, at
        which this reducer has something to do without new elements: a timer or
        a window passing its end or closing (MAX_US: nothing before the end of
        time)."""
        state = self.state
        gc_time = self.spec.gc_time_us
        passed = state.input_watermark
        closes = self.spec.closing.closes_windows
        wm = MAX_US
        for st in state.windows.values():
            if closes and passed <= st.max and not st.finished:
                # Also the advance that passes the end of the window: whether the
                # final pane can be ON_TIME depends on it (see advance_watermark).
                t = st.max + 1
            else:
                t = gc_time(st) + 1
            if t < wm:
                wm = t
        timer = state.earliest_timer(WATERMARK)
        if timer is not None and timer < wm:
            wm = timer
        pt = state.earliest_timer(PROCESSING)
        return wm, MAX_US if pt is None else pt

    def finish(self):
        """End of bounded input: the input watermark jumps to +infinity.

        Processing time does not advance (batch semantics), so processing-time
        triggers that have not fired by then never fire."""
        return self.advance_watermark_us(MAX_US)
