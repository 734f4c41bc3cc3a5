"""The streaming pipeline test_executor_loss runs on a Spark standalone
cluster and kills one executor of, mid-stream. Run as a script in a fresh
Python process (the test process may hold a local SparkContext, and a
process may have only one):

    python executor_loss_pipeline.py --output DIR --times_out FILE \
        --lead SECONDS --duration SECONDS [--startup_factor F --max_duration SECONDS] \
        --runner=beam_spark_runner.SparkRunner --spark_master=spark://HOST:PORT \
        --streaming --checkpoint_dir=DIR ...

The script first starts the Spark application and waits until it has
`--executors` executors whose Python workers ran a task, then picks the
ticks' times from its own clock: START = now - lead (whole seconds: the
first micro-batch has data) and STOP = now + D, and writes {"start": START,
"stop": STOP, "startup_s": ...} to FILE before the streaming query starts.
D is `--duration`, or `--startup_factor` times the seconds this process
took to get there if that is longer (at most `--max_duration`): on a busy
machine the first micro-batch is as slow as the start-up (half a minute
and more on 2 shared cores), and the ticks must outlast it.

A PeriodicImpulse ticks every 0.25 s from START to STOP (epoch seconds);
tick i becomes the line "k<i % 4>,<i // 4>" (key, sequence number), in
fixed 2-second windows, written by Beam's `WriteToText` (the runner's
exactly-once streaming sink) under DIR/ticks. A stateful step counts each
key's lines per window (CombinePerKey) and writes "key,window start,count"
under DIR/counts. `expected_counts` computes the same lines in plain Python.
"""

import argparse
import collections
import json
import math
import os
import sys
import time

_STARTED = time.monotonic()  # the process's start, near enough: before Beam's import

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import combiners, window
from apache_beam.transforms.periodicsequence import PeriodicImpulse

INTERVAL = 0.25
KEYS = 4
WINDOW_S = 2


def tick_index(start, tick):
    return int(round((float(tick) - start) / INTERVAL))


def line_of(start, tick):
    i = tick_index(start, tick)
    return "k%d,%d" % (i % KEYS, i // KEYS)


class FormatCount(beam.DoFn):
    def process(self, kv, w=beam.DoFn.WindowParam):
        key, count = kv
        yield "%s,%d,%d" % (key, int(w.start.micros // 1000000), count)


def expected_counts(start, stop):
    """The lines DIR/counts holds for ticks START, START+0.25, ... < STOP
    (START a whole number of seconds)."""
    counts = collections.Counter()
    for i in range(int(round((stop - start) / INTERVAL))):
        second = start + i * INTERVAL
        counts[("k%d" % (i % KEYS), int(second // WINDOW_S) * WINDOW_S)] += 1
    return sorted("%s,%d,%d" % (key, w, n) for (key, w), n in counts.items())


def build(p, output, start, stop):
    lines = (
        p
        | "Ticks" >> PeriodicImpulse(start_timestamp=start, stop_timestamp=stop, fire_interval=INTERVAL)
        | "ToLine" >> beam.Map(lambda t, s=start: line_of(s, t))
        | "Window" >> beam.WindowInto(window.FixedWindows(WINDOW_S))
    )
    lines | "WriteTicks" >> beam.io.WriteToText(os.path.join(output, "ticks"), num_shards=2)
    (
        lines
        | "KeyOf" >> beam.Map(lambda line: line.split(",")[0])
        | "CountPerKey" >> combiners.Count.PerElement()
        | "FormatCounts" >> beam.ParDo(FormatCount())
        | "WriteCounts" >> beam.io.WriteToText(os.path.join(output, "counts"))
    )


def warm_up(options, executors, timeout_s=120):
    """Starts the Spark application the runner will reuse (the session is
    created from the same options) and waits until `executors` executors
    registered and their Python workers ran a task."""
    from beam_spark_runner.options import SparkRunnerOptions
    from beam_spark_runner.session import get_or_create_session

    spark, _ = get_or_create_session(options.view_as(SparkRunnerOptions))
    sc = spark.sparkContext
    deadline = time.monotonic() + timeout_s
    # The driver is among the block managers.
    while sc._jsc.sc().getExecutorMemoryStatus().size() < executors + 1:
        if time.monotonic() > deadline:
            raise RuntimeError("fewer than %d executors registered within %ds" % (executors, timeout_s))
        time.sleep(0.2)
    sc.parallelize(range(executors), executors).map(lambda x: os.getpid()).collect()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", required=True, help="Output directory.")
    parser.add_argument("--times_out", required=True, help="Where to write the ticks' start and stop.")
    parser.add_argument("--lead", type=int, default=4, help="Seconds of ticks before the query starts.")
    parser.add_argument("--duration", type=int, required=True, help="Seconds of ticks after the warm-up, at least.")
    parser.add_argument("--startup_factor", type=float, default=0, help="Seconds of ticks per second of start-up.")
    parser.add_argument("--max_duration", type=int, default=120, help="Seconds of ticks after the warm-up, at most.")
    parser.add_argument("--executors", type=int, default=2, help="Executors to wait for before the ticks start.")
    known, pipeline_args = parser.parse_known_args(argv)
    options = PipelineOptions(pipeline_args)
    from pyspark.sql import SparkSession

    try:
        warm_up(options, known.executors)
        startup_s = time.monotonic() - _STARTED
        duration = min(max(known.duration, math.ceil(known.startup_factor * startup_s)), known.max_duration)
        start = int(time.time()) - known.lead
        stop = start + known.lead + duration
        with open(known.times_out + ".tmp", "w") as f:
            json.dump({"start": start, "stop": stop, "startup_s": round(startup_s, 1)}, f)
        os.replace(known.times_out + ".tmp", known.times_out)
        p = beam.Pipeline(options=options)
        build(p, known.output, start, stop)
        p.run().wait_until_finish()
    finally:
        # End the Spark application now, so the master lists it as completed.
        session = SparkSession.getActiveSession()
        if session is not None:
            session.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
