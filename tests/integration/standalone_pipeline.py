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
With --ui_metrics_out FILE, the Beam metrics the Spark UI lists (the
accumulators of the "Beam metrics" jobs, read from the UI's REST API) are
written to FILE as JSON before the application stops.
"""

import argparse
import collections
import json
import logging
import os
import sys
import urllib.request

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.options.pipeline_options import PipelineOptions


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


def build(p, input_path, output_dir):
    words = p | "Read" >> beam.io.ReadFromText(input_path) | "Split" >> beam.FlatMap(split_words)
    (
        words
        | "PairWithOne" >> beam.Map(lambda w: (w, 1))
        | "Count" >> beam.CombinePerKey(sum)
        | "FormatCounts" >> beam.MapTuple(format_count)
        | "WriteCounts" >> beam.io.WriteToText(output_dir + "/counts")
    )
    (
        words
        | "KeyByInitial" >> beam.Map(lambda w: (w[0], w))
        | "GroupByInitial" >> beam.GroupByKey()
        | "FormatGroups" >> beam.MapTuple(format_group)
        | "WriteGroups" >> beam.io.WriteToText(output_dir + "/groups")
    )


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
            build(p, known.input, known.output)
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
