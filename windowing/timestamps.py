"""Timestamp combiners, pane output timestamps and window garbage collection.

``OutputTimePolicy`` implements the runner-API ``OutputTime`` values
(END_OF_WINDOW, EARLIEST_IN_PANE, LATEST_IN_PANE) plus the Python SDK's
OUTPUT_AT_EARLIEST_TRANSFORMED (``WindowFn.get_transformed_output_time``).

Rules (the same the Python SDK's trigger driver applies, so panes agree):
 * each element contributes an output time to the window's *hold*:
   END_OF_WINDOW -> ``window.max_timestamp()``; EARLIEST/LATEST -> the element
   timestamp; EARLIEST_TRANSFORMED -> ``window_fn.get_transformed_output_time``;
 * an element whose output time is before the output watermark cannot hold it
   and contributes nothing (END_OF_WINDOW always contributes the window end);
 * holds combine by min (EARLIEST*) or max (END_OF_WINDOW, LATEST), also when
   windows merge;
 * a pane's timestamp is the combined hold, or ``window.max_timestamp()`` when
   no element could hold the watermark.
"""
import functools

from apache_beam.transforms.window import TimestampCombiner
from apache_beam.utils.timestamp import MAX_TIMESTAMP
from apache_beam.utils.timestamp import Duration

END_OF_WINDOW = TimestampCombiner.OUTPUT_AT_EOW
EARLIEST = TimestampCombiner.OUTPUT_AT_EARLIEST
LATEST = TimestampCombiner.OUTPUT_AT_LATEST
EARLIEST_TRANSFORMED = TimestampCombiner.OUTPUT_AT_EARLIEST_TRANSFORMED


class OutputTimePolicy(object):
  """Immutable: how a window's elements determine its panes' timestamps."""
  __slots__ = ('combiner', 'window_fn', 'kind')

  def __init__(self, combiner, window_fn=None):
    if combiner is None:
      combiner = END_OF_WINDOW
    if combiner not in (END_OF_WINDOW, EARLIEST, LATEST, EARLIEST_TRANSFORMED):
      raise ValueError('Unknown timestamp combiner %r' % (combiner,))
    self.combiner = combiner
    self.window_fn = window_fn
    self.kind = {END_OF_WINDOW: 'eow', EARLIEST: 'min', LATEST: 'max',
                 EARLIEST_TRANSFORMED: 'tmin'}[combiner]

  @property
  def depends_only_on_window(self):
    return self.kind == 'eow'

  def combine(self, a, b):
    """Combines two holds (either may be None)."""
    if a is None:
      return b
    if b is None:
      return a
    if self.kind in ('min', 'tmin'):
      return a if a <= b else b
    return a if a >= b else b

  def hold_for(self, window, timestamps, output_watermark):
    """Hold contributed by elements at ``timestamps`` added to ``window``."""
    if self.kind == 'eow':
      return window.max_timestamp()
    hold = None
    for ts in timestamps:
      if self.kind == 'tmin':
        ts = self.window_fn.get_transformed_output_time(window, ts)
      if ts >= output_watermark:
        hold = self.combine(hold, ts)
    return hold

  def pane_timestamp(self, window, hold):
    """Output timestamp of a pane of ``window`` whose combined hold is ``hold``."""
    return window.max_timestamp() if hold is None else hold


@functools.lru_cache(maxsize=1 << 14)
def gc_time(window, allowed_lateness):
  """Last watermark at which ``window`` still accepts data.

  ``window.max_timestamp() + allowed_lateness`` (the Java SDK's rule), capped at
  MAX_TIMESTAMP so the global window is never collected before the end of time.
  Memoized: a streaming GroupByKey asks for the same few windows once per key
  and batch, and Timestamp arithmetic costs microseconds per operation.
  """
  mt = window.max_timestamp()
  lateness = Duration.of(allowed_lateness)
  if mt >= MAX_TIMESTAMP - lateness:
    return MAX_TIMESTAMP
  return mt + lateness


def is_expired(window, allowed_lateness, input_watermark):
  """True once the input watermark is strictly past ``gc_time(window)``: the
  window's state may be dropped and new elements for it are discarded."""
  return input_watermark > gc_time(window, allowed_lateness)
