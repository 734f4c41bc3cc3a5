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
