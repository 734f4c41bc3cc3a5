"""The pipeline test_standalone_cluster runs against a Spark standalone master.

Run as a script in a fresh Python process (only one SparkContext may exist
per process, and the test process already has a local one):

    python standalone_pipeline.py --input FILE --output DIR \
        --runner=beam_spark_runner.SparkRunner --spark_master=spark://HOST:PORT ...

Reads text, counts the words in a Beam counter, and writes two results,
each needing a shuffle:
  DIR/counts-*  `word: count`                   (CombinePerKey)
  DIR/groups-*  `initial: n word1,word2,...`    (GroupByKey; n = occurrences,
                                                 words distinct and sorted)
`expected_counts` / `expected_groups` compute the same lines in plain Python.
With --log_out FILE, the messages format_group logged in the cluster's
executors and the driver received are written to FILE as JSON, with the
process ids they were logged in and the driver's pid.
With --spark_io, the counts are also written as Parquet with WriteToSpark
(DIR/counts_parquet), read back with ReadFromSpark in a second batch
pipeline (DIR/roundtrip-*, as counts), and a streaming pipeline reads a JSON
directory (DIR/events, written here) with ReadFromSpark, sums it per user
in 10 s windows and writes DIR/streamed with WriteToSpark; it is drained
once the windows before the sentinel are out, which fires the sentinel's
(`expected_streamed()` lists them all).
With --ui_metrics_out FILE, the Beam metrics the Spark UI lists (the
accumulators of the "Beam metrics" jobs, read from the UI's REST API) are
written to FILE as JSON before the application stops.
"""

import argparse
import collections
import datetime
import glob
import json
import logging
import os
import sys
import time
import typing
import urllib.request

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.options.pipeline_options import PipelineOptions

from tests.window_totals import Total, WindowTotal


GROUP_LOGGER = "standalone.groups"  # format_group logs each group here, at INFO


def split_words(line):
    words = line.split()
    Metrics.counter("standalone", "words").inc(len(words))
    return words


def format_count(word, count):
    return "%s: %d" % (word, count)


def format_group(initial, words):
    words = list(words)
    logging.getLogger(GROUP_LOGGER).info("group %s", initial)
    return "%s: %d %s" % (initial, len(words), ",".join(sorted(set(words))))


def build(p, input_path, output_dir, spark_io=False):
    words = p | "Read" >> beam.io.ReadFromText(input_path) | "Split" >> beam.FlatMap(split_words)
    counts = words | "PairWithOne" >> beam.Map(lambda w: (w, 1)) | "Count" >> beam.CombinePerKey(sum)
    (
        counts
        | "FormatCounts" >> beam.MapTuple(format_count)
        | "WriteCounts" >> beam.io.WriteToText(output_dir + "/counts")
    )
    if spark_io:
        from beam_spark_runner.io import WriteToSpark

        (
            counts
            | "AsRows" >> beam.MapTuple(WordCount).with_output_types(WordCount)
            | "WriteParquet" >> WriteToSpark(format="parquet", path=output_dir + "/counts_parquet")
        )
    (
        words
        | "KeyByInitial" >> beam.Map(lambda w: (w[0], w))
        | "GroupByInitial" >> beam.GroupByKey()
        | "FormatGroups" >> beam.MapTuple(format_group)
        | "WriteGroups" >> beam.io.WriteToText(output_dir + "/groups")
    )


class WordCount(typing.NamedTuple):
    word: str
    count: int


_EVENTS_EPOCH = datetime.datetime(2026, 1, 1)


def streamed_events():
    """(user, score, seconds after 2026-01-01) of the streaming part, with a
    sentinel an hour later that closes every window before it."""
    events = [("abc"[i % 3], i, i) for i in range(30)]
    return events + [("sentinel", 0, 3600)]


