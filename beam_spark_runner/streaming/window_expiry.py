"""Window expiry of a stateful DoFn in streaming, as Beam's runners do it
(runners-core StatefulDoFnRunner): once the input watermark passes a
window's end plus the allowed lateness, the window's user state and pending
timers are dropped, and input that arrives for it later is droppably late
and dropped. The global window never expires (its state lives as long as
the pipeline). Plain Python: the operator hands in the harness, the pending
timers and the watermark."""

from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.utils.windowed_value import WindowedValue

from beam_spark_runner.worker import context

_USER_STATE_TYPES = ("bag_user_state", "multimap_user_state", "multimap_keys_user_state", "ordered_list_user_state")


def main_input_strategies(descriptor, transform, payload):
    """The windowing strategies of a ParDo's main (non-side) inputs."""
    return [
        descriptor.windowing_strategies[descriptor.pcollections[pc].windowing_strategy_id]
        for tag, pc in transform.inputs.items()
        if tag not in payload.side_inputs
    ]


class WindowExpiry:
    """Built from the stage's stateful ParDo: its main input's windowing."""

    def __init__(self, descriptor, components: bytes):
        self.enabled = False
        for transform in descriptor.transforms.values():
            if transform.spec.urn != common_urns.primitives.PAR_DO.urn:
                continue
            payload = beam_runner_api_pb2.ParDoPayload.FromString(transform.spec.payload)
            if not (payload.state_specs or payload.timer_family_specs):
                continue
            strategy = main_input_strategies(descriptor, transform, payload)[0]
            window_coder = context.components_context(components).coders[strategy.window_coder_id]
            self._window_coder = window_coder
            self._lateness_us = strategy.allowed_lateness * 1000
            self.enabled = strategy.window_fn.urn != common_urns.global_windows.urn
            self._decoded = {}
            return

    def expired(self, window, wm):
        """Is `window` past its end plus the allowed lateness at watermark `wm`?"""
        return window.max_timestamp().micros + self._lateness_us < wm

    def _window(self, encoded):
        window = self._decoded.get(encoded)
        if window is None:
            window = self._decoded[encoded] = self._window_coder.decode(encoded)
        return window

    def earliest_expiry(self, encoded_windows, windows=()):
        """The earliest watermark (micros) at which one of these windows
        (encoded, as in state keys, or decoded) has expired; None if none."""
        ends = [self._window(e).max_timestamp().micros for e in set(encoded_windows)]
        ends.extend(w.max_timestamp().micros for w in windows)
        return min(ends) + self._lateness_us + 1 if ends else None

    def collect(self, harness, timers, wm):
        """Drops the user state and pending timers of windows expired at `wm`."""

        def state_expired(key):
            which = key.WhichOneof("type")
            if which not in _USER_STATE_TYPES:
                return False
            return self.expired(self._window(getattr(key, which).window), wm)

        harness.drop_user_state(state_expired)
        if timers is not None:
            timers.drop(lambda timer: all(self.expired(w, wm) for w in timer.windows))

    def late_windows(self, wv, wm):
        """How many of `wv`'s windows the watermark `wm` has passed (max
        timestamp behind it) without their having expired."""
        return sum(1 for w in wv.windows if w.max_timestamp().micros < wm and not self.expired(w, wm))

    def live(self, wv, wm):
        """`wv` with only its windows not expired at `wm` (None: none left)."""
        windows = [w for w in wv.windows if not self.expired(w, wm)]
        if len(windows) == len(wv.windows):
            return wv
        return WindowedValue(wv.value, wv.timestamp, windows, wv.pane_info) if windows else None
