"""Custom WindowFns used by the tests (non-merging and merging)."""

from apache_beam.coders import coders
from apache_beam.transforms.window import IntervalWindow
from apache_beam.transforms.window import NonMergingWindowFn
from apache_beam.transforms.window import WindowFn
from apache_beam.utils.timestamp import Timestamp


class ParityWindows(NonMergingWindowFn):
    """Custom non-merging: even seconds go to [t, t+2), odd ones also to [t-1, t+3)."""

    def assign(self, context):
        t = int(context.timestamp)
        if t % 2 == 0:
            return [IntervalWindow(t, t + 2)]
        return [IntervalWindow(t - 1, t + 1), IntervalWindow(t - 1, t + 3)]

    def get_window_coder(self):
        return coders.IntervalWindowCoder()

    def __eq__(self, other):
        return type(self) == type(other)

    def __hash__(self):
        return hash(type(self))


class BucketMerging(WindowFn):
    """Custom merging: each element gets [t, t+1); all windows starting in the
    same 10-second bucket merge into [bucket, max end)."""

    def assign(self, context):
        t = context.timestamp
        return [IntervalWindow(t, t + 1)]

    def merge(self, merge_context):
        buckets = {}
        for w in merge_context.windows:
            buckets.setdefault(int(w.start) // 10, []).append(w)
        for b, ws in sorted(buckets.items()):
            end = max(w.end for w in ws)
            result = IntervalWindow(Timestamp(b * 10), end)
            if len(ws) > 1 or ws[0] != result:
                merge_context.merge(ws, result)

    def get_window_coder(self):
        return coders.IntervalWindowCoder()

    def __eq__(self, other):
        return type(self) == type(other)

    def __hash__(self):
        return hash(type(self))
