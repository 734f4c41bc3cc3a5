"""A streaming run's progress records (SparkPipelineResult.streaming_progress)."""

import apache_beam as beam
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms import trigger, window

from beam_spark_runner import SparkRunner
from beam_spark_runner.streaming.progress import NAMESPACE
from beam_spark_runner.streaming.watermarks import MAX_MICROS
from tests.beam_tab import beam_tab_rows, browser_dom, require_browser


def _one_late_element():
    """Two windows' elements, then one behind the watermark (dropped as late)."""
    return (
        TestStream()
        .add_elements([window.TimestampedValue(("a", 1), 1), window.TimestampedValue(("b", 2), 2)])
        .advance_watermark_to(20)
        .add_elements([window.TimestampedValue(("a", 3), 3)])  # behind the watermark: dropped
        .add_elements([window.TimestampedValue(("a", 4), 25)])
        .advance_watermark_to_infinity()
    )


def test_progress_lists_every_batch_with_monotonic_watermarks_rows_and_late_drops():
    stream = _one_late_element()
    p = beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(["--streaming"]))
    _ = (
        p
        | stream
        | beam.WindowInto(window.FixedWindows(10))
        | "Group" >> beam.GroupByKey()
        | "Sizes" >> beam.MapTuple(lambda k, vs: ("all", len(vs)))
        | "Regroup" >> beam.GroupByKey()
    )
    result = p.run()
    result.wait_until_finish()
    records = result.streaming_progress()
    assert [r.batch for r in records] == list(range(1, len(records) + 1))
    assert all(r.duration_ms >= 0 for r in records)
    for name in ("Group", "Regroup"):
        stages = [r.stage(name) for r in records]
        for attribute in ("input_watermark", "output_watermark"):
            values = [getattr(s, attribute) for s in stages]
            assert values == sorted(values), (name, attribute, values)
        assert stages[-1].output_watermark == MAX_MICROS
    group = [r.stage("Group") for r in records]
    assert sum(s.rows_in for s in group) == 4  # every element reached the GroupByKey ...
    assert sum(s.dropped_late for s in group) == 1  # ... and the late one was dropped there
    # Its panes (a [0, 10), b [0, 10), a [20, 30)) reach Regroup as one row each.
    regroup = [r.stage("Regroup") for r in records]
    assert sum(s.rows_in for s in regroup) == 3


def test_late_input_within_the_allowed_lateness_is_counted_in_progress_and_metrics():
    """3 and 4 arrive after the watermark passed their window [0, 10),
    within the allowed lateness: they make a LATE pane and count as late
    records; 25 is on time."""
    stream = (
        TestStream()
        .add_elements([window.TimestampedValue(("a", 1), 1)])
        .advance_watermark_to(20)
        .add_elements([window.TimestampedValue(("a", 3), 3), window.TimestampedValue(("a", 4), 4)])
        .add_elements([window.TimestampedValue(("a", 5), 25)])
        .advance_watermark_to_infinity()
    )
    p = beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(["--streaming"]))
    timings = (
        p
        | stream
        | beam.WindowInto(
            window.FixedWindows(10),
            trigger=trigger.AfterWatermark(late=trigger.AfterCount(1)),
            accumulation_mode=trigger.AccumulationMode.DISCARDING,
            allowed_lateness=100,
        )
        | "Group" >> beam.GroupByKey()
        | beam.ParDo(_PaneTiming())
    )
    # (Beam's Python SDK closes the late window with an empty final pane.)
    expected = [(0, "ON_TIME", [1]), (0, "LATE", [3, 4]), (0, "LATE", []), (20, "ON_TIME", [5])]
    assert_that(timings, equal_to(expected))
    result = p.run()
    result.wait_until_finish()
    group = [r.stage("Group") for r in result.streaming_progress()]
    assert (sum(s.late for s in group), sum(s.dropped_late for s in group)) == (2, 0)
    assert sum(s.rows_in for s in group) == 4
    counters = result.metrics().query(MetricsFilter().with_namespace(NAMESPACE).with_name("late_records"))["counters"]
    assert sum(c.committed for c in counters) == 2


class _PaneTiming(beam.DoFn):
    def process(self, kv, w=beam.DoFn.WindowParam, pane=beam.DoFn.PaneInfoParam):
        yield int(w.start), {0: "EARLY", 1: "ON_TIME", 2: "LATE"}[pane.timing], sorted(kv[1])


def test_a_batch_run_has_no_streaming_progress():
    p = beam.Pipeline(runner=SparkRunner(), options=PipelineOptions([]))
    _ = p | beam.Create([1]) | beam.Map(lambda x: x)
    result = p.run()
    result.wait_until_finish()
    assert result.streaming_progress() == ()


