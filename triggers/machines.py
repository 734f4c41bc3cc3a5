"""Trigger state machines for every trigger of Beam's runner-API ``Trigger`` proto.

A trigger is compiled once (``compile_trigger``) into an immutable tree of
``TriggerMachine`` nodes.  The nodes hold no per-window state: every call gets a
``ctx`` whose ``state`` is a plain ``dict`` (serializable, one per window) and
which sets/clears timers for that window.  State keys are ``'<path><name>:<kind>'``
where ``path`` names the node's position in the tree; ``kind`` says how two
windows' values combine when windows merge (see ``MERGE_OPS``).

Semantics follow the Python SDK's trigger driver (``apache_beam.transforms.
trigger``) so that panes agree with Beam's transcripts, with these deliberate
differences (documented in docs/windowing_and_triggers.md):
 * processing-time triggers compare the injected clock with a stored deadline
   (Beam's Python driver passes the processing time as if it were the
   watermark); delays and ``align_to`` of the proto are honoured;
 * ``after_synchronized_processing_time`` behaves like Beam's Python SDK: it is
   ready whenever asked (a runner's-discretion trigger).

Context contract (``ctx``): ``ctx.state`` (dict), ``ctx.window``, ``ctx.end``
(the window's end), ``ctx.now()`` (processing time),
``ctx.set_timer(name, domain, timestamp)``, ``ctx.clear_timer(name, domain)``.
Every time (``ctx.end``, ``now()``, timers, the ``watermark`` arguments) is an
int of microseconds since the epoch.
"""

from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.transforms.timeutil import TimeDomain

WATERMARK = TimeDomain.WATERMARK
PROCESSING = TimeDomain.REAL_TIME


def _merge_sum(values):
    return sum(values)


def _merge_any(values):
    return any(values)


def _merge_max(values):
    return max(values)


def _merge_min(values):
    return min(values)


# How state of several windows combines into the merged window's state.
MERGE_OPS = {
    'n': _merge_sum,  # element counts
    'late': _merge_any,  # AfterWatermark passed the end of window
    'each': _merge_max,  # AfterEach: furthest sub-trigger reached
    'pt': _merge_min,  # processing-time deadline: earliest wins
}


def merge_trigger_states(states):
    """Combines per-window trigger state dicts of windows that merge."""
    if len(states) == 1:
        return dict(states[0])
    collected = {}
    for st in states:
        for k, v in st.items():
            collected.setdefault(k, []).append(v)
    return {k: MERGE_OPS[k.rsplit(':', 1)[1]](vs) for k, vs in collected.items()}


class TriggerMachine(object):
    """Base class.  Subclasses are immutable after construction."""

    __slots__ = ('path',)
    # True when the trigger is guaranteed to produce an ON_TIME pane.
    has_ontime_pane = False

    def __init__(self, path):
        self.path = path

    def on_element(self, ctx):
        pass

    def on_merge(self, ctx, merged_windows):
        pass

    def should_fire(self, ctx, watermark):
        raise NotImplementedError

    def on_fire(self, ctx, watermark):
        """Called when the trigger fired; returns True when it is finished."""
        raise NotImplementedError

    def reset(self, ctx):
        pass

    def children(self):
        return ()

    def __repr__(self):
        kids = ', '.join(repr(c) for c in self.children())
        return '%s(%s)' % (type(self).__name__, kids)


class DefaultMachine(TriggerMachine):
    """Fires at every watermark crossing of the window end; never finishes."""

    __slots__ = ('timer',)
    has_ontime_pane = True

    def __init__(self, path):
        super().__init__(path)
        self.timer = path + 'eow'

    def on_element(self, ctx):
        ctx.set_timer(self.timer, WATERMARK, ctx.end)

    def on_merge(self, ctx, merged_windows):
        # The merged window re-arms its timer on the element that caused the merge.
        ctx.clear_timer(self.timer, WATERMARK)

    def should_fire(self, ctx, watermark):
        if watermark >= ctx.end:
            # Late elements re-arm the timer; clear it so they fire only once.
            ctx.clear_timer(self.timer, WATERMARK)
            return True
        return False

    def on_fire(self, ctx, watermark):
        return False

    def reset(self, ctx):
        ctx.clear_timer(self.timer, WATERMARK)


