"""Engine-agnostic trigger state machines, panes, accumulation and the per-key
reduce driver (no Spark, no gRPC).

Public API:
 * ``ReduceSpec`` / ``KeyReducer`` (triggers.driver): the per-key reduce driver;
 * ``KeyState`` / ``ManualClock`` (triggers.state): its state-and-timers interface;
 * ``ClosingRules`` (triggers.closing): when a window emits a pane, and its
   final pane (the windowing strategy's closing and on-time behaviour);
 * ``compile_trigger`` (triggers.machines): runner-API Trigger -> state machine;
 * ``group_by_window`` (triggers.batch): bounded GroupByKey of one key;
 * ``DISCARDING``, ``ACCUMULATING``, ``RETRACTING`` (runner-API
   AccumulationMode values 1, 2, 3);
 * ``Retraction``, ``is_retraction``, ``unwrap``, ``map_pane``,
   ``retractable``, ``combine`` (triggers.retractions, as docs/retractions.md
   lists them).
"""

from triggers.closing import ClosingRules
from triggers.driver import ACCUMULATING
from triggers.driver import DISCARDING
from triggers.driver import RETRACTING
from triggers.driver import KeyReducer
from triggers.driver import ReduceSpec
from triggers.machines import compile_trigger
from triggers.retractions import Retraction
from triggers.retractions import combine
from triggers.retractions import is_retraction
from triggers.retractions import map_pane
from triggers.retractions import retractable
from triggers.retractions import unwrap
from triggers.state import KeyState
from triggers.state import ManualClock

__all__ = [
    'ACCUMULATING',
    'DISCARDING',
    'RETRACTING',
    'KeyReducer',
    'ReduceSpec',
    'compile_trigger',
    'Retraction',
    'is_retraction',
    'unwrap',
    'map_pane',
    'retractable',
    'combine',
    'KeyState',
    'ManualClock',
    'group_by_window',
    'ClosingRules',
]


def group_by_window(windowing, key, windowed_values):
    """See ``triggers.batch.group_by_window`` (imported lazily)."""
    from triggers.batch import group_by_window as impl

    return impl(windowing, key, windowed_values)
