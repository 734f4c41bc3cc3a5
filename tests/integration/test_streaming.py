"""SparkRunner on Structured Streaming: per-stage watermarks, state and
timers across micro-batches, failures, metrics."""

import time

import apache_beam as beam
import pytest
from apache_beam.metrics import Metrics
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms import trigger, userstate, window
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.utils.timestamp import Timestamp

from beam_spark_runner import PipelineExecutionError, SparkRunner
from beam_spark_runner.result import PipelineState
from tests.splittable_dofns import ScaledPositions


def _pipeline(*args):
    return beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(["--streaming", *args]))


def _tv(value, ts):
    return window.TimestampedValue(value, ts)


class _PaneOf(beam.DoFn):
    def process(self, kv, w=beam.DoFn.WindowParam, pane=beam.DoFn.PaneInfoParam, ts=beam.DoFn.TimestampParam):
        yield kv[0], sorted(kv[1]) if isinstance(kv[1], list) else kv[1], int(w.start), pane.timing, int(ts)


def test_three_chained_group_by_keys_first_with_earliest_combiner_lose_nothing():
    """beam#23129's bug class: GBK1 stamps its pane at the EARLIEST element
    (t=1) when the watermark jumps to 100. With one pipeline-wide watermark
    GBK2 and GBK3 would see 100 and drop the pane as late; with per-stage
    watermarks nothing is late and every stage's pane is ON_TIME."""
    timing = beam.utils.windowed_value.PaneInfoTiming
    with _pipeline() as p:
        stream = (
            TestStream()
            .add_elements([_tv(("a", 1), 1), _tv(("a", 2), 9), _tv(("b", 5), 4)])
            .advance_watermark_to(100)
            .advance_watermark_to_infinity()
        )
        first = (
            p
            | stream
            | "W1"
            >> beam.WindowInto(window.FixedWindows(10), timestamp_combiner=window.TimestampCombiner.OUTPUT_AT_EARLIEST)
            | "G1" >> beam.GroupByKey()
            | "Sum1" >> beam.MapTuple(lambda k, vs: ("all", sum(vs)))
        )
        second = first | "W2" >> beam.WindowInto(window.FixedWindows(10)) | "G2" >> beam.GroupByKey()
        third = (
            second
            | "Sum2" >> beam.MapTuple(lambda k, vs: (k, sum(vs)))
            | "G3" >> beam.GroupByKey()
            | "Panes" >> beam.ParDo(_PaneOf())
        )
        assert_that(
            second | "Panes2" >> beam.ParDo(_PaneOf()),
            equal_to([("all", [3, 5], 0, timing.ON_TIME, 9)]),
            label="second",
        )
        assert_that(third, equal_to([("all", [8], 0, timing.ON_TIME, 9)]), label="third")


class _BufferUntilTimer(beam.DoFn):
    """Stateful DoFn whose state and event-time timer span micro-batches."""

    BUFFER = userstate.BagStateSpec("buffer", beam.coders.VarIntCoder())
    FLUSH = userstate.TimerSpec("flush", TimeDomain.WATERMARK)

    def process(
        self, kv, ts=beam.DoFn.TimestampParam, buffer=beam.DoFn.StateParam(BUFFER), flush=beam.DoFn.TimerParam(FLUSH)
    ):
        buffer.add(kv[1])
        flush.set(Timestamp.of(50))

    @userstate.on_timer(FLUSH)
    def on_flush(self, key=beam.DoFn.KeyParam, buffer=beam.DoFn.StateParam(BUFFER)):
        yield key, sorted(buffer.read())
        buffer.clear()


def test_stateful_dofn_state_and_event_time_timers_span_batches():
    with _pipeline() as p:
        stream = (
            TestStream()
            .add_elements([_tv(("k", 1), 1), _tv(("j", 7), 2)])
            .advance_watermark_to(20)
            .add_elements([_tv(("k", 2), 30)])
            .advance_watermark_to(60)
            .add_elements([_tv(("k", 3), 70)])
            .advance_watermark_to_infinity()
        )
        out = p | stream | beam.ParDo(_BufferUntilTimer())
        assert_that(out, equal_to([("k", [1, 2]), ("j", [7]), ("k", [3])]))