class AlwaysMachine(TriggerMachine):
    __slots__ = ()

    def should_fire(self, ctx, watermark):
        return True

    def on_fire(self, ctx, watermark):
        return False


class NeverMachine(TriggerMachine):
    __slots__ = ()

    def should_fire(self, ctx, watermark):
        return False

    def on_fire(self, ctx, watermark):
        return True


class SynchronizedProcessingTimeMachine(AlwaysMachine):
    """Runner's-discretion continuation of AfterProcessingTime: always ready."""

    __slots__ = ()


class ElementCountMachine(TriggerMachine):
    __slots__ = ('count', 'key')

    def __init__(self, path, count):
        super().__init__(path)
        if count < 1:
            raise ValueError('element_count must be positive, got %d' % count)
        self.count = count
        self.key = path + 'count:n'

    def on_element(self, ctx):
        st = ctx.state
        st[self.key] = st.get(self.key, 0) + 1

    def should_fire(self, ctx, watermark):
        return ctx.state.get(self.key, 0) >= self.count

    def on_fire(self, ctx, watermark):
        return True

    def reset(self, ctx):
        ctx.state.pop(self.key, None)

    def __repr__(self):
        return 'AfterCount(%d)' % self.count


def _compile_transforms(transforms):
    """Runner-API TimestampTransforms as ('delay', micros) / ('align',
    period micros, offset micros) tuples."""
    out = []
    for tt in transforms:
        which = tt.WhichOneof('timestamp_transform')
        if which == 'delay':
            out.append(('delay', tt.delay.delay_millis * 1000, 0))
        elif which == 'align_to' and tt.align_to.period > 0:
            out.append(('align', tt.align_to.period * 1000, tt.align_to.offset * 1000))
    return tuple(out)


def _apply_transforms(transforms, t):
    """Compiled transforms (delay, align_to) applied to ``t`` (micros)."""
    for kind, a, b in transforms:
        if kind == 'delay':
            t += a
        else:
            # Next instant >= t that is congruent to the offset modulo the period.
            r = (t - b) % a
            if r:
                t += a - r
    return t


class ProcessingTimeMachine(TriggerMachine):
    """Fires once the clock passes (first element's processing time +
    transforms); finishes when it fires."""

    __slots__ = ('transforms', 'protos', 'key', 'timer')

    def __init__(self, path, transforms):
        super().__init__(path)
        self.protos = tuple(transforms)
        self.transforms = _compile_transforms(self.protos)
        self.key = path + 'deadline:pt'
        self.timer = path + 'pt'

    def on_element(self, ctx):
        if self.key not in ctx.state:
            deadline = _apply_transforms(self.transforms, ctx.now())
            ctx.state[self.key] = deadline
            ctx.set_timer(self.timer, PROCESSING, deadline)

    def on_merge(self, ctx, merged_windows):
        deadline = ctx.state.get(self.key)
        if deadline is not None:
            ctx.set_timer(self.timer, PROCESSING, deadline)

    def should_fire(self, ctx, watermark):
        deadline = ctx.state.get(self.key)
        return deadline is not None and ctx.now() >= deadline

    def on_fire(self, ctx, watermark):
        return True

    def reset(self, ctx):
        ctx.state.pop(self.key, None)
        ctx.clear_timer(self.timer, PROCESSING)

    def __repr__(self):
        return 'AfterProcessingTime(%s)' % (', '.join(str(t).strip().replace('\n', ' ') for t in self.protos))


