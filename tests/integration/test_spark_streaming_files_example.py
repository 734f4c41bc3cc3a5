"""examples/spark_streaming_files.py: page views landing as JSON files while
the pipeline runs, counted per page and 10 s window, published as Parquet:
equal to the same counts over all landed files computed in PySpark."""

import os
import sys

from apache_beam.internal.cloudpickle import cloudpickle
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
import spark_streaming_files  # noqa: E402

# Run as a script, the example's functions pickle by value; imported here they
# would pickle by name, and Spark's workers cannot import examples/.
cloudpickle.register_pickle_by_value(spark_streaming_files)


def test_the_streamed_counts_equal_pyspark_counts_over_every_landed_file(tmp_path, capsys):
    spark = SparkSession.getActiveSession()
    landing, output = str(tmp_path / "landing"), str(tmp_path / "counts")
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "UTC")  # windows as the pipeline counts them
    try:
        spark_streaming_files.run(["--landing", landing, "--output", output, "--duration_seconds", "12"])
        printed = capsys.readouterr().out.splitlines()
        native = (
            spark.read.schema(spark_streaming_files.SCHEMA)
            .json(landing)
            .groupBy(F.window("ts", "10 seconds").start.alias("start"), "page")
            .agg(F.count("*").alias("views"))
            .collect()
        )
        expected = sorted((r.start.isoformat(), r.page, r.views) for r in native)
        got = sorted((r.window_start, r.page, r.views) for r in spark.read.parquet(output).collect())
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)
    assert len(os.listdir(landing)) == 12
    assert got == expected and sum(v for _, _, v in got) == 12 * spark_streaming_files.VIEWS_PER_FILE
    assert len(printed) == len(expected)
