"""Fault-injection tests run pipelines on SparkRunner with the process's one
SparkSession (tests/conftest.py), whose master retries failed tasks
(`local[2,4]`, as the runner's default `local[*,4]`)."""

import pytest


@pytest.fixture(autouse=True)
def _spark(spark_session):
    return spark_session
