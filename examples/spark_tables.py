"""Spark's data sources in a Beam pipeline: per-customer order totals from a
Parquet directory into a catalog table.

Reads `--orders` (Parquet; a small sample is written there first when it
does not exist) with `ReadFromSpark`, sums each customer's orders per day of
their order time (`timestamp_column`: the orders' own event times, fixed
one-day windows), and writes the totals with `WriteToSpark` to the table
`--table` of the session's catalog, which it then prints:

    python examples/spark_tables.py --orders /tmp/beam-spark-orders --table order_totals
"""

import argparse
import datetime
import os
import typing

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import window

from beam_spark_runner.io import ReadFromSpark, WriteToSpark


def write_sample_orders(spark, path, count=864):
    """`count` orders of 7 customers, one every 5 minutes (3 days), as Parquet at `path`."""
    from pyspark.sql import Row

    start = datetime.datetime(2026, 11, 24, tzinfo=datetime.timezone.utc)
    rows = [
        Row(
            customer="c%d" % (i % 7), amount=round(1.25 * (i % 13), 2), placed=start + datetime.timedelta(minutes=5 * i)
        )
        for i in range(count)
    ]
    spark.createDataFrame(rows).write.mode("overwrite").parquet(path)


class DailyTotal(typing.NamedTuple):
    """A row of the totals table (WriteToSpark writes rows with a schema)."""

    day: str
    customer: str
    total: float


def build(p, orders, table):
    """Adds the totals pipeline to `p`."""
    return (
        p
        | "Orders" >> ReadFromSpark(format="parquet", path=orders, timestamp_column="placed")
        | "ByDay" >> beam.WindowInto(window.FixedWindows(24 * 3600))
        | "KeyByCustomer" >> beam.Map(lambda order: (order.customer, order.amount))
        | "Sum" >> beam.CombinePerKey(sum)
        | "AsRows"
        >> beam.MapTuple(
            lambda customer, total, w=beam.DoFn.WindowParam: DailyTotal(
                w.start.to_utc_datetime().date().isoformat(), customer, round(total, 2)
            )
        ).with_output_types(DailyTotal)
        | "Totals" >> WriteToSpark(table=table, mode="overwrite")
    )


def run(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", default="/tmp/beam-spark-orders", help="Parquet directory of orders.")
    parser.add_argument("--table", default="order_totals", help="Catalog table the totals go to.")
    args, beam_args = parser.parse_known_args(argv)
    options = PipelineOptions(["--runner=beam_spark_runner.SparkRunner", *beam_args])
    from beam_spark_runner.options import SparkRunnerOptions
    from beam_spark_runner.session import get_or_create_session

    spark, _ = get_or_create_session(options.view_as(SparkRunnerOptions))
    if not os.path.exists(args.orders):
        write_sample_orders(spark, args.orders)
    with beam.Pipeline(options=options) as p:
        build(p, args.orders, args.table)
    for row in spark.table(args.table).orderBy("day", "customer").collect():
        print("%s %s %.2f" % (row.day, row.customer, row.total))


if __name__ == "__main__":
    run()
