"""Bounded GroupByKey: all panes of one key, in one call.

``group_by_window`` is the contract the Spark batch runner calls per key.  It
yields exactly the panes Beam's
``create_trigger_driver(windowing, is_batch=True).process_entire_key`` yields
(same windows, values, timestamps and PaneInfo): all input arrives while the
input watermark is -infinity, then the watermark jumps to +infinity; processing
time does not advance.  Output values are lists.

Fast paths (no per-element state machine):
 * Beam's "default windowing" (global window, default trigger, discarding,
   end-of-window, no lateness) and the global window with ``AfterCount(1)``,
   ``Always`` or ``Never`` (Beam's batch driver passes these straight through):
   one pane, timestamp MIN_TIMESTAMP, ``PaneInfo(first, last, ON_TIME, 0, 0)``;
 * any non-merging WindowFn with the default trigger (any accumulation mode:
   a batch window fires exactly once): one ON_TIME pane per window, in order of
   first appearance, timestamped by the timestamp combiner.
Everything else (merging windows, other triggers, RETRACTING with repeated
triggers) runs the general reduce driver.
"""
from apache_beam.transforms.window import GlobalWindow
from apache_beam.transforms.window import GlobalWindows
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

from triggers import panes
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


def group_by_window(windowing, key, windowed_values):
  """Yields ``WindowedValue((key, values), timestamp, (window,), pane_info)``
  for every pane a bounded GroupByKey of this key produces (see module doc).

  ``windowing``: an ``apache_beam.transforms.core.Windowing``;
  ``windowed_values``: WindowedValues whose ``.value`` is the grouped value."""
  window_fn = windowing.windowfn
  kind = _trigger_kind(windowing.triggerfn)
  is_global = type(window_fn) is GlobalWindows

  if is_global and (windowing.is_default()
                    or kind in ('count1', 'always', 'never')):
    values = [wv.value for wv in windowed_values]
    yield WindowedValue((key, values), MIN_TIMESTAMP, _GLOBAL_TUPLE,
                        panes.ONLY_FIRING)
    return

  if kind == 'default' and not window_fn.is_merging():
    yield from _default_trigger_panes(windowing, key, windowed_values)
    return

  spec = _spec_for(windowing, kind)
  reducer = spec.new_reducer()
  for wv in reducer.process(windowed_values, MIN_TIMESTAMP):
    yield wv.with_value((key, wv.value))
  for wv in reducer.finish():
    yield wv.with_value((key, wv.value))


def _spec_for(windowing, kind):
  trigger = windowing.triggerfn
  if kind == 'never':
    # As Beam's batch driver: a Never trigger would drop everything in batch.
    from apache_beam.transforms.trigger import Always
    trigger = Always()
  return ReduceSpec(windowing.windowfn, trigger, windowing.accumulation_mode,
                    windowing.timestamp_combiner, windowing.allowed_lateness)


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
      t = windowing.windowfn.get_transformed_output_time(w, ts) if transformed \
          else ts
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
