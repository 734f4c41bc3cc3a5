"""Bounded GroupByKey: all panes of one key, in one call.

``group_by_window`` is the contract the Spark batch runner calls per key.
Batch semantics are the streaming driver's with all input arriving while the
input watermark is -infinity, then the watermark jumping to +infinity;
processing time does not advance.  So every window closes in that one
advance (``triggers.closing``): a window whose trigger has not finished
emits its final pane, ON_TIME and ``is_last``, even if its trigger never
fired (a ``Never`` trigger, an ``AfterCount(n)`` short of n elements, a
processing-time trigger).  Output values are lists.

Fast paths (no per-element state machine):
 * Beam's "default windowing" (global window, default trigger, discarding,
   end-of-window, no lateness) and the global window with ``AfterCount(1)``
   or ``Always`` (Beam's batch driver passes these straight through): one
   pane, timestamp MIN_TIMESTAMP, ``PaneInfo(first, last, ON_TIME, 0, 0)``;
 * any non-merging WindowFn with the default trigger (any accumulation mode:
   a batch window fires exactly once): one ON_TIME pane per window, last, in
   order of first appearance, timestamped by the timestamp combiner.
Everything else (merging windows, other triggers, RETRACTING with repeated
triggers) runs the general reduce driver.

Where this differs from Beam's Python batch driver
(``create_trigger_driver(windowing, is_batch=True).process_entire_key``):
it marks the on-time pane of a non-global window ``is_last``, and it emits
the final pane of a window whose trigger did not finish, where Beam's Python
runners drop that window's data (Beam's Java runners emit it).
"""

from apache_beam.transforms.window import GlobalWindow
from apache_beam.transforms.window import GlobalWindows
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

from triggers import panes
from triggers.closing import PYTHON_SDK_DEFAULT
from triggers.driver import ReduceSpec
from triggers.machines import to_trigger_proto
from windowing.timestamps import OutputTimePolicy

_GLOBAL_TUPLE = (GlobalWindow(),)


def _trigger_kind(triggerfn):
    p = to_trigger_proto(triggerfn)
    which = p.WhichOneof('trigger')
    if which == 'element_count' and p.element_count.element_count == 1:
        return 'count1'
    return which


def group_by_window(windowing, key, windowed_values, closing=PYTHON_SDK_DEFAULT):
    """Yields ``WindowedValue((key, values), timestamp, (window,), pane_info)``
    for every pane a bounded GroupByKey of this key produces (see module doc).

    ``windowing``: an ``apache_beam.transforms.core.Windowing``;
    ``windowed_values``: WindowedValues whose ``.value`` is the grouped value;
    ``closing``: the windowing strategy's ``triggers.closing.ClosingRules``
    (``Windowing`` does not carry them)."""
    window_fn = windowing.windowfn
    kind = _trigger_kind(windowing.triggerfn)
    is_global = type(window_fn) is GlobalWindows

    if is_global and (windowing.is_default() or kind in ('count1', 'always')):
        values = [wv.value for wv in windowed_values]
        yield WindowedValue((key, values), MIN_TIMESTAMP, _GLOBAL_TUPLE, panes.ONLY_FIRING)
        return

    if kind == 'default' and not window_fn.is_merging():
        yield from _default_trigger_panes(windowing, key, windowed_values)
        return

    spec = ReduceSpec.from_windowing(windowing, closing=closing)
    reducer = spec.new_reducer()
    for wv in reducer.process(windowed_values, MIN_TIMESTAMP):
        yield wv.with_value((key, wv.value))
    for wv in reducer.finish():
        yield wv.with_value((key, wv.value))


def one_end_of_window_pane(windowing):
    """True when ``group_by_window`` gives each window of a key exactly one
    pane, ``panes.BATCH_ON_TIME``, timestamped at the window's
    ``max_timestamp()``, whatever its values (a non-merging WindowFn with
    the default trigger and the end-of-window timestamp combiner, not the
    global window's default windowing, which the first fast path serves).
    A runner may then group by key and window and hand each group's values
    on without looking at them: this is what lets a bounded GroupByKey
    stream a window's values from the shuffle."""
    window_fn = windowing.windowfn
    if type(window_fn) is GlobalWindows or window_fn.is_merging():
        return False
    if _trigger_kind(windowing.triggerfn) != 'default':
        return False
    return OutputTimePolicy(windowing.timestamp_combiner, window_fn).kind == 'eow'


def _default_trigger_panes(windowing, key, windowed_values):
    groups = {}
    combiner = windowing.timestamp_combiner
    policy = OutputTimePolicy(combiner, windowing.windowfn)
    kind = policy.kind
    if kind == 'eow':
        for wv in windowed_values:
            v = wv.value
            for w in wv.windows:
                g = groups.get(w)
                if g is None:
                    groups[w] = [v]
                else:
                    g.append(v)
        pane = panes.BATCH_ON_TIME
        for w, values in groups.items():
            yield WindowedValue((key, values), w.max_timestamp(), (w,), pane)
        return

    # EARLIEST / LATEST / EARLIEST_TRANSFORMED: also track the hold.
    holds = {}
    transformed = kind == 'tmin'
    earliest = kind != 'max'
    for wv in windowed_values:
        v = wv.value
        ts = wv.timestamp
        for w in wv.windows:
            t = windowing.windowfn.get_transformed_output_time(w, ts) if transformed else ts
            g = groups.get(w)
            if g is None:
                groups[w] = [v]
                holds[w] = t
            else:
                g.append(v)
                h = holds[w]
                if (t < h) if earliest else (t > h):
                    holds[w] = t
    pane = panes.BATCH_ON_TIME
    for w, values in groups.items():
        yield WindowedValue((key, values), holds[w], (w,), pane)
