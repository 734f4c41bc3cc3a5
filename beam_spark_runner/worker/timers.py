"""Pending timers of a stateful stage: all of them at the end of bounded
input, or those due at a watermark and processing time in streaming.

The SDK reports timers it sets or clears; the latest write per
(transform, family, key, dynamic tag, window) wins and a clear removes it.
With bounded input the input watermark jumps to +infinity once every
element is processed, so every pending timer becomes due: they fire in
rounds (a round's callbacks may set new timers) until none is pending.
Within a round, timers are handed to the SDK in fire-timestamp order.
"""

from apache_beam.coders.coder_impl import create_InputStream, create_OutputStream


class PendingTimers:
    """Pending timers by (transform id, timer family id). Timers of the
    `last` families (a window-expiration callback's) are taken only when no
    timer of another family is due: they end what the others may still use."""

    def __init__(self, timer_coder_impls, last=()):
        self._impls = timer_coder_impls  # {(transform, family): coder impl}
        self._pending = {key: {} for key in timer_coder_impls}
        self._last = frozenset(last)

    @property
    def families(self):
        return list(self._impls)

    def record(self, transform_id, family_id, block):
        """Applies the timer writes of one Elements.Timers block."""
        impl = self._impls[(transform_id, family_id)]
        pending = self._pending[(transform_id, family_id)]
        stream = create_InputStream(block)
        while stream.size() > 0:
            timer = impl.decode_from_stream(stream, True)
            identity = _identity(timer)
            if timer.clear_bit:
                pending.pop(identity, None)
            else:
                pending[identity] = timer

    def set(self, family_key, timers):
        """Sets timers (decoded) of a family, as the SDK's writes would."""
        pending = self._pending[family_key]
        for timer in timers:
            pending[_identity(timer)] = timer

    def __bool__(self):
        return any(self._pending.values())

    def take_due(self, is_due=None):
        """Removes and returns the pending timers `is_due(family key, timer)`
        accepts (default: all), encoded per family, in fire order; those of
        the `last` families only if no other is due."""
        fired = self._take(is_due, [key for key in self._pending if key not in self._last])
        if fired or not self._last:
            return fired
        return self._take(is_due, [key for key in self._pending if key in self._last])

    def _take(self, is_due, families):
        fired = {}
        for key in families:
            pending = self._pending[key]
            due = [(identity, t) for identity, t in pending.items() if is_due is None or is_due(key, t)]
            if not due:
                continue
            out = create_OutputStream()
            for identity, timer in sorted(due, key=lambda d: _fire_order(d[1])):
                self._impls[key].encode_to_stream(timer, out, True)
                del pending[identity]
            fired[key] = [out.get()]
        return fired

    def drop(self, is_dropped):
        """Forgets the pending timers `is_dropped(timer)` accepts."""
        for pending in self._pending.values():
            for identity in [i for i, t in pending.items() if is_dropped(t)]:
                del pending[identity]

    def earliest_hold(self, families=None):
        """Micros of the earliest output-timestamp hold of a pending timer
        (of the given family keys only, when given); None when none is pending."""
        return self._earliest(lambda t: t.hold_timestamp, families)

    def earliest_fire(self, families=None):
        """Micros of the earliest fire timestamp of a pending timer (of the
        given family keys only, when given); None when none is pending."""
        return self._earliest(lambda t: t.fire_timestamp, families)

    def _earliest(self, timestamp_of, families):
        return min(
            (
                timestamp_of(t).micros
                for key, pending in self._pending.items()
                if families is None or key in families
                for t in pending.values()
            ),
            default=None,
        )

    def by_key(self, key_of):
        """Pending timers grouped by user key: {key: {family key: [timer]}};
        `key_of(family key, timer)` encodes a timer's key."""
        out = {}
        for family, pending in self._pending.items():
            for timer in pending.values():
                out.setdefault(key_of(family, timer), {}).setdefault(family, []).append(timer)
        return out

    def encode(self, timers_by_family):
        """{family key: [timer]} as `snapshot` gives it: {family key: [encoded timer]}."""
        return {
            family: [self._impls[family].encode_nested(t) for t in timers]
            for family, timers in timers_by_family.items()
        }

    def add(self, snapshot):
        """Adds the timers of a `snapshot()` result, keeping those pending."""
        for key, encoded in (snapshot or {}).items():
            impl = self._impls[key]
            for data in encoded:
                timer = impl.decode_nested(data)
                self._pending[key][_identity(timer)] = timer

    def snapshot(self):
        """Pending timers as {family key: [encoded timer]} (picklable)."""
        return {
            key: [self._impls[key].encode_nested(t) for t in pending.values()]
            for key, pending in self._pending.items()
            if pending
        }

    def restore(self, snapshot):
        for pending in self._pending.values():
            pending.clear()
        for key, encoded in (snapshot or {}).items():
            impl = self._impls[key]
            for data in encoded:
                timer = impl.decode_nested(data)
                self._pending[key][_identity(timer)] = timer


def _identity(timer):
    return timer.user_key, timer.dynamic_timer_tag, timer.windows[0]


def _fire_order(timer):
    return timer.fire_timestamp, timer.hold_timestamp
