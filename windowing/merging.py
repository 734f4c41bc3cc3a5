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

from apache_beam.transforms.window import IntervalWindow
from apache_beam.transforms.window import Sessions
from apache_beam.transforms.window import WindowFn
from apache_beam.utils.timestamp import Timestamp


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


def _session_merges(windows):
    """Exactly what ``Sessions.merge`` reports, computed on integer micros
    (Beam's version compares Timestamp objects, which dominates the cost of a
    merging GroupByKey)."""
    ws = sorted(((w.start.micros, w.end.micros, w) for w in windows), key=lambda x: x[0])
    out = []
    group = []
    end = None
    for start, w_end, w in ws:
        if group and end > start:
            group.append(w)
            if w_end > end:
                end = w_end
        else:
            if len(group) > 1:
                out.append(MergeResult(group, IntervalWindow(group[0].start, Timestamp(micros=end))))
            group = [w]
            end = w_end
    if len(group) > 1:
        out.append(MergeResult(group, IntervalWindow(group[0].start, Timestamp(micros=end))))
    return out


def compute_merges(window_fn, windows):
    """Merges ``window_fn`` performs on the set ``windows`` (list of MergeResult)."""
    if type(window_fn) is Sessions:
        return _session_merges(windows)
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
