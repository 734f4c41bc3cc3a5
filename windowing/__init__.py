"""Engine-agnostic window assignment, merging and window GC rules (no Spark, no gRPC).

The Dataflow model's *where*: which windows an element belongs to, how merging
windows (sessions, custom merging WindowFns) collapse, when a window's state may
be garbage-collected and which timestamp a pane is emitted at.  Beam's own
model classes (``WindowFn``, ``IntervalWindow``, ``GlobalWindow``,
``Timestamp``) are used as-is; the bookkeeping around them is ours.
"""

from windowing.assign import assign_windows
from windowing.assign import is_merging
from windowing.merging import MergeResult
from windowing.merging import compute_merges
from windowing.timestamps import END_OF_WINDOW
from windowing.timestamps import EARLIEST
from windowing.timestamps import LATEST
from windowing.timestamps import EARLIEST_TRANSFORMED
from windowing.timestamps import OutputTimePolicy
from windowing.timestamps import gc_time
from windowing.timestamps import is_expired

__all__ = [
    'assign_windows',
    'is_merging',
    'MergeResult',
    'compute_merges',
    'END_OF_WINDOW',
    'EARLIEST',
    'LATEST',
    'EARLIEST_TRANSFORMED',
    'OutputTimePolicy',
    'gc_time',
    'is_expired',
]
