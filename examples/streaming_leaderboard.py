"""Streaming leaderboard: per-team scores per event-time window, with early
(speculative) and late firings, on Spark Structured Streaming.

A PeriodicImpulse ticks every --tick_seconds for --duration_seconds; each
tick makes a few game events whose event times lag the tick, some by more
than a window (late data). Scores are summed per team and fixed window:

  * early panes every --early_seconds of processing time while a window is open,
  * the on-time pane when the watermark passes the end of the window,
  * a late pane for each late event, up to --allowed_lateness_seconds.

Each pane is written to its own file, named by window, team and pane index,
so a micro-batch replayed after a failure rewrites the same files instead of
adding new ones:

    python examples/streaming_leaderboard.py --output /tmp/leaderboard

The run ends by itself once the impulse stops and every window has closed.
"""

import argparse
import logging
import os
import time
import zlib

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import trigger, window
from apache_beam.transforms.periodicsequence import PeriodicImpulse

TEAMS = ("red", "green", "blue")


def game_events(tick, late_seconds=25.0):
    """Deterministic events of one impulse tick: (team, score, event time).
    About every seventh event is late: its event time lags by late_seconds."""
    tick = float(tick)
    events = []
    for i in range(4):
        h = zlib.crc32(("%r-%d" % (tick, i)).encode())
        lag = late_seconds if h % 7 == 0 else (h % 3)
        events.append((TEAMS[h % len(TEAMS)], 1 + h % 10, tick - lag))
    return events


class WritePane(beam.DoFn):
    """Writes one file per pane: <output>/<window start>-<team>-<pane index>.txt."""

    def __init__(self, output):
        self.output = output

    def process(self, team_score, w=beam.DoFn.WindowParam, pane=beam.DoFn.PaneInfoParam):
        team, score = team_score
        timing = {0: "early", 1: "on-time", 2: "late", 3: "unknown"}[pane.timing]
        os.makedirs(self.output, exist_ok=True)
        name = "%d-%s-%03d.txt" % (int(w.start), team, pane.index)
        path = os.path.join(self.output, name)
        with open(path + ".tmp", "w") as f:
            f.write(
                "%s window [%d, %d) score %d (%s pane %d)\n"
                % (team, int(w.start), int(w.end), score, timing, pane.index)
            )
        os.replace(path + ".tmp", path)
        yield path


def build(p, args):
    start = time.time() if args.start is None else args.start
    return (
        p
        | "Ticks"
        >> PeriodicImpulse(
            start_timestamp=start, stop_timestamp=start + args.duration_seconds, fire_interval=args.tick_seconds
        )
        | "Events" >> beam.FlatMap(game_events, args.late_seconds)
        | "EventTime" >> beam.Map(lambda e: window.TimestampedValue((e[0], e[1]), e[2]))
        | "Window"
        >> beam.WindowInto(
            window.FixedWindows(args.window_seconds),
            trigger=trigger.AfterWatermark(
                early=trigger.AfterProcessingTime(args.early_seconds), late=trigger.AfterCount(1)
            ),
            accumulation_mode=trigger.AccumulationMode.ACCUMULATING,
            allowed_lateness=args.allowed_lateness_seconds,
        )
        | "TeamScore" >> beam.CombinePerKey(sum)
        | "Write" >> beam.ParDo(WritePane(args.output))
    )


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", required=True, help="Directory for one file per pane.")
    parser.add_argument("--duration_seconds", type=float, default=40)
    parser.add_argument("--tick_seconds", type=float, default=0.5)
    parser.add_argument("--window_seconds", type=int, default=10)
    parser.add_argument("--early_seconds", type=int, default=3)
    parser.add_argument("--allowed_lateness_seconds", type=int, default=60)
    parser.add_argument("--late_seconds", type=float, default=25, help="Lag of the late events.")
    parser.add_argument("--start", type=float, default=None, help="Impulse start (epoch s); default now.")
    return parser.parse_known_args(argv)


def run(argv=None):
    args, pipeline_args = parse(argv)
    if not any(a.startswith("--runner") for a in pipeline_args):
        pipeline_args.append("--runner=beam_spark_runner.SparkRunner")
    pipeline_args.append("--streaming")
    with beam.Pipeline(options=PipelineOptions(pipeline_args)) as p:
        build(p, args)


if __name__ == "__main__":
    logging.getLogger().setLevel(logging.WARNING)
    run()
