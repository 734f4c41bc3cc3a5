"""Getting a SparkSession: reuse an active one (a notebook's, a test's),
otherwise create one from the options. The only place that starts Spark."""
import os
import sys

from beam_spark_runner.options import parse_spark_conf

UI_JAR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jars", "beam-spark-runner-ui.jar")


def ensure_python_workers_match_driver():
    """Spark's Python workers must run this interpreter (same Beam, same
    pickles); set before the JVM starts so executors inherit it."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # PySpark hashes strings in workers; a fixed seed keeps that deterministic.
    os.environ.setdefault("PYTHONHASHSEED", "0")


def runner_spark_conf():
    """Spark settings of sessions the runner creates (user --spark_conf wins)."""
    return {
        "spark.ui.showConsoleProgress": "false",
        "spark.executorEnv.PYTHONHASHSEED": "0",
        "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
        # Forked Python workers start with Beam already imported.
        "spark.python.daemon.module": "beam_spark_runner.execution.spark_daemon",
        # The JVM helper that shows Beam metrics in the Spark UI
        # (execution/ui_metrics.py).
        "spark.jars": UI_JAR,
    }


def merged_spark_conf(user_conf):
    """The runner's settings updated by the user's; a user's `spark.jars`
    keeps the runner's jar beside its own."""
    conf = runner_spark_conf()
    user_conf = dict(user_conf)
    jars = user_conf.pop("spark.jars", None)
    conf.update(user_conf)
    if jars:
        conf["spark.jars"] = "%s,%s" % (jars, UI_JAR)
    return conf


def get_or_create_session(spark_options):
    ensure_python_workers_match_driver()
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = SparkSession.builder.master(spark_options.spark_master).appName(spark_options.spark_app_name)
    conf = merged_spark_conf(parse_spark_conf(spark_options.spark_conf))
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
