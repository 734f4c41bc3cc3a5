"""The SparkSession a benchmark runs both of its sides on: the runner's own
settings (its worker daemon, as `SparkRunner` would start a session), then
the benchmark's; Spark's and py4j's logs at warning level."""

import logging


def start_runner_session(master, app_name, **conf):
    """`conf`: further Spark settings (names with dots given as a dict:
    `start_runner_session(m, a, **{"spark.ui.enabled": "false"})`)."""
    from beam_spark_runner.session import ensure_python_workers_match_driver, runner_spark_conf

    ensure_python_workers_match_driver()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in {**runner_spark_conf(master), **conf}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    return spark