def test_processing_time_trigger_follows_the_test_stream_clock():
    with _pipeline() as p:
        stream = (
            TestStream()
            .add_elements([("k", 1), ("k", 2)])
            .advance_processing_time(10)
            .add_elements([("k", 3)])
            .advance_processing_time(10)
            .advance_watermark_to_infinity()
        )
        out = (
            p
            | stream
            | beam.WindowInto(
                window.GlobalWindows(),
                trigger=trigger.Repeatedly(trigger.AfterProcessingTime(5)),
                accumulation_mode=trigger.AccumulationMode.DISCARDING,
            )
            | beam.GroupByKey()
            | beam.MapTuple(lambda k, vs: (k, sorted(vs)))
        )
        # ... and when the stream ends the global window closes: its ON_TIME
        # pane, empty after the last processing-time firing, fires under
        # on_time_behavior FIRE_ALWAYS (triggers/closing.py).
        assert_that(out, equal_to([("k", [1, 2]), ("k", [3]), ("k", [])]))


class _EarlyPanes(beam.DoFn):
    def process(self, kv, pane=beam.DoFn.PaneInfoParam):
        if pane.timing == beam.utils.windowed_value.PaneInfoTiming.EARLY:
            yield kv[0], sorted(kv[1])


def test_processing_time_deadline_counts_from_the_batch_step_a_new_key_arrives_after():
    """The first elements of a key, after the stream's clock moved in the
    same micro-batch: their processing-time deadline is that time plus the
    delay, not the previous batch's time plus the delay (which fired the
    first element alone, 5 s early)."""
    with _pipeline() as p:
        stream = (
            TestStream()
            .advance_processing_time(5000)
            .add_elements([_tv(("k", 1), 1)])
            .advance_processing_time(5)
            .add_elements([_tv(("k", 2), 2)])
            .advance_processing_time(5)
            .advance_watermark_to_infinity()
        )
        out = (
            p
            | stream
            | beam.WindowInto(
                window.FixedWindows(100),
                trigger=trigger.Repeatedly(trigger.AfterProcessingTime(10)),
                accumulation_mode=trigger.AccumulationMode.DISCARDING,
            )
            | beam.GroupByKey()
            | beam.ParDo(_EarlyPanes())
        )
        assert_that(out, equal_to([("k", [1, 2])]))


def test_user_error_fails_the_streaming_run_with_its_message():
    def explode(x):
        raise ValueError("streaming boom %s" % x)

    p = _pipeline()
    _ = p | TestStream().add_elements([1]).advance_watermark_to_infinity() | beam.Map(explode)
    result = p.run()
    with pytest.raises(PipelineExecutionError, match="streaming boom 1"):
        result.wait_until_finish()
    assert result.state == PipelineState.FAILED


