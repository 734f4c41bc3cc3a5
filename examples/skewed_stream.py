"""One skewed stream, two aggregations: an exact watermark and a 95% one.

Twenty users send one event a second, landing as JSON files (one file per
second, like examples/spark_streaming_files.py); one user, `laggard`,
delivers its events `--lag_seconds` late in event time. The pipeline reads
the directory with `ReadFromSpark` (a watermark per user: `partition_columns`)
and sums each user's events in 2-second windows twice, side by side:

* `Exact` on the exact low watermark: a window fires once every user,
  the laggard too, has passed its end;
* `P95` inside `beam_spark_runner.watermark_percentile(0.95)`: a window
  fires once 95% of the users (19 of 20) have; the laggard's events then
  arrive behind the watermark and make LATE panes (allowed lateness 60 s),
  counted as late records.

Each pane is written as a row (aggregation, window, user, total, timing,
the wall-clock time it fired) to `--output/<aggregation>` with
`WriteToSpark`. The files land one second of events at a time, each once
the pipeline ran a few micro-batches since the one before, so the run
does not depend on the machine's speed. Then the run is drained and a
summary printed: per aggregation, how many files after a window's last
second its on-time pane fired, and its late records.

    python examples/skewed_stream.py --landing /tmp/beam-skewed-in \\
        --output /tmp/beam-skewed-out

docs/watermarks.md says what the percentile watermark is;
examples/notebooks/percentile_watermarks.ipynb plots this run.
"""

import argparse
import bisect
import datetime
import json
import os
import statistics
import threading
import time
import typing

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import trigger, window

import beam_spark_runner
from beam_spark_runner.io import ReadFromSpark, WriteToSpark

LAGGARD = "laggard"


def user_names(count):
    """`count` users, the last of them the laggard."""
    return tuple("u%02d" % i for i in range(count - 1)) + (LAGGARD,)


USERS = user_names(20)
WINDOW_SECONDS = 2
SCHEMA = "user string, score long, ts timestamp"
EPOCH = datetime.datetime(2026, 1, 1)
AGGREGATIONS = {"Exact": 1.0, "P95": 0.95}


class Pane(typing.NamedTuple):
    """One pane of one user's window, as written."""

    aggregation: str
    window_start: int  # seconds since EPOCH
    user: str
    total: int
    timing: str  # EARLY, ON_TIME, LATE
    index: int
    fired_at: float  # wall-clock seconds since the Unix epoch


class _ToPane(beam.DoFn):
    def __init__(self, aggregation):
        self._aggregation = aggregation

    def process(self, user_total, w=beam.DoFn.WindowParam, pane=beam.DoFn.PaneInfoParam):
        timing = {0: "EARLY", 1: "ON_TIME", 2: "LATE"}.get(pane.timing, "UNKNOWN")
        start = int(w.start) - int(EPOCH.replace(tzinfo=datetime.timezone.utc).timestamp())
        yield Pane(self._aggregation, start, user_total[0], user_total[1], timing, pane.index, time.time())


def events_at(second, lag_seconds, users=USERS):
    """The file of `second`: one event per user at that event time, the
    laggard's `lag_seconds` earlier (but not before the stream's start: its
    first files hold events at second 0, so it is known, and holds the
    exact watermark, from the first file on)."""
    events = []
    for user in users:
        at = max(0, second - lag_seconds) if user == LAGGARD else second
        events.append({"user": user, "score": 1, "ts": (EPOCH + datetime.timedelta(seconds=at)).isoformat()})
    return events


def land(directory, second, lag_seconds, users=USERS):
    """Writes the file of `second` into `directory` at once (renamed into place)."""
    tmp = os.path.join(os.path.dirname(os.path.abspath(directory)), ".events-%05d.json" % second)
    with open(tmp, "w") as f:
        for event in events_at(second, lag_seconds, users):
            f.write(json.dumps(event) + "\n")
    os.replace(tmp, os.path.join(directory, "events-%05d.json" % second))


