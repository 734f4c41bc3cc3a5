"""Nexmark on this runner beside its peers: Beam's Python Nexmark queries
as the apache-beam wheel ships them (`apache_beam.testing.benchmarks.nexmark
.queries`), unchanged, over one seeded event set (benchmarks/nexmark_events.py),
on SparkRunner, Prism, Beam's Flink runner and the FnApiRunner.

    python benchmarks/nexmark.py                       # 1M events, batch, every runner found
    python benchmarks/nexmark.py --events 10000000
    python benchmarks/nexmark.py --runners spark,fnapi --queries 0,1,2 --events 100000
    python benchmarks/nexmark.py --mode streaming

Each runner runs in a process of its own (`--worker`), which starts the
runner once (a SparkSession; Prism's or Flink's job server; nothing for
the FnApiRunner) and runs a small warm-up pipeline (in streaming mode a
streaming one too), reports that start-up apart, then runs each query on the
same events and times it from `run()` to the end of `wait_until_finish()`.
Every query's output (each element as canonical JSON) is compared across
runners: equal, or the difference is named. Queries 10 and 12 fire on
processing time (their panes depend on when elements arrive), so their
outputs are compared only as the totals they preserve.

Batch reads the events from a JSON-lines file. Streaming makes them in the
pipeline from their indices: a PeriodicImpulse whose ticks are the events'
own times (from Nexmark's base time, long past, so it emits as fast as the
runner takes them, its watermark following event time), each tick the next
events at Nexmark's fixed event-time rate; the source stops at the last
event, which ends the run.

Peers are found or built into a cache directory by benchmarks/peers/
(Prism from the Go module proxy, Flink's job server jar from Maven
Central); a peer that cannot be had is reported with its error and left
out. The headline: this runner's geometric-mean time over the queries
every runner answered, divided by the best peer's (target <= 1.0).
"""

import argparse
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

import apache_beam as beam

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, REPO)  # benchmarks.peers

SEED = 20261202
QUERIES = tuple(range(13))
# Their panes fire on processing time: only their totals are comparable.
PROCESSING_TIME_QUERIES = {10: "bid_count_total", 12: "bid_count_total"}
RUNNERS = ("spark", "fnapi", "prism", "flink")
QUERY_ARGS = {
    "auction_skip": 123,
    "window_size_sec": 10,
    "window_period_sec": 5,
    "fanout": 5,
    "num_max_workers": 5,
    "max_log_events": 100000,
    "occasional_delay_sec": 3,
    "max_auction_waiting_time": 600,
}
STREAM_TICK_EVENTS = 1000


def cache_dir():
    root = os.environ.get("BEAM_SPARK_PEERS_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "beam-spark-runner", "peers"
    )
    path = os.path.join(root, "nexmark-events")
    os.makedirs(path, exist_ok=True)
    return path


def events_file(count):
    """The seeded events, made once per count and kept in the cache."""
    import nexmark_events

    path = os.path.join(cache_dir(), "events-%d-%d.jsonl" % (SEED, count))
    if not os.path.exists(path):
        tmp = path + ".tmp%d" % os.getpid()
        nexmark_events.write_events(tmp, SEED, count)
        os.replace(tmp, path)
    return path


# -- canonical output -----------------------------------------------------------


