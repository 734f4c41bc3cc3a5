"""execution/stream_interruption.py against real Py4J errors from the
driver JVM: an interruption anywhere in a Java exception's cause chain is
found and said in one short line that Spark's stop test recognises; any
other error stays a failure."""

import traceback

import pytest
from py4j.protocol import Py4JJavaError

from beam_spark_runner.execution.stream_interruption import (
    MicroBatchInterrupted,
    interrupted,
    interruption_of,
    stops_reported,
)


def _error_of(spark, exception):
    """The Py4JJavaError of a Java call failing with `exception` as the
    cause of Java's ExecutionException."""
    future = spark._jvm.java.util.concurrent.CompletableFuture()
    future.completeExceptionally(exception)
    with pytest.raises(Py4JJavaError) as failed:
        future.get()
    return failed.value


@pytest.mark.parametrize(
    "name",
    [
        "java.lang.InterruptedException",
        "java.io.InterruptedIOException",
        "java.nio.channels.ClosedByInterruptException",
    ],
)
def test_an_interruption_in_the_cause_chain_is_a_stop_said_in_one_line(spark_session, name):
    jvm = spark_session._jvm
    cause = {
        "java.lang.InterruptedException": lambda: jvm.java.lang.InterruptedException("stopped"),
        "java.io.InterruptedIOException": lambda: jvm.java.io.InterruptedIOException("stopped"),
        "java.nio.channels.ClosedByInterruptException": lambda: jvm.java.nio.channels.ClosedByInterruptException(),
    }[name]()
    error = _error_of(spark_session, cause)
    assert len(str(error)) > 500  # what Spark would otherwise see: the whole Java stack
    assert interruption_of(error) == name
    stopped = interrupted(7, error)
    assert isinstance(stopped, MicroBatchInterrupted) and stopped.batch_id == 7
    try:
        with stops_reported(7):
            raise error
    except MicroBatchInterrupted:
        text = traceback.format_exc()
    # The Java stack is not chained into what Spark reads.
    assert "During handling" not in text and "\tat " not in text, text
    # The traceback Spark receives ends with the one line its stop test
    # spans: the Py4J call that failed, then the interruption's class.
    last = text.rstrip().splitlines()[-1]
    start = last.index("py4j.protocol.Py4JJavaError: An error occurred while calling")
    assert last.endswith(name + ")") and len(last) - start < 200, last
    assert "micro-batch 7" in last


def test_any_other_error_stays_a_failure(spark_session):
    error = _error_of(spark_session, spark_session._jvm.java.lang.IllegalStateException("broken"))
    assert interruption_of(error) is None
    assert interrupted(3, error) is None
    assert interrupted(3, ValueError("not from Java")) is None
