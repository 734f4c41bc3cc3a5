"""User code's log records reach the driver's logging (worker/log_forwarding.py):
from Spark's Python workers, in batch and streaming, also from a failing
task, at the levels Beam's SDK-harness options ask for."""

import logging
import os
import re

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms import userstate

from beam_spark_runner import PipelineExecutionError, SparkRunner

LOGGER = "wl_test.dofn"


def _pipeline(*args):
    return beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(list(args)))


def _log_each(x):
    log = logging.getLogger(LOGGER)
    log.info("saw %s", x)
    if x % 5 == 0:
        log.warning("multiple of five: %d", x)
    return x


def _forwarded(caplog):
    return [r for r in caplog.records if r.name == LOGGER]


def test_batch_dofn_logs_reach_the_driver_from_the_workers(caplog):
    caplog.set_level(logging.INFO)
    with _pipeline() as p:
        out = p | beam.Create(list(range(20))) | "Log" >> beam.Map(_log_each)
        assert_that(out, equal_to(list(range(20))))
    records = _forwarded(caplog)
    assert sorted(r.getMessage() for r in records if r.levelno == logging.INFO) == sorted(
        "saw %d" % i for i in range(20)
    )
    assert sorted(r.getMessage() for r in records if r.levelno == logging.WARNING) == sorted(
        "multiple of five: %d" % i for i in (0, 5, 10, 15)
    )
    assert all(r.process != os.getpid() for r in records), "logged in Spark's Python workers"
    # The fused Spark stage that ran Log, named by its first and last transforms.
    assert {r.beam_stage.split(" ... ")[0] for r in records} == {
        "Create/MaybeReshuffle/Reshuffle/ReshufflePerKey/FlatMap(restore_metadata_default_window)"
    }


def test_forwarding_can_be_switched_off(caplog):
    caplog.set_level(logging.INFO)
    with _pipeline("--worker_log_forwarding=off") as p:
        assert_that(p | beam.Create(list(range(10))) | beam.Map(_log_each), equal_to(list(range(10))))
    assert _forwarded(caplog) == []


def test_the_sdk_harness_log_level_options_choose_what_is_sent(caplog):
    caplog.set_level(logging.DEBUG)
    with _pipeline("--default_sdk_harness_log_level=WARNING") as p:
        p | beam.Create(list(range(10))) | beam.Map(_log_each)
    assert sorted(r.getMessage() for r in _forwarded(caplog)) == ["multiple of five: 0", "multiple of five: 5"]
    caplog.clear()
    with _pipeline(
        "--default_sdk_harness_log_level=ERROR", '--sdk_harness_log_level_overrides={"%s": "INFO"}' % LOGGER
    ) as p:
        p | beam.Create([1]) | beam.Map(_log_each)
    assert [r.getMessage() for r in _forwarded(caplog)] == ["saw 1"]


def _log_then_fail(x):
    if x == 3:
        logging.getLogger(LOGGER).error("about to fail on %d", x)
        raise ValueError("bad element 3")
    return x


def _task_attempts(spark):
    """How often Spark tries a task: F of a local[N,F] master, else 1."""
    match = re.fullmatch(r"local\[[^,\]]+,(\d+)\]", spark.sparkContext.master)
    return int(match.group(1)) if match else 1


def test_the_logs_of_a_failing_task_reach_the_driver(caplog, spark_session):
    caplog.set_level(logging.INFO)
    with pytest.raises(PipelineExecutionError, match="bad element 3"):
        with _pipeline() as p:
            p | beam.Create([1, 2, 3, 4]) | beam.Map(_log_then_fail)
    # Every attempt of the failing task logs once (the test master retries).
    attempts = _task_attempts(spark_session)
    assert [r.getMessage() for r in _forwarded(caplog)] == ["about to fail on 3"] * attempts


class _CountAndLog(beam.DoFn):
    COUNT = userstate.CombiningValueStateSpec("count", combine_fn=sum)

    def process(self, kv, count=beam.DoFn.StateParam(COUNT)):
        count.add(1)
        logging.getLogger(LOGGER).info("key %s count %d", kv[0], count.read())
        yield kv[0], count.read()


def test_streaming_dofn_logs_reach_the_driver(caplog):
    caplog.set_level(logging.INFO)
    with _pipeline("--streaming") as p:
        stream = (
            TestStream().add_elements([("a", 1), ("b", 1)]).add_elements([("a", 2)]).advance_watermark_to_infinity()
        )
        out = (
            p
            | stream
            | "Stateful" >> beam.ParDo(_CountAndLog())
            | "Log" >> beam.Map(lambda kc: logging.getLogger(LOGGER).info("out %s", kc) or kc)
        )
        assert_that(out, equal_to([("a", 1), ("b", 1), ("a", 2)]))
    messages = sorted(r.getMessage() for r in _forwarded(caplog))
    assert messages == sorted(
        ["key a count 1", "key b count 1", "key a count 2", "out ('a', 1)", "out ('b', 1)", "out ('a', 2)"]
    )
    assert all(r.process != os.getpid() for r in _forwarded(caplog))


def test_a_bad_log_level_is_rejected_at_submission():
    with pytest.raises(ValueError, match="--default_sdk_harness_log_level: 'LOUD' is not a logging level"):
        with _pipeline("--default_sdk_harness_log_level=LOUD") as p:
            p | beam.Create([1]) | beam.Map(_log_each)
