"""RETRACTING accumulation mode end to end on SparkRunner (batch).

The Dataflow paper's motivating case (docs/retractions.md): per-session sums
with early firings, then a second aggregation over the sessions. In batch all
input is there before the watermark moves, so each session fires one EARLY
pane (everything it holds) and then its ON_TIME pane, which under RETRACTING
is preceded by a retraction of the EARLY pane.
"""

from typing import Any, Tuple

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms import core, trigger, window
from apache_beam.transforms.window import WindowFn
from apache_beam.utils.windowed_value import PaneInfoTiming, WindowedValue

import triggers
from beam_spark_runner import SparkRunner, plan_pipeline
from beam_spark_runner.translation.planner import pipeline_proto_of
from triggers import Retraction, is_retraction, map_pane
from triggers.batch import group_by_window

# (value, event time in seconds): the paper's session example, 10 s gap.
# Sessions: [1, 11) holds 5; [30, 60) holds 7, 3, 4, 3, 8 (8 @ 38 bridges).
PAPER = [(5, 1), (7, 30), (3, 45), (4, 47), (3, 50), (8, 38)]
TRUE_TOTAL = sum(v for v, _ in PAPER)  # 30


def _pipeline():
    return beam.Pipeline(runner=SparkRunner(), options=PipelineOptions([]))


EARLY = trigger.AfterWatermark(early=trigger.AfterCount(1))
# Same panes in batch (nothing is late); Beam would lift a combiner under it.
EARLY_AND_LATE = trigger.AfterWatermark(early=trigger.AfterCount(1), late=trigger.AfterCount(1))


def _windowing(mode, trigger_fn=EARLY):
    return dict(trigger=trigger_fn, accumulation_mode=mode)


def _sessions(p, mode, data=PAPER, key="user", trigger_fn=EARLY):
    """(key, value) in 10 s sessions with early firings, in `mode`."""
    return (
        p
        | "Create" >> beam.Create([(key, v, t) for v, t in data])
        | "Stamp" >> beam.Map(lambda e: window.TimestampedValue((e[0], e[1]), e[2]))
        | "Sessions" >> beam.WindowInto(window.Sessions(10), **_windowing(mode, trigger_fn))
    )


def _two_stage_total(p, mode):
    """Per-session sums, then the total of all sessions (global window)."""
    return (
        _sessions(p, mode)
        | "PerSession" >> beam.GroupByKey()
        | "SessionSum" >> beam.Map(lambda kv: ("total", map_pane(sum, kv[1])))
        | "Global" >> beam.WindowInto(window.GlobalWindows())
        | "Total" >> beam.CombinePerKey(triggers.retractable(sum))
        | "Values" >> beam.Values()
    )


