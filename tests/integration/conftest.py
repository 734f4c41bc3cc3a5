"""Every test here runs pipelines on SparkRunner: the process's one
SparkSession (tests/conftest.py) is started before the first of them."""

import pytest


@pytest.fixture(autouse=True)
def _spark(spark_session):
    return spark_session