class RepeatMachine(TriggerMachine):
    __slots__ = ('sub', 'has_ontime_pane')

    def __init__(self, path, sub):
        super().__init__(path)
        self.sub = sub
        self.has_ontime_pane = sub.has_ontime_pane

    def on_element(self, ctx):
        self.sub.on_element(ctx)

    def on_merge(self, ctx, merged_windows):
        self.sub.on_merge(ctx, merged_windows)

    def should_fire(self, ctx, watermark):
        return self.sub.should_fire(ctx, watermark)

    def on_fire(self, ctx, watermark):
        if self.sub.on_fire(ctx, watermark):
            self.sub.reset(ctx)
        return False

    def reset(self, ctx):
        self.sub.reset(ctx)

    def children(self):
        return (self.sub,)


class AfterEndOfWindowMachine(TriggerMachine):
    """AfterWatermark with optional early and late firings (each repeated)."""

    __slots__ = ('early', 'late', 'late_key', 'timer')
    has_ontime_pane = True

    def __init__(self, path, early, late):
        super().__init__(path)
        self.early = early
        self.late = late
        self.late_key = path + 'late:late'
        self.timer = path + 'eow'

    def _is_late(self, ctx):
        return self.late is not None and ctx.state.get(self.late_key, False)

    def on_element(self, ctx):
        if self._is_late(ctx):
            self.late.on_element(ctx)
        else:
            ctx.set_timer(self.timer, WATERMARK, ctx.end)
            if self.early is not None:
                self.early.on_element(ctx)

    def on_merge(self, ctx, merged_windows):
        if self._is_late(ctx):
            self.late.on_merge(ctx, merged_windows)
        else:
            if any(w.end.micros != ctx.end for w in merged_windows):
                # The merged window's end moved; the next element re-arms it.
                ctx.clear_timer(self.timer, WATERMARK)
            if self.early is not None:
                self.early.on_merge(ctx, merged_windows)

    def should_fire(self, ctx, watermark):
        if self._is_late(ctx):
            return self.late.should_fire(ctx, watermark)
        if watermark >= ctx.end:
            ctx.clear_timer(self.timer, WATERMARK)
            return True
        if self.early is not None:
            return self.early.should_fire(ctx, watermark)
        return False

    def on_fire(self, ctx, watermark):
        if self._is_late(ctx):
            return self.late.on_fire(ctx, watermark)
        if watermark >= ctx.end:
            ctx.state[self.late_key] = True
            return self.late is None
        if self.early is not None:
            self.early.on_fire(ctx, watermark)
        return False

    def reset(self, ctx):
        ctx.state.pop(self.late_key, None)
        if self.early is not None:
            self.early.reset(ctx)
        if self.late is not None:
            self.late.reset(ctx)

    def children(self):
        return tuple(c for c in (self.early, self.late) if c is not None)

    def __repr__(self):
        return 'AfterEndOfWindow(early=%r, late=%r)' % (self.early, self.late)


class _ParallelMachine(TriggerMachine):
    __slots__ = ('subs', 'has_ontime_pane')
    combine = None

    def __init__(self, path, subs):
        super().__init__(path)
        self.subs = tuple(subs)
        self.has_ontime_pane = any(s.has_ontime_pane for s in self.subs)

    def on_element(self, ctx):
        for s in self.subs:
            s.on_element(ctx)

    def on_merge(self, ctx, merged_windows):
        for s in self.subs:
            s.on_merge(ctx, merged_windows)

    def should_fire(self, ctx, watermark):
        return type(self).combine(s.should_fire(ctx, watermark) for s in self.subs)

    def on_fire(self, ctx, watermark):
        finished = [s.on_fire(ctx, watermark) for s in self.subs if s.should_fire(ctx, watermark)]
        return type(self).combine(finished)

    def reset(self, ctx):
        for s in self.subs:
            s.reset(ctx)

    def children(self):
        return self.subs


class AfterAnyMachine(_ParallelMachine):
    """Ready when any sub-trigger is ready; finished when a fired one finished."""

    __slots__ = ()
    combine = any


class AfterAllMachine(_ParallelMachine):
    """Ready when all sub-triggers are ready; finished when all fired ones did."""

    __slots__ = ()
    combine = all


