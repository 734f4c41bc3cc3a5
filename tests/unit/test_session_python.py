"""Which Python Spark's workers run (session.ensure_python_workers_match_driver):
the user's choice when there is one, else the driver's interpreter."""

import sys

from beam_spark_runner import session


def test_the_drivers_interpreter_by_default(monkeypatch):
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    session.ensure_python_workers_match_driver({})
    assert session.os.environ["PYSPARK_PYTHON"] == sys.executable
    assert session.runner_spark_conf()["spark.executorEnv.PYSPARK_PYTHON"] == sys.executable


def test_spark_pyspark_python_from_spark_conf_is_honoured(monkeypatch):
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    session.ensure_python_workers_match_driver({"spark.pyspark.python": "./env/bin/python"})
    assert session.os.environ["PYSPARK_PYTHON"] == "./env/bin/python"
    assert session.runner_spark_conf()["spark.executorEnv.PYSPARK_PYTHON"] == "./env/bin/python"


def test_a_pyspark_python_in_the_environment_is_never_overwritten(monkeypatch):
    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/team-env/bin/python")
    session.ensure_python_workers_match_driver({"spark.pyspark.python": "./env/bin/python"})
    assert session.os.environ["PYSPARK_PYTHON"] == "/opt/team-env/bin/python"


class _Context:
    """The SparkContext attributes session._workers_run_this_interpreter reads."""

    def __init__(self, python_exec="python3", master="local[2]", conf=None):
        self.pythonExec, self.master, self._conf = python_exec, master, conf or {}

    def getConf(self):
        return self._conf


def test_a_local_session_started_without_a_workers_python_gets_the_drivers(monkeypatch):
    """A notebook's own SparkSession (PYSPARK_PYTHON unset when it started)
    would run `python3` from the PATH, without the runner's packages."""
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)  # the runner's default, not a choice
    context = _Context()
    session._workers_run_this_interpreter(context)
    assert context.pythonExec == sys.executable


def test_a_chosen_or_remote_workers_python_is_left_alone(monkeypatch):
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    for context in (
        _Context(python_exec="/opt/env/bin/python"),
        _Context(master="spark://cluster:7077"),
        _Context(conf={"spark.pyspark.python": "./env/bin/python"}),
    ):
        before = context.pythonExec
        session._workers_run_this_interpreter(context)
        assert context.pythonExec == before
    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/team-env/bin/python")
    context = _Context()
    session._workers_run_this_interpreter(context)
    assert context.pythonExec == "python3"
