"""SparkRunner on the test process's SparkSession: where code runs, that GBK
is a real Spark shuffle, failures, metrics and UI names."""

import json
import os
import urllib.error
import urllib.request

import apache_beam as beam
import pytest
from apache_beam.metrics import Metrics
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to

from beam_spark_runner import PipelineExecutionError, SparkRunner
from beam_spark_runner.result import PipelineState


def _pipeline(*args):
    return beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(list(args)))


def _rest(spark, path):
    url = "%s/api/v1/applications/%s/%s" % (spark.sparkContext.uiWebUrl, spark.sparkContext.applicationId, path)
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.load(response)


def test_user_code_runs_in_executor_processes_not_the_driver():
    driver_pid = os.getpid()

    def not_driver(pids):
        assert pids, "no output"
        assert driver_pid not in pids, "user code ran in the driver process %d" % driver_pid

    with _pipeline() as p:
        pids = p | beam.Create(range(20)) | beam.Map(lambda _: os.getpid()) | beam.Distinct()
        assert_that(pids, not_driver)


def test_group_by_key_is_a_spark_shuffle(spark_session):
    with _pipeline() as p:
        grouped = (
            p
            | beam.Create([(i % 5, i) for i in range(200)])
            | "ShuffleTestGroup" >> beam.GroupByKey()
            | beam.MapTuple(lambda k, vs: (k, sum(vs)))
        )
        assert_that(grouped, equal_to([(k, sum(range(k, 200, 5))) for k in range(5)]))
    stages = _rest(spark_session, "stages")
    writes = [s for s in stages if s["name"] == "ShuffleTestGroup" and s["shuffleWriteBytes"] > 0]
    reads = [s for s in stages if s["shuffleReadBytes"] > 0 and "ShuffleTestGroup" in s["name"]]
    assert writes, "no Spark stage named after the GroupByKey wrote shuffle data: %s" % [
        (s["name"], s["shuffleWriteBytes"]) for s in stages
    ]
    assert reads, "no Spark stage read the GroupByKey's shuffle"


def test_spark_stages_carry_beam_transform_names(spark_session):
    with _pipeline() as p:
        (
            p
            | "NamedSource" >> beam.Create([1, 2, 3])
            | "NamedKey" >> beam.Map(lambda x: (x % 2, x))
            | "NamedGroup" >> beam.GroupByKey()
            | "NamedSum" >> beam.MapTuple(lambda k, vs: sum(vs))
        )
    names = {s["name"] for s in _rest(spark_session, "stages")}
    assert "NamedGroup" in names
    assert any(n.startswith("NamedGroup/Read") or "NamedSum" in n for n in names), names


class _Explode(beam.DoFn):
    def process(self, element):
        if element == 3:
            raise ValueError("boom-%d from user code" % element)
        yield element


def test_dofn_exception_fails_pipeline_with_traceback_and_transform_name():
    p = _pipeline()
    p | beam.Create([1, 2, 3, 4]) | "ExplodeOnThree" >> beam.ParDo(_Explode())
    result = p.run()
    with pytest.raises(PipelineExecutionError) as e:
        result.wait_until_finish()
    assert result.state == PipelineState.FAILED
    message = str(e.value)
    assert "boom-3 from user code" in message
    assert "ExplodeOnThree" in message
    assert "Traceback" in message and "in process" in message

    # The session is still usable for the next pipeline.
    with _pipeline() as p:
        assert_that(p | beam.Create([1, 2]) | beam.Map(lambda x: x * 10), equal_to([10, 20]))


def test_metrics_are_aggregated_across_executors():
    class Count(beam.DoFn):
        def __init__(self):
            self.seen = Metrics.counter("test", "seen")
            self.sizes = Metrics.distribution("test", "sizes")

        def process(self, x):
            self.seen.inc()
            self.sizes.update(x)
            yield x

    p = _pipeline()
    p | beam.Create(list(range(1, 101)), reshuffle=True) | beam.Reshuffle() | beam.ParDo(Count())
    result = p.run()
    assert result.wait_until_finish() == PipelineState.DONE
    counters = result.metrics().query(MetricsFilter().with_name("seen"))["counters"]
    assert [c.committed for c in counters] == [100]
    dist = result.metrics().query(MetricsFilter().with_name("sizes"))["distributions"][0].committed
    assert (dist.count, dist.sum, dist.min, dist.max) == (100, 5050, 1, 100)


