"""Every test here runs pipelines on SparkRunner: the process's one
SparkSession (tests/conftest.py) is started before the first of them."""

import pytest


@pytest.fixture(autouse=True)
def _spark(spark_session):
    return spark_session


@pytest.fixture(scope="module")
def job_endpoint(spark_session, tmp_path_factory):
    """A job service on the test process's SparkSession, for Beam Java's
    PortableRunner clients."""
    from beam_spark_runner.job_service.servicer import SparkJobServicer

    servicer = SparkJobServicer(staging_dir=str(tmp_path_factory.mktemp("job-staging")), spark_session=spark_session)
    port = servicer.start_grpc_server(0)
    yield "localhost:%d" % port
    servicer.stop()
