"""Run as a script by test_session_recovery: a batch pipeline on
SparkRunner, then the driver JVM SIGKILLed (as an OutOfMemoryError ends
it), then another pipeline in the same process. Prints each run's result
and the two JVMs' process ids."""

import os
import signal
import time

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from pyspark.sql import SparkSession

from beam_spark_runner import SparkRunner


def _count(n):
    """Runs a pipeline counting n elements in a user counter; prints it."""
    from apache_beam.metrics import Metrics
    from apache_beam.metrics.metric import MetricsFilter

    def count(x):
        Metrics.counter("dead_jvm_job", "elements").inc()
        return x

    p = beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(["--spark_master=local[1]"]))
    _ = p | beam.Create(range(n)) | beam.Map(count)
    result = p.run()
    result.wait_until_finish()
    (counter,) = result.metrics().query(MetricsFilter().with_name("elements"))["counters"]
    print("COUNT", counter.committed, flush=True)


def _jvm_pid():
    return SparkSession.getActiveSession().sparkContext._jvm.java.lang.ProcessHandle.current().pid()


if __name__ == "__main__":
    _count(10)
    first = _jvm_pid()
    print("JVM", first, flush=True)
    os.kill(first, signal.SIGKILL)
    time.sleep(1)
    _count(20)
    print("JVM", _jvm_pid(), flush=True)