@pytest.fixture(scope="module")
def beam_tab_run(spark_session):
    """A finished run whose steps the Spark UI's Beam tab shows: "Group"
    (exact, one record dropped as late) and "Regroup" (at the 90%
    watermark); returns (its last progress record, the tab's URL)."""
    import beam_spark_runner

    stream = _one_late_element()
    p = beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(["--streaming"]))
    grouped = p | stream | beam.WindowInto(window.FixedWindows(10)) | "Group" >> beam.GroupByKey()
    with beam_spark_runner.watermark_percentile(0.9):
        _ = grouped | "Sizes" >> beam.MapTuple(lambda k, vs: ("all", len(vs))) | "Regroup" >> beam.GroupByKey()
    result = p.run()
    result.wait_until_finish()
    return result.streaming_progress()[-1], spark_session.sparkContext.uiWebUrl + "/beam/"


def _assert_shows_the_run(html, last):
    caption, rows = beam_tab_rows(html)
    # The table of the run's last micro-batch: every watermark at +infinity.
    assert caption.startswith("Micro-batch %d, processing time " % last.batch)
    assert set(rows) == {"Group", "Regroup"}
    for step in rows.values():
        assert (step["Input watermark"], step["Output watermark"]) == ("+infinity", "+infinity")
    assert (rows["Group"]["Watermark percentile"], rows["Regroup"]["Watermark percentile"]) == ("1", "0.9")
    assert (rows["Group"]["Late records"], rows["Group"]["Dropped late records"]) == ("0", "1")
    assert float(rows["Group"]["Late fraction"]) > 0 and rows["Regroup"]["Late fraction"] == "0.0000"


def test_the_spark_ui_beam_tab_shows_each_steps_watermarks_percentile_and_late_records(beam_tab_run):
    import urllib.request

    last, url = beam_tab_run
    with urllib.request.urlopen(url, timeout=30) as response:
        _assert_shows_the_run(response.read().decode("utf-8"), last)


def test_the_beam_tab_renders_in_a_headless_browser(beam_tab_run, tmp_path, request):
    """Chromium loads the page, runs Spark's scripts and shows the tab
    among the UI's tabs, with the same table."""
    last, url = beam_tab_run
    dom = require_browser(request, browser_dom(url, tmp_path))
    assert ">Beam</a>" in dom, dom[:2000]
    _assert_shows_the_run(dom, last)


@pytest.mark.parametrize("path", [[], ["--sdk_harness_only"]], ids=["plain", "sdk-harness"])
def test_a_lifted_combine_and_a_group_by_key_count_the_same_late_records_under_their_step_names(path):
    """Six records arrive together behind the watermark, within the allowed
    lateness, and four more after their window expired. The CombinePerKey is
    lifted (its keyed step receives one partial sum for the six), yet it
    counts records, as the GroupByKey over the same stream does; the
    pre-combine on the runner's plain path and in Beam's SDK harness."""
    on_time = [window.TimestampedValue(("k", i), i) for i in range(1, 6)]
    late = [window.TimestampedValue(("k", 10 * i), 5) for i in range(1, 7)]
    expired = [window.TimestampedValue(("k", 100 * i), 6) for i in range(1, 5)]
    stream = (
        TestStream()
        .add_elements(on_time)
        .advance_watermark_to(20)
        .add_elements(late)
        .advance_watermark_to(200)
        .add_elements(expired)
        .advance_watermark_to_infinity()
    )
    p = beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(["--streaming", *path]))
    windowed = (
        p
        | stream
        # The default trigger: it fires a LATE pane for late input and lets
        # Beam lift the combine.
        | beam.WindowInto(window.FixedWindows(10), allowed_lateness=30)
    )
    sums = windowed | "Sum" >> beam.CombinePerKey(sum)
    grouped = windowed | "Collect" >> beam.GroupByKey() | beam.MapTuple(lambda k, vs: (k, sum(vs)))
    # One ON_TIME pane (15), one LATE pane (210), as both compute them (the
    # empty final pane that closes the late window aside).
    for label, panes in (("Sum", sums), ("Collect", grouped)):
        nonempty = panes | f"{label}Nonempty" >> beam.Filter(lambda kv: kv[1])
        assert_that(nonempty, equal_to([("k", 15), ("k", 210)]), label=f"{label}Panes")
    result = p.run()
    result.wait_until_finish()
    records = result.streaming_progress()
    # The lifted combine's keyed step is the GroupByKey Beam builds inside it.
    for user_step, keyed_step in (("Sum", "Sum/Group"), ("Collect", "Collect")):
        stages = [r.stage(keyed_step) for r in records]
        assert (sum(s.late for s in stages), sum(s.dropped_late for s in stages)) == (6, 4), keyed_step
        for name, expected in (("late_records", 6), ("dropped_due_to_lateness", 4)):
            query = MetricsFilter().with_namespace(NAMESPACE).with_name(name).with_step(user_step)
            counters = result.metrics().query(query)["counters"]
            assert {c.key.step for c in counters} == {keyed_step}, (user_step, name)
            assert sum(c.committed for c in counters) == expected, (user_step, name)
