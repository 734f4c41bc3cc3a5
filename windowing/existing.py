"""A WindowFn that keeps the windows elements are already in.

Beam's ``WindowInto`` assigns windows from each element's timestamp; there is
no public way to change only a PCollection's trigger, accumulation mode or
allowed lateness while keeping its windows. ``WindowInto(ExistingWindows(
coder), trigger=...)`` does that: ``assign`` returns the element's current
window (Beam's ``WindowIntoFn`` calls it once per window an element is in),
and the WindowFn never merges, so windows that an upstream merging WindowFn
produced (sessions already merged per key) stay exactly as they are.

The runner's exactly-once file sinks group their input this way: the user's
trigger already made the panes, and the sink only collects what arrived.
"""

from apache_beam.transforms.window import NonMergingWindowFn


class ExistingWindows(NonMergingWindowFn):
    """Assigns each element the window it is in; encodes windows with
    `window_coder` (the coder of the WindowFn that made them)."""

    def __init__(self, window_coder):
        self._window_coder = window_coder

    def assign(self, context):
        if context.window is None:
            raise ValueError("ExistingWindows needs the element's current window, and none was given")
        return [context.window]

    def get_window_coder(self):
        return self._window_coder

    def __eq__(self, other):
        return type(self) is type(other) and self._window_coder == other._window_coder

    def __hash__(self):
        return hash((type(self), self._window_coder))

    def __repr__(self):
        return "ExistingWindows(%r)" % (self._window_coder,)