class OrFinallyMachine(AfterAnyMachine):
    """main.orFinally(until): AfterAny(main, until)."""

    __slots__ = ()


class AfterEachMachine(TriggerMachine):
    """Runs sub-triggers in sequence; finished after the last one finishes."""

    __slots__ = ('subs', 'key', 'has_ontime_pane')

    def __init__(self, path, subs):
        super().__init__(path)
        self.subs = tuple(subs)
        self.key = path + 'index:each'
        self.has_ontime_pane = any(s.has_ontime_pane for s in self.subs)

    def _current(self, ctx):
        ix = ctx.state.get(self.key, 0)
        return ix, (self.subs[ix] if ix < len(self.subs) else None)

    def on_element(self, ctx):
        _, sub = self._current(ctx)
        if sub is not None:
            sub.on_element(ctx)

    def on_merge(self, ctx, merged_windows):
        _, sub = self._current(ctx)
        if sub is not None:
            sub.on_merge(ctx, merged_windows)

    def should_fire(self, ctx, watermark):
        _, sub = self._current(ctx)
        return sub is not None and sub.should_fire(ctx, watermark)

    def on_fire(self, ctx, watermark):
        ix, sub = self._current(ctx)
        if sub is None:
            return True
        if sub.on_fire(ctx, watermark):
            ix += 1
            ctx.state[self.key] = ix
        return ix == len(self.subs)

    def reset(self, ctx):
        ctx.state.pop(self.key, None)
        for s in self.subs:
            s.reset(ctx)

    def children(self):
        return self.subs


def to_trigger_proto(trigger):
    """The runner-API Trigger proto of a proto, its bytes or a Beam TriggerFn."""
    if isinstance(trigger, beam_runner_api_pb2.Trigger):
        return trigger
    if isinstance(trigger, bytes):
        return beam_runner_api_pb2.Trigger.FromString(trigger)
    # A Beam TriggerFn: every one of them serializes without a context.
    return trigger.to_runner_api(None)


def compile_trigger(trigger, path=''):
    """Builds the state machine for a runner-API ``Trigger`` proto (or its
    serialized bytes, or a Beam Python ``TriggerFn``)."""
    p = to_trigger_proto(trigger)
    which = p.WhichOneof('trigger')
    if which == 'default':
        return DefaultMachine(path)
    if which == 'always':
        return AlwaysMachine(path)
    if which == 'never':
        return NeverMachine(path)
    if which == 'after_synchronized_processing_time':
        return SynchronizedProcessingTimeMachine(path)
    if which == 'element_count':
        return ElementCountMachine(path, p.element_count.element_count)
    if which == 'after_processing_time':
        return ProcessingTimeMachine(path, p.after_processing_time.timestamp_transforms)
    if which == 'repeat':
        return RepeatMachine(path, compile_trigger(p.repeat.subtrigger, path))
    if which == 'after_end_of_window':
        aeow = p.after_end_of_window

        def repeated(field, prefix):
            if not aeow.HasField(field):
                return None
            sub = compile_trigger(getattr(aeow, field), path + prefix)
            # Early and late firings always repeat (the model's definition).
            return sub if isinstance(sub, RepeatMachine) else RepeatMachine(path + prefix, sub)

        return AfterEndOfWindowMachine(path, repeated('early_firings', 'early/'), repeated('late_firings', 'late/'))
    if which in ('after_any', 'after_all', 'after_each'):
        subs = [compile_trigger(s, '%s%d/' % (path, i)) for i, s in enumerate(getattr(p, which).subtriggers)]
        cls = {'after_any': AfterAnyMachine, 'after_all': AfterAllMachine, 'after_each': AfterEachMachine}[which]
        return cls(path, subs)
    if which == 'or_finally':
        main = compile_trigger(p.or_finally.main, path + '0/')
        until = compile_trigger(getattr(p.or_finally, 'finally'), path + '1/')
        return OrFinallyMachine(path, [main, until])
    raise ValueError('Unsupported trigger: %s' % p)