def canonical(value):
    """A JSON-able form of a query's output element: Nexmark's model objects
    by their fields, timestamps as microseconds, tuples as lists."""
    from apache_beam.utils.timestamp import Timestamp

    if isinstance(value, Timestamp):
        return value.micros
    if isinstance(value, dict):
        return {str(k): canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    if isinstance(value, float):
        return round(value, 6)
    if hasattr(value, "__dict__"):
        return {"_type": type(value).__name__, **{k: canonical(v) for k, v in vars(value).items()}}
    return value


def to_line(value):
    return json.dumps(canonical(value), sort_keys=True, separators=(",", ":"))


def summarize_output(query, lines):
    """What is compared across runners: the sorted lines' digest and count,
    or for a processing-time query the total its panes preserve."""
    if query in PROCESSING_TIME_QUERIES:
        total = sum(json.loads(line).get("bid_count", 0) for line in lines)
        return {"compare": "bid_count_total", "value": total, "lines": len(lines)}
    digest = hashlib.sha256("\n".join(sorted(lines)).encode()).hexdigest()[:16]
    return {"compare": "elements", "value": digest, "lines": len(lines)}


# -- one query on one runner ------------------------------------------------------


def _read_events(pipeline, mode, count, path):
    from apache_beam.testing.benchmarks.nexmark import nexmark_util
    from apache_beam.transforms import window

    if mode == "batch":
        return (
            pipeline
            | "ReadEvents" >> beam.io.ReadFromText(path)
            | "Parse" >> beam.ParDo(nexmark_util.ParseJsonEventFn())
            | "Timestamp" >> beam.Map(lambda e: window.TimestampedValue(e, e.date_time))
        )
    import nexmark_events
    from apache_beam.transforms.periodicsequence import PeriodicImpulse

    ticks = max(1, math.ceil(count / STREAM_TICK_EVENTS))
    tick_s = STREAM_TICK_EVENTS / nexmark_events.EVENTS_PER_SECOND
    # The ticks at the events' own times (Nexmark's base time, long past):
    # the source emits them as fast as the runner takes them, its watermark
    # following the events' times, which are the same on every run.
    start_s = nexmark_events.BASE_TIME_MS / 1000.0

    def events_of_tick(tick_timestamp):
        first = int(round((float(tick_timestamp) - start_s) / tick_s)) * STREAM_TICK_EVENTS
        for index in range(first, min(first + STREAM_TICK_EVENTS, count)):
            yield nexmark_events.event_json(SEED, index)

    return (
        pipeline
        | "Ticks"
        >> PeriodicImpulse(start_timestamp=start_s, stop_timestamp=start_s + ticks * tick_s, fire_interval=tick_s)
        | "Events" >> beam.FlatMap(events_of_tick)
        | "Parse" >> beam.ParDo(nexmark_util.ParseJsonEventFn())
        | "Timestamp" >> beam.Map(lambda e: window.TimestampedValue(e, e.date_time))
    )


class _WriteBundles(beam.DoFn):
    """Streaming output: each bundle's lines into a file of its own (a
    file sink of unbounded global windows needs a triggering frequency,
    which would add the sink's own delay to every runner's time)."""

    def __init__(self, prefix):
        self._prefix = prefix

    def start_bundle(self):
        self._lines = []

    def process(self, line):
        self._lines.append(line)

    def finish_bundle(self):
        if self._lines:
            with open("%s-%s" % (self._prefix, uuid.uuid4().hex), "w") as f:
                f.write("\n".join(self._lines) + "\n")


def run_query(query, args, mode, count, path, out_dir):
    """Runs one query; returns (seconds, output lines)."""
    import importlib

    from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions, TypeOptions
    from apache_beam.testing.benchmarks.nexmark import nexmark_util

    module = importlib.import_module("apache_beam.testing.benchmarks.nexmark.queries.query%d" % query)
    options = PipelineOptions(args)
    options.view_as(TypeOptions).allow_unsafe_triggers = True
    options.view_as(StandardOptions).streaming = mode == "streaming"
    nexmark_util.setup_coder()
    prefix = os.path.join(out_dir, "q%d" % query)
    pipeline = beam.Pipeline(options=options)
    events = _read_events(pipeline, mode, count, path)
    output = module.load(events, dict(QUERY_ARGS), options)
    lines = output | "Canonical" >> beam.Map(to_line)
    if mode == "batch":
        _ = lines | "Write" >> beam.io.WriteToText(prefix)
    else:
        _ = lines | "Write" >> beam.ParDo(_WriteBundles(prefix))
    started = time.monotonic()
    result = pipeline.run()
    result.wait_until_finish()
    seconds = time.monotonic() - started
    lines = []
    for name in sorted(os.listdir(out_dir)):
        if name.startswith("q%d-" % query):
            with open(os.path.join(out_dir, name)) as f:
                lines.extend(line.rstrip("\n") for line in f if line.strip())
    return seconds, lines


class _Runner:
    """A runner's start, its pipeline arguments and its stop."""

    def __init__(self, name, mode="batch"):
        self.name = name
        self.mode = mode
        self._server = None
        self.startup_s = 0.0
        self.version = ""

    def start(self):
        started = time.monotonic()
        if self.name == "spark":
            # The session every query's run then reuses, started as the
            # runner starts it.
            import pyspark
            from apache_beam.options.pipeline_options import PipelineOptions

            from beam_spark_runner.options import SparkRunnerOptions
            from beam_spark_runner.session import get_or_create_session

            get_or_create_session(PipelineOptions(self.args()).view_as(SparkRunnerOptions))
            self.version = "pyspark %s" % pyspark.__version__
        elif self.name == "prism":
            from benchmarks.peers import prism

            self._server = prism.PrismJobServer()
            self._server.__enter__()
            self.version = "prism %s" % self._server.version
        elif self.name == "flink":
            from benchmarks.peers import flink

            self._server = flink.FlinkJobServer()
            self._server.__enter__()
            self.version = "flink %s" % self._server.version
        self._warm_up()
        self.startup_s = time.monotonic() - started

    def _warm_up(self):
        """One small pipeline (a GroupByKey), so that what a runner starts on
        its first job (Spark's Python workers, a job server's first job) is
        counted as its start-up, not as the first query's time; in
        streaming mode a small streaming one too (a PeriodicImpulse into a
        windowed GroupByKey), for what a runner starts on its first
        streaming job (Spark's streaming query machinery, Flink's streaming
        job graph)."""
        from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
        from apache_beam.transforms import window
        from apache_beam.transforms.periodicsequence import PeriodicImpulse

        with beam.Pipeline(options=PipelineOptions(self.args())) as pipeline:
            _ = pipeline | beam.Create([(i % 7, i) for i in range(100)]) | beam.GroupByKey() | beam.Map(len)
        if self.mode != "streaming":
            return
        options = PipelineOptions(self.args())
        options.view_as(StandardOptions).streaming = True
        with beam.Pipeline(options=options) as pipeline:
            _ = (
                pipeline
                | "Ticks" >> PeriodicImpulse(start_timestamp=1000.0, stop_timestamp=1010.0, fire_interval=1.0)
                | beam.Map(lambda t: (int(float(t)) % 3, 1))
                | beam.WindowInto(window.FixedWindows(5))
                | beam.GroupByKey()
                | beam.MapTuple(lambda k, ones: (k, len(ones)))
            )

    def args(self):
        if self.name == "spark":
            return ["--runner=beam_spark_runner.SparkRunner", "--spark_master=local[%d]" % os.cpu_count()]
        if self.name == "fnapi":
            return [
                "--runner=FnApiRunner",
                "--direct_num_workers=%d" % os.cpu_count(),
                "--direct_running_mode=multi_threading",
            ]
        if self.name == "prism":
            from benchmarks.peers import prism

            return prism.pipeline_args(self._server)
        from benchmarks.peers import flink

        return flink.pipeline_args(self._server)

    def stop(self):
        if self._server is not None:
            self._server.__exit__(None, None, None)


def worker(runner_name, queries, mode, count):
    """The `--worker` process: one runner, every query; prints one JSON
    line per query and a first line with the runner's start-up."""
    path = events_file(count) if mode == "batch" else None
    runner = _Runner(runner_name, mode)
    try:
        runner.start()
    except Exception as e:  # noqa: BLE001 -- reported, the runner left out
        print(json.dumps({"runner": runner_name, "unavailable": "%s: %s" % (type(e).__name__, e)}), flush=True)
        return
    print(json.dumps({"runner": runner_name, "startup_s": runner.startup_s, "version": runner.version}), flush=True)
    try:
        for query in queries:
            out_dir = tempfile.mkdtemp(prefix="nexmark-%s-q%d-" % (runner_name, query))
            row = {"runner": runner_name, "query": query, "mode": mode}
            try:
                seconds, lines = run_query(query, runner.args(), mode, count, path, out_dir)
                row.update(seconds=seconds, **summarize_output(query, lines))
            except Exception as e:  # noqa: BLE001 -- a failed query is a result
                row["error"] = ("%s: %s" % (type(e).__name__, e))[:2000]
            finally:
                shutil.rmtree(out_dir, ignore_errors=True)
            print(json.dumps(row), flush=True)
    finally:
        runner.stop()


# -- the comparison ---------------------------------------------------------------------


def _run_worker(runner_name, queries, mode, count, timeout_s):
    """Runs the runner's worker process over `queries`: (rows, seconds).
    A worker that dies inside a query (a crash of the runner) has that
    query recorded as failed with its exit code and the end of its stderr,
    and a new worker runs the queries after it."""
    started = time.monotonic()
    rows, left = [], list(queries)
    while left:
        command = [sys.executable, os.path.abspath(__file__), "--worker", runner_name]
        command += ["--queries", ",".join(map(str, left)), "--mode", mode, "--events", str(count)]
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout_s, cwd=REPO)
        got = [json.loads(line) for line in done.stdout.decode().splitlines() if line.startswith("{")]
        if not got:
            stderr = done.stderr.decode()[-2000:]
            return [{"runner": runner_name, "unavailable": "exit %d: %s" % (done.returncode, stderr)}], 0.0
        if not rows:
            rows.append(got[0])
        answered = [row for row in got[1:] if "query" in row]
        rows.extend(answered)
        left = left[len(answered) :]
        if left and done.returncode != 0:
            stderr = done.stderr.decode().strip().splitlines()
            rows.append(
                {
                    "runner": runner_name,
                    "query": left[0],
                    "mode": mode,
                    "error": "the runner's process ended (exit code %d) in this query: %s"
                    % (done.returncode, " | ".join(stderr[-3:])[-1000:]),
                }
            )
            left = left[1:]
        elif left:
            break  # ended cleanly without answering: nothing more to learn
    return rows, time.monotonic() - started


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def compare(results, queries):
    """Per query: which runners agree with the majority answer, which differ."""
    verdicts = {}
    for query in queries:
        answers = {r: rows[query] for r, rows in results.items() if query in rows and "error" not in rows[query]}
        values = [(a["compare"], a["value"]) for a in answers.values()]
        if not values:
            verdicts[query] = {}
            continue
        counts = sorted(((values.count(v), v) for v in set(values)), reverse=True)
        if len(counts) > 1 and counts[0][0] == counts[1][0]:
            # No answer holds a majority: every runner's differs.
            verdicts[query] = {r: False for r in answers}
            continue
        majority = counts[0][1]
        verdicts[query] = {r: (a["compare"], a["value"]) == majority for r, a in answers.items()}
    return verdicts


