"""The user's error, as SparkRunner reports it, taken out of a Spark error."""

from beam_spark_runner.runner import _user_error

CHAINED = (
    "py4j.protocol.Py4JJavaError: An error occurred while calling o123.count.\n"
    ": org.apache.spark.SparkException: Job aborted due to stage failure: ...\n"
    "beam_spark_runner.worker.harness_stage.StageFailed: Beam stage 'ParDo(F)' failed:\n"
    "Traceback (most recent call last):\n"
    '  File "pipeline.py", line 6, in process\n'
    "ValueError: inner cause\n"
    "\n"
    "The above exception was the direct cause of the following exception:\n"
    "\n"
    "Traceback (most recent call last):\n"
    '  File "pipeline.py", line 8, in process\n'
    "RuntimeError: outer error, retries = 2 [while running 'ParDo(F)']\n"
    "\n"
    "\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:612)\n"
    "\tat org.apache.spark.api.python.PythonRunner$$anon$3.read(PythonRunner.scala:950)\n"
)


def test_the_whole_exception_chain_of_a_stage_failure_is_kept_without_java_frames():
    message = _user_error(Exception(CHAINED))
    assert message.startswith("Beam stage 'ParDo(F)' failed:")
    assert "ValueError: inner cause" in message
    assert message.endswith("RuntimeError: outer error, retries = 2 [while running 'ParDo(F)']")
    assert "org.apache.spark" not in message


def test_an_error_without_a_stage_failure_is_kept_whole():
    assert _user_error(ValueError("no Beam stage here")) == "no Beam stage here"


def test_a_java_stage_failure_keeps_the_users_whole_java_stack_trace_and_drops_sparks():
    """A Java harness's error is a Java stack trace: its frames and its
    "Caused by" parts (where PAssert names the assertion's site) reach the
    user; Spark's frames after it do not."""
    from beam_spark_runner.worker.harness_stage import StageFailed

    java_error = (
        "org.apache.beam.sdk.util.UserCodeException: java.lang.AssertionError: Should be empty\n"
        "\tat org.apache.beam.sdk.util.UserCodeException.wrap(UserCodeException.java:39)\n"
        "\tat org.apache.beam.sdk.testing.PAssert$DefaultConcludeFn.processElement(PAssert.java:1)\n"
        "Caused by: java.lang.AssertionError: Should be empty\n"
        "\tat org.example.MyTest.assertThatItIsEmpty(MyTest.java:42)\n"
        "\t... 20 more\n"
    )
    spark_text = (
        "py4j.protocol.Py4JJavaError: An error occurred while calling o123.count.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: ...\n"
        "beam_spark_runner.worker.harness_stage.StageFailed: %s\n"
        "\n"
        "\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:612)\n"
    ) % StageFailed.of_bundle("PAssert$0/VerifyAssertions", java_error)
    message = _user_error(Exception(spark_text))
    assert message.startswith("Beam stage 'PAssert$0/VerifyAssertions' failed:")
    assert "at org.example.MyTest.assertThatItIsEmpty(MyTest.java:42)" in message
    assert "... 20 more" in message
    assert "org.apache.spark" not in message
