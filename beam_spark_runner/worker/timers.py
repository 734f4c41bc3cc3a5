"""Timers of one partition of a stateful stage, for bounded input.

The SDK reports timers it sets or clears; the latest write per
(transform, family, key, dynamic tag, window) wins and a clear removes it.
With bounded input the input watermark jumps to +infinity once every
element is processed, so every pending timer becomes due: they fire in
rounds (a round's callbacks may set new timers) until none is pending.
Within a round, timers are handed to the SDK in fire-timestamp order.
"""
from apache_beam.coders.coder_impl import create_InputStream, create_OutputStream


class PendingTimers:
    """Pending timers by (transform id, timer family id)."""

    def __init__(self, timer_coder_impls):
        self._impls = timer_coder_impls  # {(transform, family): coder impl}
        self._pending = {key: {} for key in timer_coder_impls}

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
            identity = (timer.user_key, timer.dynamic_timer_tag, timer.windows[0])
            if timer.clear_bit:
                pending.pop(identity, None)
            else:
                pending[identity] = timer

    def __bool__(self):
        return any(self._pending.values())

    def take_due(self):
        """Removes and returns every pending timer, encoded per family."""
        fired = {}
        for key, pending in self._pending.items():
            if not pending:
                continue
            out = create_OutputStream()
            for timer in sorted(pending.values(), key=_fire_order):
                self._impls[key].encode_to_stream(timer, out, True)
            fired[key] = [out.get()]
            pending.clear()
        return fired


def _fire_order(timer):
    return timer.fire_timestamp, timer.hold_timestamp
