"""Same-batch watermarks across window functions and triggers: two chained
GroupByKeys without allowed lateness (both same-batch stages), DISCARDING,
fed a TestStream whose watermark closes windows between elements and which
sends one element behind the watermark. Generated cases (window function x
trigger); each checks, on the runner, what the same-batch rule promises:

- nothing the first GroupByKey emits is late at the second (no element
  dropped or late there);
- nothing is lost: the values summed over every pane of the second
  GroupByKey, per window, equal the sums computed in plain Python from the
  stream, without the one element the first GroupByKey drops as late.
"""

import collections
import itertools

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import BeamAssertException, assert_that
from apache_beam.transforms import trigger, window

from beam_spark_runner import SparkRunner
from beam_spark_runner.translation.planner import pipeline_proto_of, plan_streaming_pipeline

# (key, value, event time in seconds), in three bundles; the watermark moves
# to 12 after the first and to 30 after the second.
FIRST = [("a", 1, 1), ("b", 2, 2), ("a", 3, 6), ("c", 4, 9)]
SECOND = [("a", 5, 13), ("b", 6, 14), ("c", 7, 21), ("a", 8, 27)]
LATE = ("b", 100, 5)  # behind the watermark 30: its windows expired, dropped at G1
THIRD = [("c", 9, 31), ("a", 10, 33)]

WINDOW_FNS = {
    "fixed": lambda: window.FixedWindows(10),
    "sliding": lambda: window.SlidingWindows(10, 5),
    "sessions": lambda: window.Sessions(4),
}
TRIGGERS = {
    "default": lambda: trigger.DefaultTrigger(),
    "early_count": lambda: trigger.AfterWatermark(early=trigger.AfterCount(2)),
    "repeated_count": lambda: trigger.Repeatedly(trigger.AfterCount(2)),
}
CASES = sorted(itertools.product(WINDOW_FNS, TRIGGERS))


def _stream():
    tv = window.TimestampedValue
    return (
        TestStream()
        .add_elements([tv((k, v), t) for k, v, t in FIRST])
        .advance_watermark_to(12)
        .add_elements([tv((k, v), t) for k, v, t in SECOND])
        .advance_watermark_to(30)
        .add_elements([tv((LATE[0], LATE[1]), LATE[2])])
        .add_elements([tv((k, v), t) for k, v, t in THIRD])
        .advance_watermark_to_infinity()
    )


def _expected_sums(window_fn):
    """{(window start, window end): sum} of the values the second
    GroupByKey's panes carry in all, from the on-time elements alone. Its
    windows are the first's, merged once more for sessions (it merges the
    per-key sessions that overlap, as sessions over all keys)."""
    elements = FIRST + SECOND + THIRD
    sums = collections.Counter()
    if isinstance(window_fn, window.Sessions):
        gap = window_fn.gap_size.micros // 1_000_000
        spans = sorted((t, t + gap, v) for _, v, t in elements)
        merged = []
        for start, end, v in spans:
            if merged and start < merged[-1][1]:
                merged[-1] = [merged[-1][0], max(merged[-1][1], end), merged[-1][2] + v]
            else:
                merged.append([start, end, v])
        return {(start, end): total for start, end, total in merged}
    for _, v, t in elements:
        for w in window_fn.assign(window.WindowFn.AssignContext(t)):
            sums[(int(w.start), int(w.end))] += v
    return dict(sums)


def _totals_equal(expected):
    """A matcher: the panes' sums added up per window of `expected` equal
    it. A pane's window is one of `expected`'s or, for sessions, lies
    within one: a session the second GroupByKey fired (an early pane)
    before a later pane of the first merged it with another."""

    def match(actual):
        totals = collections.Counter()
        for (start, end), value in actual:
            within = [(s, e) for s, e in expected if s <= start and end <= e]
            if len(within) != 1:
                raise BeamAssertException("pane of window [%s, %s) lies in no expected window" % (start, end))
            totals[within[0]] += value
        if dict(totals) != expected:
            raise BeamAssertException(
                "per-window totals %s, expected %s" % (sorted(totals.items()), sorted(expected.items()))
            )

    return match


class _WindowSums(beam.DoFn):
    def process(self, kv, w=beam.DoFn.WindowParam):
        yield (int(w.start), int(w.end)), sum(kv[1])


def _pipeline(window_name, trigger_name, check=True):
    window_fn = WINDOW_FNS[window_name]()
    p = beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(["--streaming"]))
    sums = (
        p
        | _stream()
        | "Window"
        >> beam.WindowInto(
            window_fn,
            trigger=TRIGGERS[trigger_name](),
            accumulation_mode=trigger.AccumulationMode.DISCARDING,
            allowed_lateness=0,
        )
        | "G1" >> beam.GroupByKey()
        | "Sum" >> beam.MapTuple(lambda k, vs: ("all", sum(vs)))
        | "G2" >> beam.GroupByKey()
        | beam.ParDo(_WindowSums())
    )
    if check:
        assert_that(sums, _totals_equal(_expected_sums(window_fn)))
    return p


@pytest.mark.parametrize("window_name,trigger_name", CASES)
def test_two_same_batch_group_by_keys_lose_nothing_and_make_nothing_late(window_name, trigger_name):
    plan = plan_streaming_pipeline(pipeline_proto_of(_pipeline(window_name, trigger_name, check=False)))
    assert {"G1", "G2"} <= {op.display_name for op in plan.operators if op.name in plan.same_batch_stages}
    result = _pipeline(window_name, trigger_name).run()
    result.wait_until_finish()
    records = result.streaming_progress()
    g1 = [r.stage("G1") for r in records]
    g2 = [r.stage("G2") for r in records]
    # The element behind the watermark, once per window it is in, and nothing else.
    window_fn = WINDOW_FNS[window_name]()
    late_windows = 1 if window_name == "sessions" else len(window_fn.assign(window.WindowFn.AssignContext(LATE[2])))
    assert sum(s.dropped_late for s in g1) == late_windows
    assert sum(s.dropped_late + s.late for s in g2) == 0