def ui_metric_stages(spark, metric_name):
    """{job description: {accumulator name: value}} of the Spark UI's "Beam
    metrics" jobs listing an accumulator whose name contains `metric_name`
    (stages the UI no longer retains are skipped: the session is shared)."""
    found = {}
    for job in _rest(spark, "jobs"):
        description = job.get("description") or ""
        if not description.startswith("Beam metrics"):
            continue
        for stage_id in job["stageIds"]:
            try:
                attempts = _rest(spark, "stages/%d" % stage_id)
            except urllib.error.HTTPError as e:
                if e.code == 404:
                    continue
                raise
            for attempt in attempts:
                accumulators = {a["name"]: a["value"] for a in attempt.get("accumulatorUpdates", [])}
                if any(metric_name in name for name in accumulators):
                    found[description] = accumulators
    return found


def test_metrics_are_listed_in_the_spark_ui_with_their_committed_values(spark_session):
    class Measure(beam.DoFn):
        def process(self, x):
            Metrics.counter("ui", "ui_seen").inc()
            Metrics.distribution("ui", "ui_sizes").update(x)
            Metrics.string_set("ui", "ui_parity").add("odd" if x % 2 else "even")
            yield x

    p = _pipeline()
    p | beam.Create(list(range(1, 21)), reshuffle=True) | "UiMeasure" >> beam.ParDo(Measure())
    result = p.run()
    assert result.wait_until_finish() == PipelineState.DONE
    stages = ui_metric_stages(spark_session, "ui:ui_seen")
    assert list(stages) == ["Beam metrics: pipeline finished"], stages
    (shown,) = stages.values()
    assert shown == {
        "Beam counter UiMeasure ui:ui_seen": "20",
        "Beam distribution UiMeasure ui:ui_sizes": "count=20 sum=210 min=1 max=20 mean=10.5",
        "Beam string set UiMeasure ui:ui_parity": "{'even', 'odd'}",
    }


def test_flatten_side_inputs_and_windowed_group():
    from apache_beam.transforms import window

    with _pipeline("--parallelism=3") as p:
        a = p | "A" >> beam.Create([1, 2])
        b = p | "B" >> beam.Create([3])
        side = p | "S" >> beam.Create([("x", 100)])
        flat = (a, b) | beam.Flatten()
        out = flat | beam.Map(lambda v, d: v + d["x"], beam.pvalue.AsDict(side))
        assert_that(out, equal_to([101, 102, 103]))
        windowed = (
            p
            | "T" >> beam.Create([1, 2, 11])
            | beam.Map(lambda t: window.TimestampedValue(("k", t), t))
            | beam.WindowInto(window.FixedWindows(10))
            | beam.GroupByKey()
            | beam.MapTuple(lambda k, vs: sorted(vs))
        )
        assert_that(windowed, equal_to([[1, 2], [11]]), label="windowed")


def test_bad_spark_conf_is_a_clear_error():
    from beam_spark_runner.options import parse_spark_conf

    with pytest.raises(ValueError, match="--spark_conf expects KEY=VALUE, got 'oops'"):
        parse_spark_conf(["spark.a=1", "oops"])
    assert parse_spark_conf(["spark.a=1", "spark.b=x=y"]) == {"spark.a": "1", "spark.b": "x=y"}


def test_run_is_asynchronous_and_cancel_stops_it():
    import time

    def slow(x):
        time.sleep(0.5)
        return x

    p = _pipeline()
    p | beam.Create(list(range(200)), reshuffle=True) | beam.Map(slow)
    result = p.run()
    assert result.state == PipelineState.RUNNING
    assert result.wait_until_finish(duration=200) is None  # still running after 200 ms
    started = time.time()
    assert result.cancel() == PipelineState.CANCELLED
    assert time.time() - started < 60, "cancel did not stop the Spark jobs promptly"
    assert result.wait_until_finish() == PipelineState.CANCELLED
    # The session is usable afterwards.
    with _pipeline() as p:
        assert_that(p | beam.Create([1]) | beam.Map(lambda x: x + 1), equal_to([2]))