def build(p, landing, output, aggregations=AGGREGATIONS):
    """Adds the aggregations ({name: watermark percentile}) to `p`; each
    writes its panes to `output/<name>`."""
    scores = (
        p
        | "Events"
        >> ReadFromSpark(format="json", path=landing, schema=SCHEMA, timestamp_column="ts", partition_columns=["user"])
        | "Windows"
        >> beam.WindowInto(
            window.FixedWindows(WINDOW_SECONDS),
            trigger=trigger.AfterWatermark(late=trigger.AfterCount(1)),
            accumulation_mode=trigger.AccumulationMode.ACCUMULATING,
            allowed_lateness=60,
        )
        | "ByUser" >> beam.Map(lambda event: (event.user, event.score))
    )
    for name, percentile in aggregations.items():
        with beam_spark_runner.watermark_percentile(percentile):
            _ = (
                scores
                | name >> beam.CombinePerKey(sum)
                | name + "Panes" >> beam.ParDo(_ToPane(name)).with_output_types(Pane)
                | name + "Write" >> WriteToSpark(format="parquet", path=os.path.join(output, name))
            )


def feed(result, landing, duration_seconds, lag_seconds, batches_per_file=4, timeout_s=1800, users=USERS):
    """Lands the file of each second in turn, once the running pipeline
    (`result`) ran its first micro-batch, each after `batches_per_file`
    micro-batches since the one before: a file is read, the watermark moves
    and due windows fire before the next lands, so the run is the same
    however fast the machine. Returns the wall-clock time each file landed."""
    _wait_for_batches(result, 1, timeout_s, "the streaming query's first micro-batch")
    landed = []
    for second in range(duration_seconds):
        seen = len(result.streaming_progress())
        land(landing, second, lag_seconds, users)
        landed.append(time.time())
        _wait_for_batches(result, seen + batches_per_file, timeout_s, "micro-batches after file %d" % second)
    return landed


def _wait_for_batches(result, count, timeout_s, what):
    deadline = time.time() + timeout_s
    while len(result.streaming_progress()) < count:
        if time.time() > deadline:
            raise TimeoutError("waited %d s for %s" % (timeout_s, what))
        time.sleep(0.05)


def is_step_of(display_name, aggregation):
    """Whether a step (its display name in `result.streaming_progress()`)
    belongs to `aggregation`; in a notebook Beam prefixes labels with the
    cell's number ("[4]: P95/GroupByKey")."""
    return display_name.split(": ", 1)[-1].startswith(aggregation + "/")


def on_time_delays(panes, landed):
    """{aggregation: {window start: files landed after the window's last
    second until its first ON_TIME pane fired}}: 1 when a window fires as
    soon as the next second's file is read."""
    out = {}
    for pane in panes:
        if pane.timing != "ON_TIME":
            continue
        current = bisect.bisect_right(landed, pane.fired_at) - 1  # the last file landed before it fired
        delay = current - (pane.window_start + WINDOW_SECONDS - 1)
        windows = out.setdefault(pane.aggregation, {})
        windows[pane.window_start] = min(delay, windows.get(pane.window_start, delay))
    return out


def run(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--landing", default="/tmp/beam-skewed-in", help="Directory the JSON files land in.")
    parser.add_argument("--output", default="/tmp/beam-skewed-out", help="Parquet directories of the panes.")
    parser.add_argument("--duration_seconds", type=int, default=12, help="How many seconds of events land.")
    parser.add_argument("--lag_seconds", type=int, default=4, help="How far the laggard is behind in event time.")
    args, beam_args = parser.parse_known_args(argv)
    os.makedirs(args.landing, exist_ok=True)
    if os.listdir(args.landing) or (os.path.exists(args.output) and os.listdir(args.output)):
        parser.error("--landing and --output must be empty or new directories")
    options = PipelineOptions(["--runner=beam_spark_runner.SparkRunner", "--streaming", *beam_args])
    p = beam.Pipeline(options=options)
    build(p, args.landing, args.output)
    result = p.run()
    landed = feed(result, args.landing, args.duration_seconds, args.lag_seconds)
    result.drain()
    result.wait_until_finish()
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    panes = [
        Pane(**row.asDict())
        for name in AGGREGATIONS
        for row in spark.read.parquet(os.path.join(args.output, name)).collect()
    ]
    delays = on_time_delays(panes, landed)
    for name in AGGREGATIONS:
        late = [s.late for r in result.streaming_progress() for s in r.stages if is_step_of(s.display_name, name)]
        print(
            "%-5s on-time panes %s files after their window's last (median), %d late records"
            % (name, statistics.median(delays[name].values()), sum(late))
        )
    return result, panes, landed


if __name__ == "__main__":
    run()
