"""Packages a pipeline asks for reach Spark's executors
(execution/executor_packages.py): `--extra_packages` through SparkRunner and
through the job service, refused clearly when they cannot be shipped."""

import importlib.util

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability.portable_runner import PortableRunner
from apache_beam.testing.util import assert_that, equal_to

from beam_spark_runner import SparkRunner
from beam_spark_runner.errors import UnsupportedPipelineError
from tests.wheels import make_wheel


def _greet(x):
    import greetlib_for_spark_tests  # only the executors have it

    return greetlib_for_spark_tests.greet(x)


def _wheel(tmp_path, version="0.1", extra=None):
    files = {"greetlib_for_spark_tests/__init__.py": "def greet(x):\n    return 'hello-%s' % x\n"}
    files.update(extra or {})
    return make_wheel(str(tmp_path), "greetlib_for_spark_tests", version, files)


def _pipeline(p):
    assert_that(p | beam.Create(["a", "b"]) | beam.Map(_greet), equal_to(["hello-a", "hello-b"]))


def test_the_package_is_not_installed_here():
    assert importlib.util.find_spec("greetlib_for_spark_tests") is None


def test_extra_packages_reach_the_executors_with_spark_runner(tmp_path):
    wheel = _wheel(tmp_path)
    with beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(["--extra_packages=" + wheel])) as p:
        _pipeline(p)


def test_extra_packages_reach_the_executors_through_the_job_service(tmp_path, spark_session):
    from beam_spark_runner.job_service.servicer import SparkJobServicer

    servicer = SparkJobServicer(spark_session, staging_dir=str(tmp_path / "staging"))
    port = servicer.start_grpc_server(0)
    try:
        wheel = _wheel(tmp_path, version="0.2")
        options = PipelineOptions(
            ["--job_endpoint=localhost:%d" % port, "--environment_type=LOOPBACK", "--extra_packages=" + wheel]
        )
        with beam.Pipeline(runner=PortableRunner(), options=options) as p:
            _pipeline(p)
    finally:
        servicer.stop()


def test_a_requirements_file_reaches_the_executors(tmp_path):
    _wheel(tmp_path, version="0.4")
    requirements = tmp_path / "requirements.txt"
    # pip's own options in the file: install from the wheel's directory, offline.
    requirements.write_text("--no-index\n--find-links %s\ngreetlib_for_spark_tests==0.4\n" % tmp_path)
    options = PipelineOptions(["--requirements_file=%s" % requirements])
    with beam.Pipeline(runner=SparkRunner(), options=options) as p:
        _pipeline(p)


def test_a_missing_package_is_refused_at_submission(tmp_path):
    with pytest.raises(UnsupportedPipelineError, match="--extra_packages=.*nope.whl: no such file"):
        with beam.Pipeline(
            runner=SparkRunner(), options=PipelineOptions(["--extra_packages=%s/nope.whl" % tmp_path])
        ) as p:
            _ = p | beam.Create([1])


def test_a_package_with_compiled_modules_is_refused_naming_them(tmp_path):
    wheel = _wheel(
        tmp_path, version="0.3", extra={"greetlib_for_spark_tests/_speedups.cpython-311-x86_64-linux-gnu.so": "x"}
    )
    with pytest.raises(UnsupportedPipelineError, match="_speedups.cpython-311-x86_64-linux-gnu.so"):
        with beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(["--extra_packages=" + wheel])) as p:
            _ = p | beam.Create([1])
