"""The rows the Spark I/O test pipelines write: a total per key and window
(WriteToSpark needs a schema'd element type, which must be importable in
Spark's workers)."""

import typing

import apache_beam as beam


class Total(typing.NamedTuple):
    user: str
    window_start: int
    total: int


class WindowTotal(beam.DoFn):
    """(key, total) in a window -> Total(key, window start in seconds, total)."""

    def process(self, kv, w=beam.DoFn.WindowParam):
        yield Total(kv[0], int(w.start), kv[1])


class PaneTotal(typing.NamedTuple):
    user: str
    window_start: int
    total: int
    timing: str  # EARLY, ON_TIME, LATE
    index: int  # the pane's index in its window


class WindowPaneTotal(beam.DoFn):
    """(key, total) in a window's pane -> PaneTotal."""

    def process(self, kv, w=beam.DoFn.WindowParam, pane=beam.DoFn.PaneInfoParam):
        timing = {0: "EARLY", 1: "ON_TIME", 2: "LATE"}.get(pane.timing, "UNKNOWN")
        yield PaneTotal(kv[0], int(w.start), kv[1], timing, pane.index)
