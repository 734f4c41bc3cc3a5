"""RETRACTING on Structured Streaming: the Dataflow paper's sessions with
early and late firings, then a second aggregation that only RETRACTING gets
right; the runner's output is checked against the pure reduce driver
(triggers/, no Spark) on the same events."""

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms import trigger, window
from apache_beam.utils.timestamp import MIN_TIMESTAMP as MIN_TS, Timestamp

from beam_spark_runner import SparkRunner


def _pipeline(*args):
    return beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(["--streaming", *args]))


def _tv(value, ts):
    return window.TimestampedValue(value, ts)


_SESSION_EVENTS = [
    ("elements", [(5, 1)]),
    ("elements", [(7, 10)]),
    ("watermark", 8),
    ("elements", [(3, 6)]),
    ("watermark", None),
]
_SESSION_TRIGGER = trigger.AfterWatermark(early=trigger.AfterCount(1), late=trigger.AfterCount(1))


def _pure_driver_pane_sums(mode):
    """What the reduce driver (triggers/, no Spark) emits for these events:
    the sum of each pane, negative for retractions."""
    import triggers
    from triggers.driver import ReduceSpec
    from apache_beam.utils.timestamp import MAX_TIMESTAMP
    from apache_beam.utils.windowed_value import WindowedValue

    reducer = ReduceSpec(window.Sessions(5), _SESSION_TRIGGER, mode, allowed_lateness=100).new_reducer()
    panes, wm = [], MIN_TS
    for kind, arg in _SESSION_EVENTS:
        if kind == "elements":
            wvs = [
                WindowedValue(v, ts, window.Sessions(5).assign(window.WindowFn.AssignContext(Timestamp.of(ts))))
                for v, ts in arg
            ]
            panes += reducer.process(wvs, wm)
        else:
            wm = MAX_TIMESTAMP if arg is None else Timestamp.of(arg)
            panes += reducer.advance_watermark(wm)
    return [-sum(p.value.value) if triggers.is_retraction(p.value) else sum(p.value) for p in panes]


def _session_stream():
    """_SESSION_EVENTS as a TestStream of ("k", value) elements."""
    stream = TestStream()
    for kind, arg in _SESSION_EVENTS:
        if kind == "elements":
            stream = stream.add_elements([_tv(("k", v), ts) for v, ts in arg])
        elif arg is None:
            stream = stream.advance_watermark_to_infinity()
        else:
            stream = stream.advance_watermark_to(arg)
    return stream


def _session_totals_pipeline(mode, expected_total):
    """The Dataflow paper's case: per-key session sums with early and late
    firings, then a second aggregation over the sessions. Element 3 at t=6
    arrives late and merges sessions [1, 6) and [10, 15) into [1, 15)."""
    import triggers

    stream = _session_stream()
    with _pipeline() as p:
        totals = (
            p
            | stream
            | beam.WindowInto(
                window.Sessions(5), trigger=_SESSION_TRIGGER, accumulation_mode=mode, allowed_lateness=100
            )
            | beam.GroupByKey()
            | beam.Map(lambda kv: ("total", triggers.map_pane(sum, kv[1])))
            # One total when the input is complete (an unbounded GroupByKey
            # needs a trigger other than the default one in Beam).
            | "Global"
            >> beam.WindowInto(
                window.GlobalWindows(),
                trigger=trigger.AfterWatermark(),
                accumulation_mode=trigger.AccumulationMode.DISCARDING,
            )
            | beam.CombinePerKey(triggers.retractable(sum))
            | beam.Values()
        )
        assert_that(totals, equal_to([expected_total]))


def test_retracting_sessions_then_a_second_aggregation_converge_where_accumulating_double_counts():
    import triggers

    retracting = _pure_driver_pane_sums(triggers.RETRACTING)
    accumulating = _pure_driver_pane_sums(triggers.ACCUMULATING)
    assert any(s < 0 for s in retracting)  # retractions happened
    assert sum(retracting) == 15  # 5 + 7 + 3: exact
    assert sum(accumulating) > 15  # superseded panes counted again
    # The runner, end to end, agrees with both.
    _session_totals_pipeline(triggers.RETRACTING, 15)
    _session_totals_pipeline(triggers.ACCUMULATING, sum(accumulating))


def _live_session_sums(mode):
    """The multiset of stage-one session sums still live at the end (every
    retraction removes an earlier addition), per the pure driver."""
    import collections

    live = collections.Counter()
    for s in _pure_driver_pane_sums(mode):
        if s < 0:
            live[-s] -= 1
        else:
            live[s] += 1
    return list(live.elements())


@pytest.mark.parametrize("mode_name", ["RETRACTING", "ACCUMULATING"])
def test_plain_combiners_after_retracting_sessions_consume_retractions(mode_name):
    """The Dataflow paper's second aggregation with plain CombineFns (no
    `triggers.retractable` in user code): the runner makes them consume the
    retractions, so under RETRACTING they see exactly the live session sums,
    where ACCUMULATING counts superseded panes again."""
    import triggers

    mode = getattr(triggers, mode_name)
    live = _live_session_sums(mode)
    assert sum(live) == 15 if mode == triggers.RETRACTING else sum(live) > 15
    stream = _session_stream()
    with _pipeline() as p:
        sums = (
            p
            | stream
            | beam.WindowInto(
                window.Sessions(5), trigger=_SESSION_TRIGGER, accumulation_mode=mode, allowed_lateness=100
            )
            | "SessionSum" >> beam.CombinePerKey(sum)
            | "ToDay" >> beam.Map(lambda kv: ("day", kv[1]))
            | "Day" >> beam.WindowInto(window.FixedWindows(24 * 3600))
        )
        for name, combine, expected in [
            ("Sum", beam.CombinePerKey(sum), sum(live)),
            ("Count", beam.combiners.Count.PerKey(), len(live)),
            ("Mean", beam.combiners.Mean.PerKey(), sum(live) / len(live)),
            ("Max", beam.CombinePerKey(max), max(live)),
        ]:
            assert_that(
                sums | name >> combine | "%sValue" % name >> beam.Values(), equal_to([expected]), label="Check%s" % name
            )