class _DescribePane(beam.DoFn):
    """What user code sees: (retraction?, sorted values, timing, window)."""

    def process(self, kv, w=beam.DoFn.WindowParam, pane=beam.DoFn.PaneInfoParam):
        values, retracted = triggers.retractions.unwrap(kv[1])
        assert retracted == is_retraction(kv[1])
        yield (
            kv[0],
            is_retraction(kv[1]),
            sorted(values),
            pane.timing,
            (w.start.micros // 10**6, w.end.micros // 10**6),
        )


def _driver_panes(mode, key="user"):
    """The same panes, computed by the pure triggers/ driver (no Spark)."""
    fn = window.Sessions(10)
    windowing = core.Windowing(fn, triggerfn=EARLY, accumulation_mode=mode)
    wvs = [WindowedValue(v, t, fn.assign(WindowFn.AssignContext(t, v))) for v, t in PAPER]
    out = []
    for wv in group_by_window(windowing, key, wvs):
        k, values = wv.value
        inner, retracted = triggers.retractions.unwrap(values)
        w = wv.windows[0]
        out.append((k, retracted, sorted(inner), wv.pane_info.timing, (w.start.micros // 10**6, w.end.micros // 10**6)))
    return out


def test_user_code_sees_the_retraction_panes_the_driver_computes():
    expected = _driver_panes(triggers.RETRACTING)
    early, on_time = PaneInfoTiming.EARLY, PaneInfoTiming.ON_TIME
    # The driver's answer, spelled out: retract each EARLY pane, then re-add.
    assert sorted(expected, key=repr) == sorted(
        [
            ("user", False, [5], early, (1, 11)),
            ("user", False, [3, 3, 4, 7, 8], early, (30, 60)),
            ("user", True, [5], early, (1, 11)),
            ("user", False, [5], on_time, (1, 11)),
            ("user", True, [3, 3, 4, 7, 8], early, (30, 60)),
            ("user", False, [3, 3, 4, 7, 8], on_time, (30, 60)),
        ],
        key=repr,
    )
    with _pipeline() as p:
        panes = (
            _sessions(p, triggers.RETRACTING)
            | "PerSession" >> beam.GroupByKey()
            | "Describe" >> beam.ParDo(_DescribePane())
        )
        assert_that(panes, equal_to(expected))


def _driver_total(mode):
    """The second stage's answer from the driver's panes: retractions subtract."""
    return sum(-sum(values) if retracted else sum(values) for _, retracted, values, _, _ in _driver_panes(mode))


def test_two_stage_total_is_correct_under_retracting():
    assert _driver_total(triggers.RETRACTING) == TRUE_TOTAL
    with _pipeline() as p:
        assert_that(_two_stage_total(p, triggers.RETRACTING), equal_to([TRUE_TOTAL]))


def test_two_stage_total_double_counts_under_accumulating():
    # Same pipeline, ACCUMULATING: the EARLY and the ON_TIME pane of each
    # session are both added: 2 * (5 + 25).
    assert _driver_total(triggers.ACCUMULATING) == 2 * TRUE_TOTAL
    with _pipeline() as p:
        assert_that(_two_stage_total(p, triggers.ACCUMULATING), equal_to([2 * TRUE_TOTAL]))


def test_combine_on_retracting_input_is_not_lifted_and_retracts_combined_panes():
    def build(p):
        sessions = _sessions(p, triggers.RETRACTING, trigger_fn=EARLY_AND_LATE)
        sums = sessions | "Sum" >> beam.CombinePerKey(sum)
        counts = sessions | "Count" >> beam.combiners.Count.PerKey()  # typed: VarIntCoder output
        maxima = sessions | "Group" >> beam.GroupByKey() | "Max" >> beam.CombineValues(max)
        return sums, counts, maxima

    plan_p = beam.Pipeline()
    build(plan_p)
    plan = plan_pipeline(pipeline_proto_of(plan_p))
    sdk_transforms = [n for s in plan.stages for n in s.sdk_transforms]
    assert not any("Precombine" in n or n.endswith("/Merge") for n in sdk_transforms), sdk_transforms
    groups = {g.display_name for g in plan.groups.values()}
    assert {"Sum/GroupByKey", "Count/CombinePerKey(CountCombineFn)/GroupByKey"} <= groups, groups

    with _pipeline() as p:
        sums, counts, maxima = build(p)
        # Each pane combined, retractions as Retraction(combined). Count's
        # output is typed int: re-type it to Any before anything that re-derives
        # a coder from the type (Reshuffle would pick VarIntCoder).
        counts = counts | "Untyped" >> beam.Map(lambda kv: kv).with_output_types(Tuple[str, Any])
        assert_that(
            sums | "ReshuffleSums" >> beam.Reshuffle(),
            equal_to(
                [
                    ("user", 5),
                    ("user", 25),
                    ("user", Retraction(5)),
                    ("user", 5),
                    ("user", Retraction(25)),
                    ("user", 25),
                ]
            ),
            label="Sums",
        )
        assert_that(
            counts | "ReshuffleCounts" >> beam.Reshuffle(),
            equal_to(
                [("user", 1), ("user", 5), ("user", Retraction(1)), ("user", 1), ("user", Retraction(5)), ("user", 5)]
            ),
            label="Counts",
        )
        assert_that(
            maxima,
            equal_to(
                [("user", 5), ("user", 8), ("user", Retraction(5)), ("user", 5), ("user", Retraction(8)), ("user", 8)]
            ),
            label="Maxima",
        )
        total = (
            sums
            | "ToTotal" >> beam.Map(lambda kv: ("total", kv[1]))
            | "Global" >> beam.WindowInto(window.GlobalWindows())
            | "Total" >> beam.CombinePerKey(triggers.retractable(sum))
            | beam.Values()
        )
        assert_that(total, equal_to([TRUE_TOTAL]), label="Total")


def test_typed_coder_downstream_of_retractions_carries_them():
    # Count.PerKey's output type is int, from which Reshuffle derives
    # VarIntCoder; the runner gives its PCollections RetractionAwareCoder
    # (translation/retracting.py), so the retractions arrive intact.
    with _pipeline() as p:
        counts = (
            _sessions(p, triggers.RETRACTING)
            | "Count" >> beam.combiners.Count.PerKey()
            | "Reshuffle" >> beam.Reshuffle()
        )
        assert_that(
            counts,
            equal_to(
                [("user", 1), ("user", 5), ("user", Retraction(1)), ("user", 1), ("user", Retraction(5)), ("user", 5)]
            ),
        )


# The second aggregation of the Dataflow paper with plain combiners: the
# runner makes every CombineFn downstream of RETRACTING output consume the
# retractions. Live session sums at the end: 5 and 25.
SECOND_STAGE = {
    "sum": (lambda: beam.CombinePerKey(sum), TRUE_TOTAL, 2 * TRUE_TOTAL),
    "count": (lambda: beam.combiners.Count.PerKey(), 2, 4),
    "mean": (lambda: beam.combiners.Mean.PerKey(), 15.0, 15.0),
    "max": (lambda: beam.CombinePerKey(max), 25, 25),
}


def second_stage(sessions, combine):
    """Per-session sums (a RETRACTING CombinePerKey: per-pane, not lifted),
    then `combine` over them in a one-day window (lifted, plain CombineFn)."""
    return (
        sessions
        | "SessionSum" >> beam.CombinePerKey(sum)
        | "ToDay" >> beam.Map(lambda kv: ("day", kv[1]))
        | "Day" >> beam.WindowInto(window.FixedWindows(24 * 3600))
        | "Second" >> combine
        | "Result" >> beam.Values()
    )


@pytest.mark.parametrize("name", sorted(SECOND_STAGE))
def test_plain_combiners_downstream_consume_retractions(name):
    combine, retracting, accumulating = SECOND_STAGE[name]
    with _pipeline() as p:
        assert_that(second_stage(_sessions(p, triggers.RETRACTING), combine()), equal_to([retracting]))
    with _pipeline() as p:
        assert_that(second_stage(_sessions(p, triggers.ACCUMULATING), combine()), equal_to([accumulating]))
