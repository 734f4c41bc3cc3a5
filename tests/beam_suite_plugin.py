"""pytest plugin: run Beam's own TestPipeline-based tests on SparkRunner.

    python -m pytest -p tests.beam_suite_plugin --pyargs apache_beam.transforms.combiners_test

TestPipeline() picks its options from `TestPipeline.pytest_test_pipeline_options`
when no --test-pipeline-options is given, so every TestPipeline these tests
build runs on SparkRunner, in this process's one SparkSession.
"""

import os

from apache_beam.testing.test_pipeline import TestPipeline

TEST_PIPELINE_OPTIONS = os.environ.get("BEAM_SPARK_TEST_PIPELINE_OPTIONS", "--runner=beam_spark_runner.SparkRunner")


def pytest_configure(config):
    TestPipeline.pytest_test_pipeline_options = TEST_PIPELINE_OPTIONS
    config.addinivalue_line("markers", "it_validatesrunner: Beam ValidatesRunner test")
    for marker in ("no_xdist", "uses_testcontainer", "require_docker_in_docker"):
        config.addinivalue_line("markers", marker + ": Beam marker")


def pytest_sessionstart(session):
    from tests.conftest import _start_session

    _start_session().sparkContext.setLogLevel("ERROR")
