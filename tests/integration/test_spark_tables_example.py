"""examples/spark_tables.py: per-customer daily order totals from Parquet
into a catalog table, equal to the same totals computed in PySpark."""

import os
import sys

from apache_beam.internal.cloudpickle import cloudpickle
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
import spark_tables  # noqa: E402

# Run as a script, the example's functions pickle by value; imported here they
# would pickle by name, and Spark's workers cannot import examples/.
cloudpickle.register_pickle_by_value(spark_tables)


def test_the_totals_table_equals_pyspark_totals(tmp_path, capsys):
    spark = SparkSession.getActiveSession()
    orders = str(tmp_path / "orders")
    spark.sql("DROP TABLE IF EXISTS example_order_totals")
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "UTC")  # days as the pipeline's windows count them
    try:
        spark_tables.run(["--orders", orders, "--table", "example_order_totals"])
        printed = capsys.readouterr().out.splitlines()
        native = (
            spark.read.parquet(orders)
            .groupBy(F.date_format(F.col("placed"), "yyyy-MM-dd").alias("day"), "customer")
            .agg(F.round(F.sum("amount"), 2).alias("total"))
        )
        expected = sorted((r.day, r.customer, r.total) for r in native.collect())
        got = sorted((r.day, r.customer, r.total) for r in spark.table("example_order_totals").collect())
        assert got == expected and len(got) == 3 * 7
        assert printed == ["%s %s %.2f" % row for row in expected]
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)
        spark.sql("DROP TABLE IF EXISTS example_order_totals")
