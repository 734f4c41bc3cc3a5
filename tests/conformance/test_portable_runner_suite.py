"""Beam's own PortableRunnerTest, unmodified from the installed wheel, run
through this runner's job service: Beam's PortableRunner submits each
pipeline over the Job API (Prepare, artifact staging, Run, state and
message streams, metrics) to `SparkJobServicer`, which runs it on the test
process's SparkSession.

Beam runs the same class against its own Spark job server
(`spark_runner_test.py`), where it skips tests for missing features; here
only the skips Beam's own decorators make remain (the drain tests, which
`PortableRunnerTest` itself skips for every portable runner)."""

from apache_beam.runners.portability import portable_runner_test

from beam_spark_runner.job_service.servicer import SparkJobServicer


class SparkJobServicePortableRunnerTest(portable_runner_test.PortableRunnerTest):
    _use_subprocesses = False

    @classmethod
    def _create_job_endpoint(cls):
        from pyspark.sql import SparkSession

        cls._servicer = SparkJobServicer(spark_session=SparkSession.getActiveSession())
        return "localhost:%d" % cls._servicer.start_grpc_server()

    @classmethod
    def tearDownClass(cls):
        if "_servicer" in cls.__dict__:
            cls._servicer.stop()
        super().tearDownClass()