def report(results, startups, queries, mode, count):
    from headline import headline

    verdicts = compare(results, queries)
    runners = list(results)
    print(
        "\nNexmark %s, %d events, %d cores; seconds per query (x: failed; !: output differs)"
        % (mode, count, os.cpu_count())
    )
    print("%-6s" % "query" + "".join("%14s" % r for r in runners))
    for query in queries:
        cells = []
        for r in runners:
            row = results[r].get(query)
            if row is None:
                cells.append("%14s" % "-")
            elif "error" in row:
                cells.append("%14s" % "x")
            else:
                mark = "" if verdicts[query].get(r, True) else "!"
                cells.append("%14s" % ("%.1f%s" % (row["seconds"], mark)))
        print("%-6s" % query + "".join(cells))
    print("%-6s" % "start" + "".join("%14s" % ("%.1f" % startups[r] if r in startups else "-") for r in runners))
    for r in runners:
        for query in queries:
            row = results[r].get(query)
            if row is not None and "error" in row:
                print("  %s q%d failed: %s" % (r, query, row["error"].splitlines()[0][:300]))
            elif row is not None and not verdicts[query].get(r, True):
                print("  %s q%d differs: %s %s (%d lines)" % (r, query, row["compare"], row["value"], row["lines"]))
    # Queries every runner answered (correctly, where the others agree).
    common = [q for q in queries if all(q in results[r] and "error" not in results[r][q] for r in runners)]
    peers = [r for r in runners if r != "spark"]
    ours = "spark" in results
    if not ours or not peers or not common:
        headline("nexmark_%s" % mode, None, 1.0)
        return
    ours_gm = geomean([results["spark"][q]["seconds"] for q in common])
    peer_gms = {r: geomean([results[r][q]["seconds"] for q in common]) for r in peers}
    best = min(peer_gms, key=peer_gms.get)
    # Events/s per core on the geomean (the target's measure): the events
    # over the geometric-mean time, so it orders runners as the headline does.
    gms = {"spark": ours_gm, **peer_gms}
    per_core = {r: count / gms[r] / os.cpu_count() for r in runners}
    print(
        "geomean over %d queries: %s"
        % (len(common), ", ".join("%s %.2f s" % (r, g) for r, g in [("spark", ours_gm)] + sorted(peer_gms.items())))
    )
    print("events/s per core (on the geomean): %s" % ", ".join("%s %.0f" % kv for kv in per_core.items()))
    slowest = max(common, key=lambda q: results["spark"][q]["seconds"] / min(results[r][q]["seconds"] for r in peers))
    worst = results["spark"][slowest]["seconds"] / min(results[r][slowest]["seconds"] for r in peers)
    print("slowest against the best peer: q%d at %.2fx (target <= 2.0)" % (slowest, worst))
    correct = all(verdicts[q].get("spark", True) for q in queries)
    headline("nexmark_%s" % mode, ours_gm / peer_gms[best], 1.0, results_ok=correct)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--queries", default=",".join(map(str, QUERIES)))
    parser.add_argument("--runners", default=",".join(RUNNERS))
    parser.add_argument("--mode", choices=("batch", "streaming"), default="batch")
    parser.add_argument("--timeout", type=int, default=7200, help="seconds per runner")
    parser.add_argument("--json", help="write every row here")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    queries = [int(q) for q in args.queries.split(",") if q.strip()]
    if args.worker:
        worker(args.worker, queries, args.mode, args.events)
        return 0
    if args.mode == "batch":
        started = time.monotonic()
        events_file(args.events)
        print(
            "events: %d in %.1f s (cached in %s)" % (args.events, time.monotonic() - started, cache_dir()), flush=True
        )
    results, startups, rows_out = {}, {}, []
    for runner_name in args.runners.split(","):
        rows, wall = _run_worker(runner_name, queries, args.mode, args.events, args.timeout)
        rows_out.extend(rows)
        head = rows[0]
        if "unavailable" in head:
            print("%s: unavailable: %s" % (runner_name, head["unavailable"]), flush=True)
            continue
        startups[runner_name] = head["startup_s"]
        results[runner_name] = {row["query"]: row for row in rows[1:]}
        print(
            "%s (%s): start-up %.1f s, %d queries in %.0f s"
            % (runner_name, head.get("version", ""), head["startup_s"], len(rows) - 1, wall),
            flush=True,
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows_out, f, indent=1)
    report(results, startups, queries, args.mode, args.events)
    return 0


if __name__ == "__main__":
    sys.exit(main())
