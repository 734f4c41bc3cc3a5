"""Merge bookkeeping for merging WindowFns.

Beam's ``WindowFn.merge`` only *reports* merges through a ``MergeContext``;
deciding what happens to state is the runner's job.  ``compute_merges`` drives
the public API and returns the merges as plain data, so the reduce driver can
fold per-window state eagerly (no window-id indirection as in Beam's Python
``MergeableStateAdapter``).

Guarantees:
 * every returned ``MergeResult.merged`` lists windows from the input set, in
   the order the WindowFn reported them, and never names a window twice;
 * merges are returned in the order the WindowFn reported them; a WindowFn
   reporting a window in two merges is rejected (ValueError), because the state
   of one window cannot be moved into two results;
 * a merge of a single window into itself is dropped (it changes nothing).
"""
from apache_beam.transforms.window import WindowFn


class MergeResult(tuple):
  """``(merged, result)``: windows in ``merged`` collapse into ``result``."""
  __slots__ = ()

  def __new__(cls, merged, result):
    return tuple.__new__(cls, (tuple(merged), result))

  @property
  def merged(self):
    return self[0]

  @property
  def result(self):
    return self[1]


class _Collect(WindowFn.MergeContext):
  def __init__(self, windows):
    super().__init__(windows)
    self.merges = []

  def merge(self, to_be_merged, merge_result):
    self.merges.append(MergeResult(to_be_merged, merge_result))


def compute_merges(window_fn, windows):
  """Merges ``window_fn`` performs on the set ``windows`` (list of MergeResult)."""
  ctx = _Collect(windows)
  window_fn.merge(ctx)
  seen = set()
  out = []
  for m in ctx.merges:
    merged = []
    for w in m.merged:
      if w in seen:
        raise ValueError('%s merged window %s twice' % (window_fn, w))
      seen.add(w)
      merged.append(w)
    if len(merged) == 1 and merged[0] == m.result:
      continue
    out.append(MergeResult(merged, m.result))
  return out
