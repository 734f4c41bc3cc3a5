"""Pane info (``apache_beam.utils.windowed_value.PaneInfo``) for a firing.

Rules (the Python SDK's, kept so panes agree with Beam's transcripts):
 * ``index`` counts every pane the window emitted (0, 1, 2, ...);
 * a pane is EARLY while the output watermark has not passed the window's
   ``max_timestamp()``; its ``nonspeculative_index`` is -1;
 * otherwise ``nonspeculative_index`` counts the non-early panes; the first of
   them is ON_TIME if it was fired by a watermark timer (or by the window's
   closing in the same watermark advance that passed the end of the window),
   every other is LATE;
 * ``is_first`` is ``index == 0``; ``is_last`` is "nothing can follow": the
   trigger finished or the window closed.
A pane that is described but not emitted (see ``triggers.closing``) does
not advance the counters: ``describe`` reads them, ``record`` advances them.
Pane counters reset when windows merge into a new window.
"""

from apache_beam.utils.windowed_value import PaneInfo
from apache_beam.utils.windowed_value import PaneInfoTiming

EARLY = PaneInfoTiming.EARLY
ON_TIME = PaneInfoTiming.ON_TIME
LATE = PaneInfoTiming.LATE

_CACHE = {}


def pane_info(is_first, is_last, timing, index, nonspec):
    """Interned PaneInfo (PaneInfo is immutable, so sharing is safe)."""
    k = (is_first, is_last, timing, index, nonspec)
    p = _CACHE.get(k)
    if p is None:
        p = PaneInfo(is_first, is_last, timing, index, nonspec)
        if len(_CACHE) < 4096:
            _CACHE[k] = p
    return p


def describe(st, is_last, output_watermark, on_time_eligible):
    """PaneInfo of the next pane of the window whose state (a
    ``triggers.state.WindowState``) is ``st``, without changing ``st``.
    ``output_watermark``: micros; ``on_time_eligible``: the pane is fired by
    the watermark reaching the end of the window."""
    index = st.index
    nonspec = st.nonspec
    if output_watermark <= st.max:
        timing = EARLY
        if not nonspec:
            nonspec = -1
        # else: the watermark went back (or a merge moved the window end
        # forward) after a non-early pane: keep counting rather than reuse an
        # index.
    else:
        timing = ON_TIME if on_time_eligible and nonspec == 0 else LATE
    return pane_info(index == 0, is_last, timing, index, nonspec)


def record(st, pane):
    """Advances the counters in ``st`` past ``pane``, which was emitted."""
    st.index = pane.index + 1
    if pane.nonspeculative_index >= 0:
        st.nonspec = pane.nonspeculative_index + 1


# The only pane a bounded GroupByKey with the default trigger produces: the
# watermark passes the end of every window and closes it in one advance.
BATCH_ON_TIME = pane_info(True, True, ON_TIME, 0, 0)
# Beam's batch fast path for the global window (is_last True there).
ONLY_FIRING = pane_info(True, True, ON_TIME, 0, 0)
