"""Percentile watermarks on a partitioned Spark source, two aggregations
side by side in one pipeline: "Approx" on the pipeline's
--watermark_percentile=0.95, "Exact" asking for the exact watermark with
`watermark_percentile(1.0)`. One partition far behind the others in event
time holds Exact's windows until it catches up; Approx's fire ON_TIME once
the other nineteen passed them, the laggard's records behind that watermark
land in LATE panes and count as late (for Approx only), and the final
accumulated totals are the same (the allowed lateness covers the lag)."""

import collections
import datetime
import os

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import trigger, window

import beam_spark_runner
from beam_spark_runner import SparkRunner
from beam_spark_runner.io import ReadFromSpark, WriteToSpark
from beam_spark_runner.result import PipelineState
from tests.beam_tab import BeamTabWatcher, beam_tab_rows, browser_dom, require_browser
from tests.integration.test_spark_io_streaming import SCHEMA, _event, _wait, _write_json
from tests.window_totals import PaneTotal, WindowPaneTotal

USERS = ["u%02d" % i for i in range(19)]
START = 1767225600  # 2026-01-01T00:00:00Z, the events' epoch
TIMEOUT_S = 180


def _totals(pairs, name, out):
    _ = (
        pairs
        | name >> beam.CombinePerKey(sum)
        | name + "Panes" >> beam.ParDo(WindowPaneTotal()).with_output_types(PaneTotal)
        | name + "Write" >> WriteToSpark(format="parquet", path=str(out))
    )


def _run(tmp_path, spark):
    """Runs the pipeline over two files; returns, per aggregation, (pane
    rows published after the first file, all pane rows, late_records);
    under "tab" the tables the Spark UI's Beam tab showed meanwhile, and
    under "dom" the tab as headless Chromium rendered it while the laggard
    still held Exact (None without Chromium)."""
    source, exact_out, approx_out = tmp_path / "in", tmp_path / "exact", tmp_path / "approx"
    source.mkdir()
    p = beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(["--streaming", "--watermark_percentile=0.95"]))
    pairs = (
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
    )
    _totals(pairs, "Approx", approx_out)
    with beam_spark_runner.watermark_percentile(1.0):
        _totals(pairs, "Exact", exact_out)
    # Nineteen users at 1 s and 25 s; the laggard only at 1 s.
    _write_json(str(source), "a.json", [_event(u, 1, s) for u in USERS for s in (1, 25)] + [_event("slow", 1, 1)])
    url = spark.sparkContext.uiWebUrl + "/beam/"
    watcher = BeamTabWatcher(url)
    result = p.run()
    try:
        # 19 of 20 partitions are at 25 s: Approx's [0, 10) fires without the laggard.
        _wait(lambda: len(_published(spark, approx_out)) == 20, "window [0, 10) to fire for every user")
        firsts = {"exact": _published(spark, exact_out), "approx": _published(spark, approx_out)}
        dom = browser_dom(url, tmp_path / "browser")
        # The laggard catches up: 5 s (behind the 95% watermark) and 30 s.
        _write_json(str(source), "b.json", [_event("slow", 5, 5), _event("slow", 1, 30)])
        for out in (exact_out, approx_out):
            _wait(lambda: ("slow", START, 6) in [(r[0], r[1], r[2]) for r in _published(spark, out)], "slow's 6")
        result.drain()
        assert result.wait_until_finish(TIMEOUT_S * 1000) == PipelineState.DRAINED
    finally:
        tables = watcher.stop()
        if result.state not in (PipelineState.DRAINED, PipelineState.DONE):
            result.cancel()
    late = result.metrics().query(beam.metrics.MetricsFilter().with_name("late_records"))["counters"]
    late_by = collections.Counter()
    for counter in late:
        late_by["approx" if counter.key.step.startswith("Approx") else "exact"] += counter.committed
    return {
        "exact": (firsts["exact"], _published(spark, exact_out), late_by["exact"]),
        "approx": (firsts["approx"], _published(spark, approx_out), late_by["approx"]),
        "tab": tables,
        "dom": dom,
    }


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


@pytest.fixture(scope="module")
def laggard_run(tmp_path_factory, spark_session):
    return _run(tmp_path_factory.mktemp("laggard"), spark_session)


def test_a_laggard_partition_holds_the_exact_aggregation_but_not_the_95th_percentile_one(laggard_run):
    runs = laggard_run
    exact_first, exact_all, exact_late = runs["exact"]
    p95_first, p95_all, p95_late = runs["approx"]

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


def _watermark_seconds(cell):
    """A watermark cell of the Beam tab in seconds after START (-inf, +inf at the ends)."""
    if cell in ("-infinity", "+infinity"):
        return float(cell.replace("infinity", "inf"))
    when = datetime.datetime.strptime(cell, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc)
    return when.timestamp() - START


