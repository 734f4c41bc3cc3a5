"""--watermark_percentile on a partitioned Spark source: one partition far
behind the others in event time holds the exact watermark (P = 1) until it
catches up; with P = 0.95 windows fire ON_TIME once the other nineteen
passed them, the laggard's records behind that watermark land in LATE panes
and count as late, and the final accumulated totals are the same (the
allowed lateness covers the lag)."""

import collections
import os
import time

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import trigger, window

from beam_spark_runner import SparkRunner
from beam_spark_runner.io import ReadFromSpark, WriteToSpark
from beam_spark_runner.result import PipelineState
from tests.integration.test_spark_io_streaming import SCHEMA, _event, _wait, _write_json
from tests.window_totals import PaneTotal, WindowPaneTotal

USERS = ["u%02d" % i for i in range(19)]
START = 1767225600  # 2026-01-01T00:00:00Z, the events' epoch
TIMEOUT_S = 180


def _run(tmp_path, percentile, spark):
    """Runs the pipeline over two files; returns (pane rows published after
    the first file, all pane rows, late_records)."""
    source, out = tmp_path / ("in-%s" % percentile), tmp_path / ("out-%s" % percentile)
    source.mkdir()
    p = beam.Pipeline(
        runner=SparkRunner(), options=PipelineOptions(["--streaming", "--watermark_percentile=%s" % percentile])
    )
    _ = (
        p
        | "Read"
        >> ReadFromSpark(
            format="json", path=str(source), schema=SCHEMA, timestamp_column="ts", partition_columns=["user"]
        )
        | "Window"
        >> beam.WindowInto(
            window.FixedWindows(10),
            trigger=trigger.AfterWatermark(late=trigger.AfterCount(1)),
            accumulation_mode=trigger.AccumulationMode.ACCUMULATING,
            allowed_lateness=100,
        )
        | "Pairs" >> beam.Map(lambda r: (r.user, r.score))
        | "Sum" >> beam.CombinePerKey(sum)
        | "Panes" >> beam.ParDo(WindowPaneTotal()).with_output_types(PaneTotal)
        | "Write" >> WriteToSpark(format="parquet", path=str(out))
    )
    # Nineteen users at 1 s and 25 s; the laggard only at 1 s.
    _write_json(str(source), "a.json", [_event(u, 1, s) for u in USERS for s in (1, 25)] + [_event("slow", 1, 1)])
    result = p.run()
    try:
        if percentile < 1:
            # 19 of 20 partitions are at 25 s: [0, 10) fires without the laggard.
            _wait(lambda: len(_published(spark, out)) == 20, "window [0, 10) to fire for every user")
        else:
            time.sleep(8)  # the file is read and the laggard holds every window open
        first = _published(spark, out)
        # The laggard catches up: 5 s (behind the 95% watermark) and 30 s.
        _write_json(str(source), "b.json", [_event("slow", 5, 5), _event("slow", 1, 30)])
        _wait(lambda: ("slow", START, 6) in [(r[0], r[1], r[2]) for r in _published(spark, out)], "slow's 6 in [0, 10)")
        result.drain()
        assert result.wait_until_finish(TIMEOUT_S * 1000) == PipelineState.DRAINED
    finally:
        if result.state not in (PipelineState.DRAINED, PipelineState.DONE):
            result.cancel()
    late = result.metrics().query(beam.metrics.MetricsFilter().with_name("late_records"))["counters"]
    return first, _published(spark, out), sum(c.committed for c in late)


def _published(spark, out):
    if not os.path.exists(out) or not any(n.startswith("part-") for n in os.listdir(out)):
        return []
    return sorted(tuple(r) for r in spark.read.parquet(str(out)).collect())


def _final(panes):
    """The last (highest index) pane's total of each user and window."""
    last = {}
    for user, start, total, _, index in panes:
        if (user, start) not in last or index > last[(user, start)][0]:
            last[(user, start)] = (index, total)
    return {key: total for key, (_, total) in last.items()}


def test_a_laggard_partition_holds_the_exact_watermark_but_not_the_95th_percentile(tmp_path, spark_session):
    exact_first, exact_all, exact_late = _run(tmp_path, 1.0, spark_session)
    p95_first, p95_all, p95_late = _run(tmp_path, 0.95, spark_session)

    expected = collections.Counter({(u, START): 1 for u in USERS})
    expected.update({(u, START + 20): 1 for u in USERS})
    expected.update({("slow", START): 6, ("slow", START + 30): 1})
    # Exact: nothing fired while the laggard sat at 1 s; the on-time panes
    # hold every total (no record was late; a window's final pane at its
    # garbage collection, LATE by Beam's rules, only repeats its total).
    assert exact_first == []
    assert {(r[0], r[1]): r[2] for r in exact_all if r[3] == "ON_TIME"} == dict(expected) and exact_late == 0
    # 95%: [0, 10) fired on time for all twenty users before the laggard moved.
    assert sorted((r[0], r[1], r[3]) for r in p95_first) == sorted([(u, START, "ON_TIME") for u in USERS + ["slow"]])
    # The laggard's 5 s came behind that watermark: a LATE pane, counted late.
    slow = [r for r in p95_all if r[0] == "slow" and r[1] == START]
    # (Then the window's final pane at its garbage collection repeats it.)
    panes = [(r[2], r[3]) for r in sorted(slow, key=lambda r: r[4])]
    assert panes[0] == (1, "ON_TIME") and len(panes) >= 2 and set(panes[1:]) == {(6, "LATE")}
    assert p95_late == 1
    # The allowed lateness covers the lag: the final totals are the same.
    assert _final(exact_all) == dict(expected) == _final(p95_all)


def test_a_percentile_without_a_spark_source_is_reported_as_having_no_effect(caplog):
    from apache_beam.testing.test_stream import TestStream

    p = beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(["--streaming", "--watermark_percentile=0.9"]))
    _ = p | TestStream().add_elements([1]).advance_watermark_to_infinity() | beam.Map(lambda x: x)
    with caplog.at_level("WARNING", logger="beam_spark_runner"):
        p.run().wait_until_finish()
    assert any(
        "--watermark_percentile=0.9 has no effect" in r.getMessage() and "ReadFromSpark" in r.getMessage()
        for r in caplog.records
    )