def test_metrics_of_a_streaming_run():
    counter = Metrics.counter("streaming", "seen")

    def count(x):
        counter.inc()
        return x

    p = _pipeline()
    _ = (
        p
        | TestStream()
        .add_elements([1, 2, 3])
        .advance_watermark_to(10)
        .add_elements([4])
        .advance_watermark_to_infinity()
        | beam.Map(count)
        | beam.Map(lambda x: (x % 2, x))
        # Allowed lateness: the GroupByKey's output watermark trails by a
        # batch, so the run takes more than one.
        | beam.WindowInto(window.FixedWindows(5), allowed_lateness=1)
        | beam.GroupByKey()
    )
    started = time.time()
    result = p.run()
    assert result.wait_until_finish() == PipelineState.DONE
    counters = result.metrics().query(MetricsFilter().with_name("seen"))["counters"]
    assert sum(c.committed for c in counters) == 4
    # The runner's own progress metrics: per-stage watermarks and lag, batches.
    from beam_spark_runner.streaming.progress import NAMESPACE

    ours = result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))
    # Gauge timestamps are seconds since the epoch, as Beam's GaugeData has them.
    assert all(started <= g.committed.timestamp <= time.time() for g in ours["gauges"]), [
        g.committed.timestamp for g in ours["gauges"]
    ]
    gauges = {(g.key.step, g.key.metric.name): g.committed.value for g in ours["gauges"]}
    stages = {step for step, name in gauges if name == "output_watermark_ms"}
    assert stages, gauges
    for stage in stages:  # the run ended: every watermark reached +infinity
        assert gauges[(stage, "input_watermark_ms")] == gauges[(stage, "output_watermark_ms")] > 9e15
        assert (stage, "watermark_lag_ms") in gauges
    batches = [c.committed for c in ours["counters"] if c.key.metric.name == "batches"]
    durations = [d.committed for d in ours["distributions"] if d.key.metric.name == "batch_duration_ms"]
    assert batches and batches[0] >= 2 and durations[0].count == batches[0]


def test_a_streaming_run_lists_its_metrics_in_the_spark_ui_when_it_ends(spark_session):
    from tests.integration.test_batch_runner import ui_metric_stages

    counter = Metrics.counter("streaming_ui", "ui_stream_seen")

    def count(x):
        counter.inc()
        return x

    p = _pipeline()
    _ = (
        p
        | TestStream().add_elements([1, 2]).advance_watermark_to(10).add_elements([3]).advance_watermark_to_infinity()
        | "UiCount" >> beam.Map(count)
    )
    result = p.run()
    assert result.wait_until_finish() == PipelineState.DONE
    stages = ui_metric_stages(spark_session, "ui_stream_seen")
    assert list(stages) == ["Beam metrics: streaming run finished"], stages
    (shown,) = stages.values()
    assert shown["Beam counter UiCount streaming_ui:ui_stream_seen"] == "3"
    # The runner's own progress metrics are listed too, as the result has them.
    from beam_spark_runner.streaming.progress import NAMESPACE

    (batches,) = result.metrics().query(MetricsFilter().with_namespace(NAMESPACE).with_name("batches"))["counters"]
    assert shown["Beam counter (pipeline) %s:batches" % NAMESPACE] == str(batches.committed) != "0"


def test_a_running_streaming_pipeline_refreshes_its_metrics_in_the_spark_ui(spark_session, monkeypatch):
    from apache_beam.transforms.periodicsequence import PeriodicImpulse
    from beam_spark_runner.execution import streaming_execution
    from tests.integration.test_batch_runner import ui_metric_stages

    monkeypatch.setattr(streaming_execution, "UI_METRICS_INTERVAL_S", 0.5)
    counter = Metrics.counter("streaming_ui", "ui_ticks")

    def count(x):
        counter.inc()
        return x

    start = time.time()
    with _pipeline() as p:
        _ = (
            p
            | PeriodicImpulse(start_timestamp=start, stop_timestamp=start + 4, fire_interval=0.5)
            | "UiTicks" >> beam.Map(count)
        )
    stages = ui_metric_stages(spark_session, "ui_ticks")
    assert "Beam metrics: streaming run so far" in stages, stages
    assert stages["Beam metrics: streaming run finished"]["Beam counter UiTicks streaming_ui:ui_ticks"] == "8"