def test_the_beam_tab_shows_the_watermarks_move_while_the_run_goes_on(laggard_run):
    """While the run went on, the Spark UI's Beam tab showed each step's
    input watermark move forward, batch after batch, never back: Approx's
    past the laggard's 1 s while Exact's waited at it, each under its
    percentile."""
    tables = laggard_run["tab"]
    batches = [int(caption.split(",")[0].split()[-1]) for caption, _ in tables]
    assert batches == sorted(batches) and len(batches) >= 3, [caption for caption, _ in tables]
    seen = {"Approx": [], "Exact": []}
    for _, rows in tables:
        for step, watermarks in seen.items():
            (row,) = [row for name, row in rows.items() if name.startswith(step + "/")]
            assert row["Watermark percentile"] == ("0.95" if step == "Approx" else "1"), row
            watermarks.append(_watermark_seconds(row["Input watermark"]))
    for step, watermarks in seen.items():
        assert watermarks == sorted(watermarks), (step, watermarks)
    # A table of the run's middle: the laggard at 1 s holds Exact there,
    # the other partitions at 25 s carried Approx past it.
    assert any(1 <= exact < approx < float("inf") for exact, approx in zip(seen["Exact"], seen["Approx"])), seen


def test_a_headless_browser_shows_the_running_pipelines_watermarks(laggard_run, request):
    """Rendered by Chromium while the run went on (the laggard at 1 s, the
    other partitions at 25 s): the Beam tab among the UI's tabs, Exact's
    input watermark at the laggard, Approx's past it."""
    dom = require_browser(request, laggard_run["dom"])
    assert ">Beam</a>" in dom, dom[:2000]
    _, rows = beam_tab_rows(dom)
    (exact,) = [row for name, row in rows.items() if name.startswith("Exact/")]
    (approx,) = [row for name, row in rows.items() if name.startswith("Approx/")]
    assert _watermark_seconds(exact["Input watermark"]) == 1, exact
    assert _watermark_seconds(approx["Input watermark"]) == 25, approx
    assert (exact["Watermark percentile"], approx["Watermark percentile"]) == ("1", "0.95")


def test_a_batch_run_says_the_annotation_has_no_effect(caplog):
    p = beam.Pipeline(runner=SparkRunner())
    with beam_spark_runner.watermark_percentile(0.9):
        _ = p | beam.Create([("a", 1)]) | "Sum" >> beam.CombinePerKey(sum)
    with caplog.at_level("WARNING", logger="beam_spark_runner"):
        p.run().wait_until_finish()
    (warning,) = [r.getMessage() for r in caplog.records if "watermark_percentile()" in r.getMessage()]
    assert "on Create, Sum has no effect: the pipeline runs in batch" in warning


def test_a_laggard_broker_stream_does_not_hold_the_90th_percentile_watermark(tmp_path, spark_session, request):
    """A splittable DoFn source (ReadFromRedisStreams): its restrictions'
    watermarks are the pending work its stage summarizes. Nine streams at
    25 s and one at 1 s: with P = 0.9 the window [0, 10) fires ON_TIME
    without waiting for the laggard (exactly it would wait for ever: the
    laggard's stream gets nothing newer, and no idle timeout is set)."""
    import redis

    from beam_spark_runner.io import ReadFromRedisStreams
    from tests import services

    redis_url = services.require(request, services.REDIS)
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    streams = ["beam-test-p90-%02d-%s" % (i, os.urandom(4).hex()) for i in range(10)]
    out = tmp_path / "out"
    try:
        for i, stream in enumerate(streams):
            seconds = (1,) if i == 0 else (1, 25)
            for second in seconds:
                client.xadd(stream, {"n": "1", "at": str(START + second)})
        label = {stream: "s%02d" % i for i, stream in enumerate(streams)}
        p = beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(["--streaming", "--watermark_percentile=0.9"]))
        _ = (
            p
            | ReadFromRedisStreams(redis_url, streams, timestamp_field="at", poll_interval=0.2)
            | "Pairs" >> beam.Map(lambda e: (label[e.stream], int(e.fields["n"])))
            | "Window"
            >> beam.WindowInto(
                window.FixedWindows(10),
                trigger=trigger.AfterWatermark(late=trigger.AfterCount(1)),
                accumulation_mode=trigger.AccumulationMode.ACCUMULATING,
                allowed_lateness=100,
            )
        )
        _totals(_, "Sum", out)
        result = p.run()
        try:
            _wait(lambda: len(_published(spark_session, out)) == 10, "window [0, 10) to fire for every stream")
            first = _published(spark_session, out)
            # The laggard's 5 s arrives behind the 90% watermark: LATE.
            client.xadd(streams[0], {"n": "5", "at": str(START + 5)})
            _wait(lambda: ("s00", START, 6) in [tuple(r[:3]) for r in _published(spark_session, out)], "s00's 6")
            result.drain()
            assert result.wait_until_finish(TIMEOUT_S * 1000) == PipelineState.DRAINED
        finally:
            if result.state not in (PipelineState.DRAINED, PipelineState.DONE):
                result.cancel()
    finally:
        client.delete(*streams)
    assert sorted((r[0], r[1], r[2], r[3]) for r in first) == [(label[s], START, 1, "ON_TIME") for s in streams]
    late = result.metrics().query(beam.metrics.MetricsFilter().with_name("late_records"))["counters"]
    assert sum(c.committed for c in late) == 1
    slow = sorted((r for r in _published(spark_session, out) if r[0] == "s00" and r[1] == START), key=lambda r: r[4])
    assert slow[0][2:4] == (1, "ON_TIME") and {(r[2], r[3]) for r in slow[1:]} == {(6, "LATE")}