def expected_streamed():
    epoch_s = int((_EVENTS_EPOCH - datetime.datetime(1970, 1, 1)).total_seconds())
    totals = collections.Counter()
    for user, score, second in streamed_events():
        totals[(user, epoch_s + second // 10 * 10)] += score
    return sorted((u, s, t) for (u, s), t in totals.items())


def build_spark_io(p, output_dir):
    from beam_spark_runner.io import ReadFromSpark

    (
        p
        | "ReadCounts" >> ReadFromSpark(format="parquet", path=output_dir + "/counts_parquet")
        | "FormatRead" >> beam.Map(lambda r: format_count(r.word, r.count))
        | "WriteRoundtrip" >> beam.io.WriteToText(output_dir + "/roundtrip")
    )


def run_streaming(options, output_dir, timeout_s=120):
    """The streaming part of --spark_io; returns the rows it published."""
    from apache_beam.options.pipeline_options import StandardOptions
    from apache_beam.transforms import window

    from beam_spark_runner.io import ReadFromSpark, WriteToSpark

    events_dir = os.path.join(output_dir, "events")
    os.makedirs(events_dir)
    with open(os.path.join(events_dir, "events.json"), "w") as f:
        for user, score, second in streamed_events():
            ts = (_EVENTS_EPOCH + datetime.timedelta(seconds=second)).isoformat()
            f.write(json.dumps({"user": user, "score": score, "ts": ts}) + "\n")
    out = os.path.join(output_dir, "streamed")
    options.view_as(StandardOptions).streaming = True
    p = beam.Pipeline(options=options)
    _ = (
        p
        | "ReadEvents"
        >> ReadFromSpark(
            format="json", path=events_dir, schema="user string, score long, ts timestamp", timestamp_column="ts"
        )
        | beam.WindowInto(window.FixedWindows(10))
        | beam.Map(lambda r: (r.user, r.score))
        | beam.CombinePerKey(sum)
        | beam.ParDo(WindowTotal()).with_output_types(Total)
        | "WriteTotals" >> WriteToSpark(format="parquet", path=out)
    )
    result = p.run()
    deadline = time.time() + timeout_s
    before_sentinel = [row for row in expected_streamed() if row[0] != "sentinel"]
    while published_streamed(out) != before_sentinel and time.time() < deadline:
        time.sleep(0.5)
    result.drain()
    result.wait_until_finish(timeout_s * 1000)
    return published_streamed(out)


def published_streamed(out):
    import pyarrow.parquet as pq

    rows = []
    for path in sorted(glob.glob(os.path.join(out, "part-*"))):
        table = pq.read_table(path)
        rows.extend(zip(*(table.column(c).to_pylist() for c in Total._fields)))
    return sorted(rows)


def expected_counts(lines):
    counts = collections.Counter(w for line in lines for w in split_words(line))
    return sorted(format_count(w, c) for w, c in counts.items())


def expected_groups(lines):
    groups = collections.defaultdict(list)
    for line in lines:
        for w in split_words(line):
            groups[w[0]].append(w)
    return sorted(format_group(k, ws) for k, ws in groups.items())


def ui_metrics(sc):
    """{accumulator name: value} of the Spark UI's "Beam metrics" jobs."""

    def rest(path):
        url = "%s/api/v1/applications/%s/%s" % (sc.uiWebUrl, sc.applicationId, path)
        with urllib.request.urlopen(url, timeout=30) as response:
            return json.load(response)

    shown = {}
    for job in rest("jobs"):
        if (job.get("description") or "").startswith("Beam metrics"):
            for stage_id in job["stageIds"]:
                for attempt in rest("stages/%d" % stage_id):
                    shown.update((a["name"], a["value"]) for a in attempt.get("accumulatorUpdates", []))
    return shown


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True, help="Output directory.")
    parser.add_argument("--ui_metrics_out", help="Where to write the metrics the Spark UI lists.")
    parser.add_argument("--log_out", help="Where to write what format_group logged.")
    parser.add_argument("--spark_io", action="store_true", help="Also run the ReadFromSpark/WriteToSpark parts.")
    known, pipeline_args = parser.parse_known_args(argv)
    options = PipelineOptions(pipeline_args)
    from pyspark.sql import SparkSession

    logged = []
    handler = logging.Handler()
    handler.emit = lambda record: logged.append((record.getMessage(), record.process))
    logging.getLogger(GROUP_LOGGER).addHandler(handler)
    logging.getLogger(GROUP_LOGGER).setLevel(logging.INFO)
    try:
        with beam.Pipeline(options=options) as p:
            build(p, known.input, known.output, known.spark_io)
        if known.spark_io:
            with beam.Pipeline(options=options) as p:
                build_spark_io(p, known.output)
            with open(os.path.join(known.output, "streamed.json"), "w") as f:
                json.dump(run_streaming(options, known.output), f)
        if known.log_out:
            with open(known.log_out, "w") as f:
                json.dump({"records": logged, "driver_pid": os.getpid()}, f)
        if known.ui_metrics_out:
            with open(known.ui_metrics_out, "w") as f:
                json.dump(ui_metrics(SparkSession.getActiveSession().sparkContext), f)
    finally:
        # End the Spark application now, so the master lists it as completed.
        session = SparkSession.getActiveSession()
        if session is not None:
            session.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
