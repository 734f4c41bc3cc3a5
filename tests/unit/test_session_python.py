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
