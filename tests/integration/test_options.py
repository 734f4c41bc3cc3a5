"""Every option SparkRunner accepts is honoured or refused with a message
naming it: none is silently ignored (beam_spark_runner/options.py,
session.py)."""

import logging

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to

from beam_spark_runner import PipelineExecutionError, SparkRunner, UnsupportedPipelineError


def _run(*flags):
    with beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(list(flags))) as p:
        assert_that(p | beam.Create([1, 2]) | beam.Map(lambda x: x * 10), equal_to([10, 20]))


@pytest.mark.parametrize(
    "flag",
    [
        "--environment_type=DOCKER",
        "--environment_type=LOOPBACK",
        "--environment_config=apache/beam_python3.11_sdk",
        "--requirements_file=no_such_requirements.txt",
        "--setup_file=./no_such_dir/setup.py",
        "--extra_package=dist/mine.tar.gz",
        "--sdk_location=container",
    ],
)
def test_options_the_runner_cannot_honour_are_refused_naming_them(flag):
    with pytest.raises(UnsupportedPipelineError) as e:
        _run(flag)
    assert flag.split("=")[0].lstrip("-") in str(e.value).replace("extra_packages", "extra_package")


def test_save_main_session_and_sdk_worker_parallelism_warn(caplog):
    with caplog.at_level(logging.WARNING, logger="beam_spark_runner.runner"):
        _run("--save_main_session", "--sdk_worker_parallelism=4")
    text = caplog.text
    assert "--save_main_session" in text and "--sdk_worker_parallelism=4" in text


def test_spark_conf_is_set_on_the_active_session_for_the_run_and_restored(spark_session):
    key = "spark.sql.autoBroadcastJoinThreshold"
    before = spark_session.conf.get(key)
    from beam_spark_runner import session as session_lib
    from beam_spark_runner.options import SparkRunnerOptions

    options = PipelineOptions(["--spark_conf", key + "=12345"]).view_as(SparkRunnerOptions)
    spark, run_conf = session_lib.get_or_create_session(options, {"spark_conf": options.spark_conf})
    assert spark is spark_session and spark.conf.get(key) == "12345"
    run_conf.restore()
    assert spark_session.conf.get(key) == before
    # And end to end: the run leaves the session as it found it.
    _run("--spark_conf", key + "=12345")
    assert spark_session.conf.get(key) == before


def test_options_that_cannot_apply_to_the_active_session_are_named_in_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="beam_spark_runner.session"):
        _run("--spark_conf", "spark.executor.memory=3g", "--spark_app_name=other-app", "--spark_master=local[3]")
    text = caplog.text
    assert "spark.executor.memory=3g" in text
    assert "--spark_app_name=other-app" in text and "--spark_master=local[3]" in text


def test_default_spark_options_say_nothing_about_the_active_session(caplog):
    with caplog.at_level(logging.WARNING, logger="beam_spark_runner.session"):
        _run()
    assert "cannot apply" not in caplog.text


def test_performance_runtime_type_check_is_made_on_plain_python_stages():
    """Beam makes these checks in its SDK harness; a stage the runner would
    run as a plain Python loop (this Map) runs on the harness instead."""
    with pytest.raises(PipelineExecutionError, match="Type-hint for return type violated"):
        with beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(["--performance_runtime_type_check"])) as p:
            p | beam.Create([1, 2]) | beam.Map(lambda x: str(x)).with_output_types(int)
