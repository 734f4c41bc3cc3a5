"""When a window emits a pane and how it closes: Beam's ``ClosingBehavior``
and ``OnTimeBehavior`` (the two fields of a runner-API ``WindowingStrategy``).

The model (Beam Java's ``ReduceFnRunner``, which every Beam Java runner
shares):

 * a window *closes* when the input watermark passes its garbage-collection
   time (``window.max_timestamp() + allowed_lateness``).  If its trigger has
   not finished by then, the window emits one last pane, marked ``is_last``,
   whatever the trigger says: data that arrived after the last firing is
   never silently dropped;
 * a pane is *empty* when no element arrived since the window's previous
   firing (in ACCUMULATING mode its values are still everything so far);
 * a non-empty pane is always emitted; an empty pane only if it is the
   ON_TIME pane and ``on_time_behavior`` is FIRE_ALWAYS, or the final pane
   and ``closing_behavior`` is EMIT_ALWAYS.  A pane not emitted leaves no
   trace: the pane index and non-speculative index do not advance.

Beam's Python SDK writes EMIT_ALWAYS and FIRE_ALWAYS into every windowing
strategy (``Windowing.to_runner_api``); pipelines from other SDKs or built
as protos may carry either value.  UNSPECIFIED is not a behaviour:
``ClosingRules.from_proto`` refuses it.
"""

from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.utils.windowed_value import PaneInfoTiming

EMIT_ALWAYS = beam_runner_api_pb2.ClosingBehavior.EMIT_ALWAYS
EMIT_IF_NONEMPTY = beam_runner_api_pb2.ClosingBehavior.EMIT_IF_NONEMPTY
FIRE_ALWAYS = beam_runner_api_pb2.OnTimeBehavior.FIRE_ALWAYS
FIRE_IF_NONEMPTY = beam_runner_api_pb2.OnTimeBehavior.FIRE_IF_NONEMPTY

_ON_TIME = PaneInfoTiming.ON_TIME


class UnspecifiedBehavior(ValueError):
    """A windowing strategy whose closing or on-time behaviour is UNSPECIFIED
    (or a value this version does not know)."""


class ClosingRules(object):
    """Immutable: the closing and on-time behaviour of one windowing strategy.

    ``closes_windows``: the reduce driver emits a window's final pane when the
    window expires (the model; a subclass may turn it off to reproduce a
    runner that does not, see tests/core/differential.py)."""

    __slots__ = ('closing_behavior', 'on_time_behavior')
    closes_windows = True

    def __init__(self, closing_behavior=EMIT_ALWAYS, on_time_behavior=FIRE_ALWAYS):
        if closing_behavior not in (EMIT_ALWAYS, EMIT_IF_NONEMPTY):
            raise UnspecifiedBehavior(
                'closing_behavior must be EMIT_ALWAYS (1) or EMIT_IF_NONEMPTY (2), got %r' % (closing_behavior,)
            )
        if on_time_behavior not in (FIRE_ALWAYS, FIRE_IF_NONEMPTY):
            raise UnspecifiedBehavior(
                'on_time_behavior must be FIRE_ALWAYS (1) or FIRE_IF_NONEMPTY (2), got %r' % (on_time_behavior,)
            )
        self.closing_behavior = closing_behavior
        self.on_time_behavior = on_time_behavior

    @classmethod
    def from_proto(cls, windowing_strategy):
        """The rules of a runner-API ``WindowingStrategy``; raises
        ``UnspecifiedBehavior`` naming the field that is not set."""
        return cls(windowing_strategy.closing_behavior, windowing_strategy.on_time_behavior)

    def should_emit(self, is_empty, is_final, timing):
        """Is a pane with these properties output (Java's ``needToEmit``)?"""
        if not is_empty:
            return True
        if timing == _ON_TIME and self.on_time_behavior == FIRE_ALWAYS:
            return True
        return is_final and self.closing_behavior == EMIT_ALWAYS

    def __eq__(self, other):
        return (
            type(other) is type(self)
            and other.closing_behavior == self.closing_behavior
            and other.on_time_behavior == self.on_time_behavior
        )

    def __hash__(self):
        return hash((type(self), self.closing_behavior, self.on_time_behavior))

    def __repr__(self):
        return 'ClosingRules(%s, %s)' % (
            beam_runner_api_pb2.ClosingBehavior.Enum.Name(self.closing_behavior),
            beam_runner_api_pb2.OnTimeBehavior.Enum.Name(self.on_time_behavior),
        )

    def __reduce__(self):
        return type(self), (self.closing_behavior, self.on_time_behavior)


# What Beam's Python SDK writes into every windowing strategy.
PYTHON_SDK_DEFAULT = ClosingRules(EMIT_ALWAYS, FIRE_ALWAYS)
