"""Spark's streaming sources and writers in a Beam pipeline: page views
landing as JSON files, counted per page in 10-second windows of their own
event times, written as Parquet exactly once.

A feeder thread drops a JSON file of page views into `--landing` every
second for `--duration_seconds` (a stand-in for the system that lands
them). The pipeline reads the directory as a stream with `ReadFromSpark`
(event time from the `ts` column; the watermark trails the newest view by
`max_out_of_orderness`), counts views per page and window, and writes the
counts with `WriteToSpark` to `--output`, each micro-batch's rows published
once the batch is a completed checkpoint. When the feeder is done the run
is drained (every window fires) and the counts are printed from the
Parquet output:

    python examples/spark_streaming_files.py --landing /tmp/beam-spark-views \\
        --output /tmp/beam-spark-view-counts --duration_seconds 20
"""

import argparse
import datetime
import json
import os
import threading
import time
import typing

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import window

from beam_spark_runner.io import ReadFromSpark, WriteToSpark

PAGES = ("home", "search", "cart", "checkout")
VIEWS_PER_FILE = 25
SCHEMA = "page string, visitor long, ts timestamp"


class PageCount(typing.NamedTuple):
    """A row of the output (WriteToSpark writes rows with a schema)."""

    window_start: str
    page: str
    views: int


class _ToRow(beam.DoFn):
    def process(self, page_and_views, w=beam.DoFn.WindowParam):
        page, views = page_and_views
        yield PageCount(w.start.to_utc_datetime().isoformat(), page, views)


def views_in_file(index, start):
    """The page views of file `index`: event times one second apart in the
    file's second, some a little out of order."""
    return [
        {
            "page": PAGES[(index * 7 + i) % len(PAGES)],
            "visitor": index * VIEWS_PER_FILE + i,
            "ts": (start + datetime.timedelta(seconds=index, milliseconds=(i * 37) % 1000)).isoformat(),
        }
        for i in range(VIEWS_PER_FILE)
    ]


def land(directory, index, start):
    """Writes file `index` into `directory` at once (renamed into place: a
    stream reader never sees half a file)."""
    tmp = os.path.join(os.path.dirname(os.path.abspath(directory)), ".views-%05d.json" % index)
    with open(tmp, "w") as f:
        for view in views_in_file(index, start):
            f.write(json.dumps(view) + "\n")
    os.replace(tmp, os.path.join(directory, "views-%05d.json" % index))


def build(p, landing, output):
    """Adds the counting pipeline to `p`."""
    return (
        p
        | "Views"
        >> ReadFromSpark(format="json", path=landing, schema=SCHEMA, timestamp_column="ts", max_out_of_orderness=2)
        | "Windows" >> beam.WindowInto(window.FixedWindows(10))
        | "ByPage" >> beam.Map(lambda view: (view.page, 1))
        | "Count" >> beam.CombinePerKey(sum)
        | "AsRows" >> beam.ParDo(_ToRow()).with_output_types(PageCount)
        | "Counts" >> WriteToSpark(format="parquet", path=output)
    )


def run(argv=None, start=datetime.datetime(2026, 11, 27)):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--landing", default="/tmp/beam-spark-views", help="Directory the JSON files land in.")
    parser.add_argument("--output", default="/tmp/beam-spark-view-counts", help="Parquet directory of the counts.")
    parser.add_argument("--duration_seconds", type=int, default=20, help="How long files keep landing.")
    args, beam_args = parser.parse_known_args(argv)
    os.makedirs(args.landing, exist_ok=True)
    if os.listdir(args.landing) or (os.path.exists(args.output) and os.listdir(args.output)):
        parser.error("--landing and --output must be empty or new directories")
    land(args.landing, 0, start)  # the schema is given, but the stream starts with data
    options = PipelineOptions(["--runner=beam_spark_runner.SparkRunner", "--streaming", *beam_args])
    p = beam.Pipeline(options=options)
    build(p, args.landing, args.output)
    result = p.run()

    def feed():
        for index in range(1, args.duration_seconds):
            time.sleep(1)
            land(args.landing, index, start)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    feeder.join()
    time.sleep(3)  # the last file is read before the drain closes the source
    result.drain()
    result.wait_until_finish()
    from pyspark.sql import SparkSession

    counts = SparkSession.getActiveSession().read.parquet(args.output).orderBy("window_start", "page").collect()
    for row in counts:
        print("%s %-8s %d" % (row.window_start, row.page, row.views))
    return counts


if __name__ == "__main__":
    run()
