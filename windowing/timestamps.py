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

from apache_beam.transforms.window import GlobalWindow
from apache_beam.transforms.window import TimestampCombiner
from apache_beam.utils.timestamp import MAX_TIMESTAMP
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.timestamp import Duration
from apache_beam.utils.timestamp import Timestamp

END_OF_WINDOW = TimestampCombiner.OUTPUT_AT_EOW
EARLIEST = TimestampCombiner.OUTPUT_AT_EARLIEST
LATEST = TimestampCombiner.OUTPUT_AT_LATEST
EARLIEST_TRANSFORMED = TimestampCombiner.OUTPUT_AT_EARLIEST_TRANSFORMED

# The model's time range in integer microseconds. The reduce driver keeps
# every time as such an int: Beam 2.77's Timestamp is a Python object whose
# comparisons, hashing and pickling cost microseconds each.
MIN_US = MIN_TIMESTAMP.micros
MAX_US = MAX_TIMESTAMP.micros
# The global window's max timestamp: a day before MAX_US in Beam. No window
# is kept past it, so a watermark at the end of time closes every window.
GLOBAL_MAX_US = GlobalWindow().max_timestamp().micros


def to_us(t):
    """Micros of a Timestamp, or of a number of seconds (``Timestamp.of``)."""
    return Timestamp.of(t).micros


_FROM_US_LIMIT = 1 << 12
_from_us = {}


def from_us(us):
    """The Timestamp of ``us`` micros. Memoized (Timestamps are immutable): the
    panes of a micro-batch share a few timestamps, and building one costs
    more than a microsecond."""
    t = _from_us.get(us)
    if t is None:
        if len(_from_us) >= _FROM_US_LIMIT:
            _from_us.clear()
        t = _from_us[us] = Timestamp(micros=us)
    return t


class OutputTimePolicy(object):
    """Immutable: how a window's elements determine its panes' timestamps.

    Holds and watermarks are integer micros (see ``MIN_US``)."""

    __slots__ = ('combiner', 'window_fn', 'kind')

    def __init__(self, combiner, window_fn=None):
        if combiner is None:
            combiner = END_OF_WINDOW
        if combiner not in (END_OF_WINDOW, EARLIEST, LATEST, EARLIEST_TRANSFORMED):
            raise ValueError('Unknown timestamp combiner %r' % (combiner,))
        self.combiner = combiner
        self.window_fn = window_fn
        self.kind = {END_OF_WINDOW: 'eow', EARLIEST: 'min', LATEST: 'max', EARLIEST_TRANSFORMED: 'tmin'}[combiner]

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

    def hold_for(self, window, window_max_us, timestamps, output_watermark_us):
        """Hold (micros) contributed by elements at ``timestamps`` (Timestamps)
        added to ``window``, whose max timestamp is ``window_max_us``."""
        if self.kind == 'eow':
            return window_max_us
        hold = None
        transformed = self.kind == 'tmin'
        for ts in timestamps:
            if transformed:
                ts = self.window_fn.get_transformed_output_time(window, ts)
            us = ts.micros
            if us >= output_watermark_us:
                hold = self.combine(hold, us)
        return hold


def gc_time_us(window_max_us, allowed_lateness_us):
    """``gc_time`` on micros: the window's max timestamp plus the lateness,
    capped at the global window's max timestamp."""
    if window_max_us >= GLOBAL_MAX_US - allowed_lateness_us:
        return max(window_max_us, GLOBAL_MAX_US)
    return window_max_us + allowed_lateness_us


@functools.lru_cache(maxsize=1 << 14)
def gc_time(window, allowed_lateness):
    """Last watermark at which ``window`` still accepts data.

    ``window.max_timestamp() + allowed_lateness`` (the Java SDK's rule), capped at
    the global window's max timestamp (as Java's ``LateDataUtils``), so the
    global window lives until the watermark reaches the end of time, and a
    watermark at the end of time closes every window.
    """
    return from_us(gc_time_us(window.max_timestamp().micros, Duration.of(allowed_lateness).micros))


def is_expired(window, allowed_lateness, input_watermark):
    """True once the input watermark is strictly past ``gc_time(window)``: the
    window's state may be dropped and new elements for it are discarded."""
    return input_watermark > gc_time(window, allowed_lateness)