def test_periodic_impulse_is_an_unbounded_source_whose_watermark_closes_windows():
    """An unbounded splittable DoFn: PeriodicImpulse self-checkpoints until
    its next firing time; the runner resumes it in a later micro-batch and
    holds the watermark at its estimate, so each window fires once, whole."""
    import time
    from apache_beam.transforms.periodicsequence import PeriodicImpulse

    start = (int(time.time()) // 3 + 1) * 3  # aligned to the 3 s windows
    with _pipeline() as p:
        out = (
            p
            | PeriodicImpulse(start_timestamp=start, stop_timestamp=start + 6, fire_interval=1)
            | beam.Map(lambda t: ("k", 1))
            | beam.WindowInto(window.FixedWindows(3))
            | beam.CombinePerKey(sum)
            | beam.Values()
        )
        assert_that(out, equal_to([3, 3]))


class _ScaledRunningSum(beam.DoFn):
    """A running sum per key in state; each value is scaled by a side input."""

    TOTAL = userstate.ReadModifyWriteStateSpec("total", beam.coders.VarIntCoder())

    def process(self, kv, factor, total=beam.DoFn.StateParam(TOTAL)):
        value = (total.read() or 0) + kv[1] * factor
        total.write(value)
        yield kv[0], value


def _late_side_factor_stream():
    """A side input of 10 in window [10, 20), complete only once its
    watermark passes 20 (after the main inputs below arrived)."""
    return (
        TestStream()
        .advance_watermark_to(10)
        .add_elements([_tv(10, 12)])
        .advance_watermark_to(20)
        .advance_watermark_to_infinity()
    )


def test_stateful_dofn_with_a_side_input_waits_for_it_and_keeps_its_state():
    side_stream = _late_side_factor_stream()
    main_stream = (
        TestStream()
        .add_elements([_tv(("a", 1), 12), _tv(("a", 2), 13), _tv(("b", 5), 14)])
        .advance_watermark_to(30)
        .add_elements([_tv(("a", 4), 15)])
        .advance_watermark_to_infinity()
    )
    with _pipeline() as p:
        # The side window [10, 20) is complete only once the side stream's
        # watermark passes 20: every main element of that window waits for it.
        factor = p | "Side" >> side_stream | "SideWindows" >> beam.WindowInto(window.FixedWindows(10))
        out = (
            p
            | "Main" >> main_stream
            | "MainWindows" >> beam.WindowInto(window.FixedWindows(10))
            | beam.ParDo(_ScaledRunningSum(), beam.pvalue.AsSingleton(factor))
        )
        assert_that(out, equal_to([("a", 10), ("a", 30), ("b", 50), ("a", 70)]))


def test_splittable_dofn_with_a_side_input_waits_for_it_and_resumes_with_it():
    side_stream = _late_side_factor_stream()
    main_stream = (
        TestStream()
        .add_elements([_tv(("a", 3), 12), _tv(("b", 2), 13)])
        .advance_watermark_to(30)
        .advance_watermark_to_infinity()
    )
    with _pipeline() as p:
        factor = p | "Side" >> side_stream | "SideWindows" >> beam.WindowInto(window.FixedWindows(10))
        out = (
            p
            | "Main" >> main_stream
            | "MainWindows" >> beam.WindowInto(window.FixedWindows(10))
            | beam.ParDo(ScaledPositions(), beam.pvalue.AsSingleton(factor))
        )
        assert_that(out, equal_to([("a", 0), ("a", 10), ("a", 20), ("b", 0), ("b", 10)]))


class _RunningSum(beam.DoFn):
    TOTAL = userstate.ReadModifyWriteStateSpec("total", beam.coders.VarIntCoder())

    def process(self, kv, total=beam.DoFn.StateParam(TOTAL)):
        value = (total.read() or 0) + kv[1]
        total.write(value)
        yield kv[0], value


def test_two_stateful_dofns_reading_one_pcollection_both_see_every_element():
    import typing

    stream = (
        TestStream()
        .add_elements([("a", 1), ("b", 5), ("a", 2)])
        .advance_watermark_to(10)
        .add_elements([("a", 3)])
        .advance_watermark_to_infinity()
    )
    with _pipeline() as p:
        keyed = p | stream.with_output_types(typing.Tuple[str, int])
        first = keyed | "First" >> beam.ParDo(_RunningSum())
        second = keyed | "Second" >> beam.ParDo(_RunningSum()) | beam.MapTuple(lambda k, v: (k, 10 * v))
        assert_that(first, equal_to([("a", 1), ("a", 3), ("b", 5), ("a", 6)]), label="first")
        assert_that(second, equal_to([("a", 10), ("a", 30), ("b", 50), ("a", 60)]), label="second")


class _ThreeEventsPerTick(beam.DoFn):
    """Three events at each tick's time, keyed by which executor ran this
    DoFn (plain-Python steps or Beam's SDK harness, from the call stack)."""

    def process(self, tick):
        import traceback

        files = [frame.filename for frame in traceback.extract_stack()]
        who = (
            "plain"
            if any(f.endswith("plain_steps.py") for f in files)
            else "harness"
            if any(f.endswith("bundle_processor.py") for f in files)
            else "unknown"
        )
        for _ in range(3):
            yield window.TimestampedValue((who, 1), tick)


@pytest.mark.parametrize("harness_only", [False, True], ids=["plain", "harness"])
def test_work_after_periodic_impulse_runs_on_the_chosen_executor_with_the_same_result(harness_only):
    """The stage reading PeriodicImpulse's output is its own operator, spread
    over key-groups; it runs as plain Python unless --sdk_harness_only."""
    import time
    from apache_beam.transforms.periodicsequence import PeriodicImpulse

    start = (int(time.time()) // 3 + 1) * 3
    with _pipeline(*(["--sdk_harness_only"] if harness_only else [])) as p:
        out = (
            p
            | PeriodicImpulse(start_timestamp=start, stop_timestamp=start + 6, fire_interval=1)
            | beam.ParDo(_ThreeEventsPerTick())
            | beam.WindowInto(window.FixedWindows(3))
            | beam.CombinePerKey(sum)
        )
        who = "harness" if harness_only else "plain"
        assert_that(out, equal_to([(who, 9), (who, 9)]))


class _WritePerElement(beam.DoFn):
    """An idempotent sink, as in examples/streaming_leaderboard.py: one file
    per element, named by the element, so a replayed batch rewrites it. The
    content says which run wrote it."""

    def __init__(self, directory, run):
        self.directory, self.run = directory, run

    def process(self, element):
        import os

        path = os.path.join(self.directory, "%d.txt" % element)
        with open(path + ".tmp", "w") as f:
            f.write(self.run)
        os.replace(path + ".tmp", path)


def _ticks(directory, checkpoint_dir, start, run):
    from apache_beam.transforms.periodicsequence import PeriodicImpulse

    p = _pipeline("--checkpoint_dir=%s" % checkpoint_dir)
    (
        p
        | PeriodicImpulse(start_timestamp=start, stop_timestamp=start + 16, fire_interval=0.5)
        | beam.Map(lambda t: int(t * 10))
        | beam.Reshuffle()
        | beam.ParDo(_WritePerElement(directory, run))
    )
    return p


def _batches(result):
    """Micro-batches the run finished so far (the runner's progress metric)."""
    from beam_spark_runner.streaming.progress import NAMESPACE

    counters = result.metrics().query(MetricsFilter().with_namespace(NAMESPACE).with_name("batches"))["counters"]
    return sum(c.committed for c in counters)


def test_checkpoint_dir_resumes_a_stopped_run_without_losing_output(tmp_path, monkeypatch):
    import os
    import time

    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    out.mkdir()
    # Ticks start once the query surely runs (a query starts in seconds), so
    # the stop below falls in the middle of the ticks.
    start = int(time.time()) + 20
    expected = {"%d.txt" % (start * 10 + 5 * i) for i in range(32)}
    first = _ticks(str(out), str(checkpoint), start, "first").run()
    deadline = time.time() + 120
    while not os.listdir(out) and time.time() < deadline:
        time.sleep(0.2)
    # Outputs appear while their batch runs; stop only once that batch has
    # committed (two more batches finished), or a stop would replay it all.
    seen = _batches(first)
    while _batches(first) < seen + 2 and time.time() < deadline:
        time.sleep(0.2)
    first.cancel()
    assert first.wait_until_finish() == PipelineState.CANCELLED
    written_first = set(os.listdir(out))
    assert written_first and written_first < expected, "stopped too late to show a resume"
    # Same pipeline, same checkpoint, given only as a URI, from a driver in
    # another working directory: Spark's offsets, the SDF's residuals in the
    # state store, the journaled times and the runner's records (hold
    # reports, plan record: all through the checkpoint's Hadoop file
    # system) continue where they stopped.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    second = _ticks(str(out), "file://%s" % checkpoint, start, "second").run()
    assert second.wait_until_finish() == PipelineState.DONE
    assert set(os.listdir(out)) == expected  # nothing lost
    by_run = {name: (out / name).read_text() for name in expected}
    # Resumed, not restarted: what the first run committed is not redone (a
    # fresh run would rewrite every file; a batch cut by the stop may replay).
    kept = [name for name, run in by_run.items() if run == "first"]
    assert kept, "the second run redid everything: it did not resume"


def test_match_continuously_reads_files_added_to_a_growing_directory(tmp_path):
    """fileio.MatchContinuously (Watch, an unbounded SDF polling the pattern
    once per resume, plus a stateful de-duplication): a file added while the
    run is going is read too, and the run ends after its last poll."""
    import os
    import threading
    import time
    from apache_beam.io import fileio

    source, out = tmp_path / "in", tmp_path / "out"
    source.mkdir()
    out.mkdir()
    (source / "f0.txt").write_text("a\nb\n")

    def add_file_once_first_is_read():
        deadline = time.time() + 120
        while not os.listdir(out) and time.time() < deadline:
            time.sleep(0.1)
        (source / "f1.tmp").write_text("c\n")
        os.replace(source / "f1.tmp", source / "f1.txt")

    writer = threading.Thread(target=add_file_once_first_is_read, daemon=True)
    writer.start()
    with _pipeline() as p:
        (
            p
            # start_timestamp explicitly: Beam's default is evaluated when
            # fileio is imported, and its poll budget counts from there (a
            # suite importing it 20 minutes earlier polled for 20 minutes).
            | fileio.MatchContinuously(
                str(source / "*.txt"), interval=1, start_timestamp=time.time(), stop_timestamp=time.time() + 8
            )
            | fileio.ReadMatches()
            | beam.FlatMap(lambda f: f.read_utf8().splitlines())
            | beam.Map(lambda line: ord(line))
            | beam.ParDo(_WritePerElement(str(out), "run"))
        )
    writer.join()
    assert sorted(os.listdir(out)) == sorted("%d.txt" % ord(c) for c in "abc")


def test_a_streaming_run_leaves_the_sessions_sql_settings_as_they_were(spark_session):
    keys = (
        "spark.sql.streaming.stateStore.providerClass",
        "spark.sql.shuffle.partitions",
        "spark.sql.streaming.stateStore.checkpointFormatVersion",
    )
    before = {k: spark_session.conf.get(k, None) for k in keys}
    with _pipeline() as p:
        out = (
            p
            | TestStream().add_elements([("k", 1)]).advance_watermark_to_infinity()
            | beam.WindowInto(window.FixedWindows(10))
            | beam.GroupByKey()
            | beam.MapTuple(lambda k, vs: (k, list(vs)))
        )
        assert_that(out, equal_to([("k", [1])]))
    assert {k: spark_session.conf.get(k, None) for k in keys} == before


def test_a_stage_reading_a_groupbykey_output_and_a_side_input():
    """The GroupByKey's output and the side input reach one fused stage: the
    grouped elements wait for the side input one by one (they used to reach
    it as whole blocks, and the stage failed with a KeyError on start)."""
    with _pipeline() as p:
        stream = (
            TestStream()
            .add_elements([_tv(("a", 1), 1), _tv(("a", 2), 2), _tv(("b", 3), 3)])
            .advance_watermark_to_infinity()
        )
        factor = p | "Factor" >> beam.Create([10])
        out = (
            p
            | stream
            | beam.WindowInto(window.FixedWindows(10))
            | beam.GroupByKey()
            | beam.Map(lambda kv, f: (kv[0], sum(kv[1]) * f), beam.pvalue.AsSingleton(factor))
        )
        assert_that(out, equal_to([("a", 30), ("b", 30)]))


def _runner_counter_after_run(p, name):
    """Runs `p` to the end; the sum of the runner's counter `name`."""
    from beam_spark_runner.streaming.progress import NAMESPACE

    result = p.run()
    assert result.wait_until_finish() == PipelineState.DONE
    counters = result.metrics().query(MetricsFilter().with_namespace(NAMESPACE).with_name(name))["counters"]
    return sum(c.committed for c in counters)


@pytest.mark.parametrize(
    "lateness_s, expected, dropped",
    [
        (0, [("a", 10), ("b", 20)], 1),
        (1000, [("a", 10), ("b", 20), ("late", 10)], 0),
    ],
)
def test_side_windows_expire_with_the_main_inputs_lateness(lateness_s, expected, dropped):
    """A side window no main element can need any more is dropped once the
    watermark passes its end plus the main input's allowed lateness, so a
    long run holds bounded side data. "late" comes after the watermark
    reached 100 and needs side window [0, 10): without lateness that window
    is gone, and "late" is dropped and counted rather than run against a
    side input that lost its data; with 1000 s of lateness the window is
    kept and "late" sees its value."""
    side_stream = TestStream().add_elements([_tv(10, 5), _tv(20, 15)]).advance_watermark_to_infinity()
    main_stream = (
        TestStream()
        .add_elements([_tv("a", 6), _tv("b", 16)])
        .advance_watermark_to(100)
        .add_elements([_tv("late", 7)])
        .advance_watermark_to_infinity()
    )
    p = _pipeline()
    factor = p | "Side" >> side_stream | "SideWindows" >> beam.WindowInto(window.FixedWindows(10))
    out = (
        p
        | "Main" >> main_stream
        | "MainWindows" >> beam.WindowInto(window.FixedWindows(10), allowed_lateness=lateness_s)
        | beam.Map(lambda x, f: (x, f), beam.pvalue.AsSingleton(factor))
    )
    assert_that(out, equal_to(expected))
    assert _runner_counter_after_run(p, "dropped_late_for_side_input") == dropped


def test_a_splittable_dofns_residual_keeps_the_side_window_it_reads():
    """ "a" (window [0, 10)) runs one position per bundle; the watermark
    reaches 100 (lateness 0) before its residuals resume. Side window
    [0, 10) stays while a residual of "a" needs it (each position sees
    factor 10: a dropped window would fail the singleton view), then goes."""
    side_stream = TestStream().add_elements([_tv(10, 5), _tv(20, 15)]).advance_watermark_to_infinity()
    main_stream = (
        TestStream()
        .add_elements([_tv(("a", 6), 6), _tv(("b", 1), 16)])
        .advance_watermark_to(100)
        .advance_watermark_to_infinity()
    )
    p = _pipeline()
    factor = p | "Side" >> side_stream | "SideWindows" >> beam.WindowInto(window.FixedWindows(10))
    out = (
        p
        | "Main" >> main_stream
        | "MainWindows" >> beam.WindowInto(window.FixedWindows(10))
        | beam.ParDo(ScaledPositions(), beam.pvalue.AsSingleton(factor))
    )
    assert_that(out, equal_to([("a", 10 * i) for i in range(6)] + [("b", 0)]))
    assert _runner_counter_after_run(p, "dropped_late_for_side_input") == 0


class _BagSoFar(beam.DoFn):
    """Outputs, per element, its window's start and the window's bag so far."""

    BAG = userstate.BagStateSpec("bag", beam.coders.VarIntCoder())

    def process(self, kv, w=beam.DoFn.WindowParam, bag=beam.DoFn.StateParam(BAG)):
        bag.add(kv[1])
        yield int(w.start), sorted(bag.read())


@pytest.mark.parametrize(
    "lateness_s, expected, dropped",
    [
        (0, [(0, [1]), (0, [1, 2]), (10, [4])], 1),
        (100, [(0, [1]), (0, [1, 2]), (0, [1, 2, 3]), (10, [4])], 0),
    ],
)
def test_a_stateful_dofns_window_expires_with_its_allowed_lateness(lateness_s, expected, dropped):
    """As Beam's runners (StatefulDoFnRunner): once the watermark passes a
    window's end plus the allowed lateness, its state goes and input for it
    is droppably late: dropped and counted. 3 comes after the watermark
    reached 15, for window [0, 10)."""
    stream = (
        TestStream()
        .add_elements([_tv(("k", 1), 1), _tv(("k", 2), 2)])
        .advance_watermark_to(15)
        .add_elements([_tv(("k", 3), 3), _tv(("k", 4), 12)])
        .advance_watermark_to_infinity()
    )
    p = _pipeline()
    out = p | stream | beam.WindowInto(window.FixedWindows(10), allowed_lateness=lateness_s) | beam.ParDo(_BagSoFar())
    assert_that(out, equal_to(expected))
    assert _runner_counter_after_run(p, "dropped_due_to_lateness") == dropped


def test_a_stateful_dofns_late_input_within_its_allowed_lateness_is_counted_late():
    """3 arrives after the watermark passed its window [0, 10), within the
    allowed lateness: the DoFn sees it, and it counts as a late record."""
    stream = (
        TestStream()
        .add_elements([_tv(("k", 1), 1)])
        .advance_watermark_to(15)
        .add_elements([_tv(("k", 3), 3), _tv(("k", 4), 12)])
        .advance_watermark_to_infinity()
    )
    p = _pipeline()
    out = p | stream | beam.WindowInto(window.FixedWindows(10), allowed_lateness=100) | beam.ParDo(_BagSoFar())
    assert_that(out, equal_to([(0, [1]), (0, [1, 3]), (10, [4])]))
    assert _runner_counter_after_run(p, "late_records") == 1


@pytest.mark.parametrize(
    "mode, expected",
    [
        (trigger.AccumulationMode.DISCARDING, [("a", ["m1"]), ("b", ["m1"]), ("c", ["m2", "m3"]), ("d", ["m4"])]),
        (
            trigger.AccumulationMode.ACCUMULATING,
            [("a", ["m1"]), ("b", ["m1"]), ("c", ["m1", "m2", "m3"]), ("d", ["m1", "m2", "m3", "m4"])],
        ),
    ],
    ids=["discarding", "accumulating"],
)
def test_a_triggered_side_input_in_the_global_window_is_seen_at_its_latest_firing(mode, expected):
    """Beam's "slowly updating side input": an unbounded side input in the
    global window with a repeated processing-time trigger. The main input
    waits for its first firing, then each element sees the latest firing
    (not the whole side input, which never completes while its source
    runs): b arrives after m2 but before the next firing, so it still sees
    m1; d after the firing that m4 came in time for."""
    stream = (
        TestStream()
        .add_elements([_tv("m1", 0)], tag="side")
        .add_elements([_tv("a", 1)], tag="main")
        .advance_processing_time(2)
        .add_elements([_tv("m2", 2), _tv("m3", 3)], tag="side")
        .add_elements([_tv("b", 4)], tag="main")
        .advance_processing_time(2)
        .add_elements([_tv("c", 5)], tag="main")
        .add_elements([_tv("m4", 6)], tag="side")
        .advance_processing_time(2)
        .add_elements([_tv("d", 7)], tag="main")
        .advance_watermark_to_infinity(tag="main")
        .advance_watermark_to_infinity(tag="side")
    )
    with _pipeline() as p:
        streams = p | stream
        side = streams["side"] | beam.WindowInto(
            window.GlobalWindows(), trigger=trigger.Repeatedly(trigger.AfterProcessingTime(1)), accumulation_mode=mode
        )
        out = streams["main"] | beam.Map(lambda x, models: (x, sorted(models)), beam.pvalue.AsList(side))
        assert_that(out, equal_to(expected))
