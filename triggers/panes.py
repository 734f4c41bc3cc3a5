"""Pane info (``apache_beam.utils.windowed_value.PaneInfo``) for a firing.

Rules (the Python SDK's, kept so panes agree with Beam's transcripts):
 * ``index`` counts every pane of the window (0, 1, 2, ...);
 * a pane is EARLY while the output watermark has not passed the window's
   ``max_timestamp()``; its ``nonspeculative_index`` is -1;
 * otherwise ``nonspeculative_index`` counts the non-early panes; the first of
   them is ON_TIME if it was fired by a watermark timer, every other is LATE;
 * ``is_first`` is ``index == 0``; ``is_last`` is "the trigger finished".
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


def next_pane(st, finished, output_watermark, by_watermark_timer):
  """PaneInfo of the next pane of the window whose state (a
  ``triggers.state.WindowState``) is ``st``; advances the pane counters in
  ``st``. ``output_watermark``: micros."""
  index = st.index
  st.index = index + 1
  if output_watermark <= st.max:
    timing = EARLY
    nonspec = -1
    if st.nonspec:
      # The watermark went back (or a merge moved the window end forward)
      # after a non-early pane: keep counting rather than reuse an index.
      nonspec = st.nonspec
      st.nonspec += 1
  else:
    nonspec = st.nonspec
    st.nonspec = nonspec + 1
    timing = ON_TIME if by_watermark_timer and nonspec == 0 else LATE
  return pane_info(index == 0, finished, timing, index, nonspec)


# The only pane a bounded GroupByKey with the default trigger produces.
BATCH_ON_TIME = pane_info(True, False, ON_TIME, 0, 0)
# Beam's batch fast path for the global window (is_last True there).
ONLY_FIRING = pane_info(True, True, ON_TIME, 0, 0)
