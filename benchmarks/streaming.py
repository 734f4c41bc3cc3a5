"""Streaming (issue #5): SparkRunner --streaming vs the same query in native Spark.

    .venv/bin/python benchmarks/streaming.py --seconds 30       # 30 s per measured run (~12 min)
    .venv/bin/python benchmarks/streaming.py                    # 60 s per measured run (longer: the
                                                                # saturated runs' backlog grows with it)
    .venv/bin/python benchmarks/streaming.py --verbose --json out.json   # + every micro-batch
    .venv/bin/python benchmarks/streaming.py --rate 2000 --skip beam_throughput,native_throughput

The query: a count per key (10,000 distinct keys) in 10 s fixed event-time
windows with early firings, the on-time pane at the watermark and late
firings (one per late element); 1 in 20 events is late (its event time lags
its generation time by 15 s; allowed lateness 30 s). Early firings have the
native query's cadence: Spark's update output mode emits every key and
window a micro-batch changed, Beam's `AfterCount(1)` early trigger, which
this runner evaluates once per key and window per micro-batch (bundle),
does the same. The 1 s processing-time early firings it used before commit b69cd32
run as `beam_latency_early_1s`: with them an event waits for its pane's
1 s deadline and then for the next micro-batch, by design.

One process, one SparkSession (master local[2], 2 shuffle partitions)
created up front, so JVM start-up is excluded from every timing (printed
apart); a short warm-up run of each side (also excluded) starts the Python
workers. Then, in this order (native_throughput described first):

native_throughput  Spark Structured Streaming, no Python: `rate-micro-batch`
    source (rows per batch: --native_rows_per_batch, by default as many as
    the median saturated batch of beam_throughput in this run, so both sides
    amortize their per-batch costs over the same number of events; native
    throughput grows with the batch size: measured 2.2M rows/s at 1M rows
    per batch, 5.6M at 5M, 8.7M at 20M), event time advancing 1 s per
    batch, key = value % 10000, event time = timestamp - 15 s for
    value % 20 == 0, withWatermark 30 s, groupBy(window(ts, 10 s), key)
    .count(), update output mode (Spark's equivalent of early firings),
    `noop` sink, trigger as fast as possible. Throughput = input rows /
    batch wall time (durationMs.triggerExecution, from the query's progress
    events) over the batches that start after the warm-up (min(10 s,
    --seconds / 4)), for --seconds. The source never lets it idle, so this
    is its saturated rate. Also run at 1M rows per batch
    (native_throughput_1m, the default batch size before commit 9aff84b), no target.
    Every native_throughput run checks its counts once it has stopped
    (benchmarks/streaming_native_check.py): its state store must hold, per
    window, exactly the rows the source generated into it, and no row may
    be dropped; a run that fails is left out and makes the exit status 1.
python_floor       The Beam run's own DoFn (GenerateEvents: one TimestampedValue
    per event) alone in PySpark, without SparkRunner: a mapInArrow runs it
    on every tick and drops the events (benchmarks/streaming_floor.py says
    exactly how). Its events/s bound what any engine running this user code
    in CPython reaches here; the report prints Beam's rate against it.
beam_throughput    The same query on SparkRunner --streaming (build_beam below),
    offered --beam_offered_rate events/s, more than it can process: a
    PeriodicImpulse catches up every tick that came due while the previous
    micro-batch ran, so the pipeline is never idle and its backlog grows.
    Throughput = events counted by a Beam counter (committed once per
    micro-batch) / wall time between micro-batch ends, over the batches that
    end after the warm-up (min(10 s, --seconds / 4) of generation; batch 1,
    the query start, never counts). A pipeline that keeps up processes the
    offered rate times the batch duration per batch, so this "busy" rate
    equals the offered rate unless it is saturated: "saturated" = busy rate
    < 0.9x offered (if not, the number is only a lower bound). Also printed:
    events / whole-run wall time (query start and the tail in which the
    last windows close included). Its count is Beam's own
    `Count.PerKey()` and its events carry no latency probes, as the native
    query carries none.
rounds             beam_throughput and native_throughput (at that Beam run's
    median batch) run back to back --rounds times (default 3; the first
    pair is the one described above). This machine's speed drifts by tens
    of percent over minutes (the same Beam run has taken 92 and 132 s of
    CPU), so one pair's ratio is a sample: the target is judged on the
    median of the rounds' ratios, and every round is printed.
beam_throughput_probes  The same with the latency runs' query: 1 in
    --probe_every events carries a probe and the count is the CombineFn that
    keeps the probes of its panes (no target; shows what the probes cost).
native_latency     The native query at --rate events/s (default 1000: about
    what the three-GroupByKey Beam pipeline below can follow on the 2-core
    machine; the report says whether each Beam run kept up) with Spark's
    `rate` source, whose row
    timestamps are the times rows are scheduled (wall clock). Micro-batch
    latency = triggerExecution p50/p99 over the batches with input rows;
    event-to-output = batch end - row timestamp, exact per batch since the
    rate source spreads the batch's rows evenly over the whole seconds it
    read (it only hands out whole seconds, which adds ~0.5 s on average).
beam_latency       Beam at the same --rate events/s. Event-to-output latency
    is measured on a deterministic sample of events (1 in --probe_every,
    ~1%): each carries its generation time, which is its PeriodicImpulse
    tick's timestamp (the wall-clock time the tick came due, so the delay
    until the source picks it up counts, as with the rate source). The
    count's accumulator carries the sampled events it contains; the final
    DoFn writes, per pane, the wall-clock time of output for each sampled
    event, and an event's latency is its first output minus its generation
    time. Micro-batch duration = time between the runner's batch-end logs.
beam_latency_early_1s  The same, early firings AfterProcessingTime(1 s): the
    latency a Beam user who asks for 1 s early panes gets (no target).
beam_latency_3gbk  The same as beam_latency with three chained GroupByKeys (count per key,
    re-key to 1000 keys, GroupByKey, re-key to 100 keys, GroupByKey; the
    later stages keep the first's windowing and its continuation trigger).
    Watermark lag per extra stateful stage is read from the runner's own
    per-batch times (StreamingExecution.last_status, read when the runner
    logs the end of a batch on beam_spark_runner.execution.streaming_execution): for every window
    end W, the batch in which GroupByKey i+1's input watermark first reaches
    W minus that of GroupByKey i. Also printed: the delay of on-time panes
    (output time - window end) and the event-to-output p50 with 3 vs 1
    GroupByKey, each in units of its own run's micro-batch p50.

Targets (issue #5): throughput >= 0.5x native; Beam event-to-output p50 <=
2x native micro-batch p50; each extra stateful stage adds at most one
micro-batch of watermark lag. The script prints PASS/MISS per target and
exits 0 (a run that fails is reported and left out: it is a measurement, not
a test) unless a native query's counts are wrong: then its last line says
FAILED and why, and it exits 1. "other CPU" is the CPU time
processes outside this benchmark used meanwhile (from /proc): on a shared
machine it says how noisy the numbers are.
"""

import argparse
import collections
import functools
import glob
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

import apache_beam as beam  # noqa: E402

# Sibling modules: benchmarks/ is the script's directory.
from headline import headline  # noqa: E402
from procstat import CpuMeter  # noqa: E402
from runner_session import start_runner_session  # noqa: E402
from spark_progress import iso_ms, progress_listener  # noqa: E402
from stats import percentile, weighted_percentiles  # noqa: E402
from streaming_floor import python_floor  # noqa: E402
from streaming_native_check import NativeCountsWrong, check_native_counts  # noqa: E402
from streaming_report import _fmt, report  # noqa: E402
from apache_beam.metrics import Metrics  # noqa: E402
from apache_beam.metrics.metric import MetricsFilter  # noqa: E402
from apache_beam.options.pipeline_options import PipelineOptions  # noqa: E402
from apache_beam.transforms import trigger, window  # noqa: E402
from apache_beam.transforms.periodicsequence import PeriodicImpulse, RebaseMode  # noqa: E402
from apache_beam.utils.timestamp import Timestamp  # noqa: E402

MASTER = "local[2]"
PARTITIONS = 2
NAMESPACE = "streaming_bench"
KEYS = 10_000
WINDOW_S = 10
EARLY_S = 1
LATE_EVERY = 20  # 1 in 20 events is late ...
LATE_LAG_S = 15  # ... by 15 s of event time (the window it falls in has closed)
ALLOWED_LATENESS_S = 30  # = the native query's watermark delay: no event is dropped
STREAMING_LOGGER = "beam_spark_runner.execution.streaming_execution"
# Session settings a SparkRunner streaming query changes (RocksDB state store,
# checkpoint format 2, shuffle partitions = key-groups); the native queries run
# with the values the session had before any Beam run, i.e. Spark's defaults.
_RUNNER_CONF = (
    "spark.sql.streaming.stateStore.providerClass",
    "spark.sql.streaming.stateStore.checkpointFormatVersion",
    "spark.sql.shuffle.partitions",
)
_SESSION_CONF = {}
_LEFTOVERS = []


# -- Spark session and progress events ---------------------------------------------


def start_session():
    """One local[2] session for both sides, as tests/conftest.py starts it."""
    spark = start_runner_session(
        MASTER,
        "beam-spark-streaming-benchmark",
        **{
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": str(PARTITIONS),
            "spark.default.parallelism": str(PARTITIONS),
        },
    )
    for key in _RUNNER_CONF:
        _SESSION_CONF[key] = spark.conf.get(key, None)
    return spark


# -- native Structured Streaming ----------------------------------------------------


def _native_counts(source_df):
    """The query: per-key counts of 10 s event-time windows (update mode: early firings)."""
    from pyspark.sql import functions as F

    value, ts = F.col("value"), F.col("timestamp")
    events = source_df.select(
        (value % KEYS).alias("key"),
        F.when(value % LATE_EVERY == 0, ts - F.expr("INTERVAL %d SECONDS" % LATE_LAG_S)).otherwise(ts).alias("ts"),
    )
    return (
        events.withWatermark("ts", "%d seconds" % ALLOWED_LATENESS_S)
        .groupBy(F.window("ts", "%d seconds" % WINDOW_S), "key")
        .count()
    )


def _start_to_noop(spark, df, name):
    for key, value in _SESSION_CONF.items():  # see _RUNNER_CONF
        if value is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, value)
    checkpoint = tempfile.mkdtemp(prefix="beam-spark-bench-native-")
    query = (
        df.writeStream.outputMode("update")
        .format("noop")
        .queryName(name)
        .option("checkpointLocation", checkpoint)
        .start()
    )
    return query, checkpoint


def _run_native(spark, listener, df, name, seconds):
    """Runs `df` (a native query or python_floor's) into a noop sink for `seconds`;
    returns (start time, the query's progress events)."""
    started, progress, _ = _run_native_query(spark, listener, df, name, seconds)
    return started, progress


def _run_native_query(spark, listener, df, name, seconds):
    """_run_native, also returning the query's checkpoint directory (kept until exit)."""
    query, checkpoint = _start_to_noop(spark, df, name)
    try:
        started = time.time()
        while time.time() - started < seconds and query.isActive:
            time.sleep(0.2)
        if query.exception() is not None:
            raise RuntimeError("native query failed: %s" % query.exception())
    finally:
        # Stopping interrupts a running batch, which Spark logs as an aborted
        # write: expected here, so quiet while stopping (a real failure of the
        # query is raised above from query.exception()).
        spark.sparkContext.setLogLevel("FATAL")
        query.stop()
        time.sleep(1.0)  # cancelled tasks log their aborts after stop() returns
        spark.sparkContext.setLogLevel("ERROR")
        _LEFTOVERS.append(checkpoint)  # removed at exit: tasks of a stopped query may still be ending
    time.sleep(0.5)  # the listener bus delivers the last progress events asynchronously
    return started, listener.of(query.id), checkpoint


def native_throughput(spark, listener, rows_per_batch, seconds, warmup):
    """The native query on `rate-micro-batch` for `seconds` after `warmup`: its
    rate over the steady batches, once its counts are checked against the rows
    its source generated (streaming_native_check; NativeCountsWrong if not)."""
    cpu = CpuMeter().start()
    start_ms = int(time.time() * 1000)
    df = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", rows_per_batch)
        .option("numPartitions", PARTITIONS)
        .option("startTimestamp", start_ms)
        .option("advanceMillisPerBatch", 1000)
        .load()
    )
    started, progress, checkpoint = _run_native_query(
        spark, listener, _native_counts(df), "native-throughput", seconds + warmup
    )
    cpu = cpu.stop()  # the check below is not part of the run
    counts_check = check_native_counts(spark, checkpoint, progress, start_ms, WINDOW_S, LATE_EVERY, LATE_LAG_S)
    steady = [p for p in progress if iso_ms(p["timestamp"]) >= (started + warmup) * 1000 and p["numInputRows"]]
    rows = sum(p["numInputRows"] for p in steady)
    busy_ms = sum(p["durationMs"]["triggerExecution"] for p in steady)
    durations = [p["durationMs"]["triggerExecution"] / 1000.0 for p in steady]
    return {
        "batches": len(steady),
        "rows": rows,
        "rows_per_batch": rows_per_batch,
        "rows_per_s": rows / (busy_ms / 1000.0) if busy_ms else None,
        "batch_p50_s": percentile(durations, 50),
        "batch_p99_s": percentile(durations, 99),
        "first_batch_s": progress[0]["durationMs"]["triggerExecution"] / 1000.0 if progress else None,
        "counts_check": counts_check,
        "cpu": cpu,
    }


def native_latency(spark, listener, rate, seconds, warmup):
    df = spark.readStream.format("rate").option("rowsPerSecond", int(rate)).option("numPartitions", PARTITIONS).load()
    started, progress = _run_native(spark, listener, _native_counts(df), "native-latency", seconds + warmup)
    steady = [p for p in progress if iso_ms(p["timestamp"]) >= (started + warmup) * 1000]
    data = [p for p in steady if p["numInputRows"]]
    durations = [p["durationMs"]["triggerExecution"] / 1000.0 for p in data]
    latencies = []  # (latency s, weight)
    for p in data:
        src = p["sources"][0]
        first_s, last_s = int(src["startOffset"] or 0), int(src["endOffset"])
        ms_per_row = 1000.0 * (last_s - first_s) / p["numInputRows"]
        # The newest row's timestamp is creation + last_s s - one row's share;
        # rows of seconds (first_s, last_s] are spread evenly over them.
        gen_end_ms = iso_ms(p["eventTime"]["max"]) + ms_per_row
        gen_start_ms = gen_end_ms - 1000.0 * (last_s - first_s)
        out_ms = iso_ms(p["timestamp"]) + p["durationMs"]["triggerExecution"]
        for i in range(20):  # the batch's rows, as 20 evenly weighted quantiles
            gen = gen_start_ms + (i + 0.5) * (gen_end_ms - gen_start_ms) / 20.0
            latencies.append(((out_ms - gen) / 1000.0, p["numInputRows"] / 20.0))
    weighted = weighted_percentiles(latencies, (50, 99))
    rows = sum(p["numInputRows"] for p in steady)
    span = (
        (
            (iso_ms(steady[-1]["timestamp"]) + steady[-1]["durationMs"]["triggerExecution"])
            - iso_ms(steady[0]["timestamp"])
        )
        / 1000.0
        if steady
        else 0
    )
    return {
        "batches": len(steady),
        "data_batches": len(data),
        "rows": rows,
        "rows_per_s": rows / span if span else None,
        "batch_p50_s": percentile(durations, 50),
        "batch_p99_s": percentile(durations, 99),
        "e2o_p50_s": weighted[50],
        "e2o_p99_s": weighted[99],
    }


# -- the Beam pipeline ------------------------------------------------------------------


class GenerateEvents(beam.DoFn):
    """N events per PeriodicImpulse tick: (key, probe) with an event time.

    Event number s = tick index * N + i (tick index = tick time / interval,
    consecutive for consecutive ticks); key = s % 10000 as the native
    query's value % 10000; every 20th event lags 15 s (late); every
    probe_every-th carries (s, generation time) to measure latency
    (probe_every 0: none, every event is (key, None))."""

    def __init__(self, per_tick, interval, probe_every):
        self.per_tick, self.interval, self.probe_every = per_tick, interval, probe_every
        self.events = Metrics.counter(NAMESPACE, "events")
        self.ticks = Metrics.distribution(NAMESPACE, "tick_ms")

    def process(self, tick):
        gen = float(tick)
        self.ticks.update(int(gen * 1000))
        base = int(round(gen / self.interval)) * self.per_tick
        n, probe_every = self.per_tick, self.probe_every
        # Every event of a tick shares one of two event times: build each
        # Timestamp once, not once per event from a float.
        on_time, late = Timestamp.of(gen), Timestamp.of(gen - LATE_LAG_S)
        TV = window.TimestampedValue
        if probe_every:
            for s in range(base, base + n):
                probe = (s, gen) if s % probe_every == 0 else None
                yield TV((s % KEYS, probe), late if s % LATE_EVERY == 0 else on_time)
        else:
            for s in range(base, base + n):
                yield TV((s % KEYS, None), late if s % LATE_EVERY == 0 else on_time)
        self.events.inc(n)


class CountWithProbes(beam.CombineFn):
    """Count per key; the accumulator also carries the sampled events it holds."""

    def create_accumulator(self):
        return (0, ())

    def add_input(self, acc, probe):
        return (acc[0] + 1, acc[1] + (probe,)) if probe is not None else (acc[0] + 1, acc[1])

    def merge_accumulators(self, accs):
        count, probes = 0, []
        for c, p in accs:
            count += c
            probes.extend(p)
        return (count, tuple(probes))

    def extract_output(self, acc):
        return acc


def _rekey(kv, modulus):
    return kv[0] % modulus, kv[1]


def _merge_panes(kv):
    """After a downstream GroupByKey: the panes' counts summed (upstream
    panes accumulate, so this is not an event count) and their sampled events."""
    count, probes = 0, set()
    for c, p in map(_count_and_probes, kv[1]):
        count += c
        probes.update(p)
    return kv[0], (count, tuple(sorted(probes)))


def _count_and_probes(value):
    """A pane's (count, sampled events): Count.PerKey's panes carry none."""
    return value if isinstance(value, tuple) else (value, ())


class RecordPanes(beam.DoFn):
    """The last step: per pane, writes (to one file per bundle) the output
    time of every sampled event it holds, the on-time pane's output time, and
    the count of on-time/late panes (the last pane of a key and window)."""

    TIMING = {0: "early", 1: "on_time", 2: "late", 3: "unknown"}

    def __init__(self, out_dir, record_counts):
        self.out_dir, self.record_counts = out_dir, record_counts
        self.panes = {t: Metrics.counter(NAMESPACE, "panes_%s" % t) for t in self.TIMING.values()}

    def start_bundle(self):
        self.lines = []

    def process(self, kv, w=beam.DoFn.WindowParam, pane=beam.DoFn.PaneInfoParam):
        now = time.time()
        key, (count, probes) = kv[0], _count_and_probes(kv[1])
        timing = self.TIMING.get(pane.timing, "unknown")
        self.panes[timing].inc()
        lines = self.lines
        for s, gen in probes:
            lines.append("P %d %.6f %.6f\n" % (s, gen, now))
        if timing == "on_time":
            lines.append("W %d %.6f\n" % (w.end.micros, now))
        if self.record_counts and timing in ("on_time", "late"):
            lines.append("C %d %d %d %d\n" % (key, w.end.micros, pane.index, count))

    def finish_bundle(self):
        if self.lines:
            path = os.path.join(self.out_dir, "%d-%s.txt" % (os.getpid(), uuid.uuid4().hex))
            with open(path + ".tmp", "w") as f:
                f.writelines(self.lines)
            os.replace(path + ".tmp", path)
        self.lines = []


def _early_trigger(early_s):
    """Early panes every `early_s` s of processing time; 0: AfterCount(1),
    which this runner fires once per key and window per micro-batch that
    brings it data (the cadence of Spark's update output mode)."""
    return trigger.AfterProcessingTime(early_s) if early_s else trigger.AfterCount(1)


def build_beam(p, rate, seconds, interval, probe_every, out_dir, group_stages, early_s=0):
    per_tick = max(1, int(round(rate * interval)))
    ticks = p | "Ticks" >> PeriodicImpulse(
        start_timestamp=time.time(),
        stop_timestamp=time.time() + seconds,
        fire_interval=interval,
        rebase=RebaseMode.REBASE_ALL,
    )  # the clock starts when the query runs its first batch
    counts = (
        ticks
        | "Events" >> beam.ParDo(GenerateEvents(per_tick, interval, probe_every))
        | "Window"
        >> beam.WindowInto(
            window.FixedWindows(WINDOW_S),
            trigger=trigger.AfterWatermark(early=_early_trigger(early_s), late=trigger.AfterCount(1)),
            accumulation_mode=trigger.AccumulationMode.ACCUMULATING,
            allowed_lateness=ALLOWED_LATENESS_S,
        )
        # Without probes, Beam's own count: the query the native one runs.
        | "CountPerKey" >> (beam.CombinePerKey(CountWithProbes()) if probe_every else beam.combiners.Count.PerKey())
    )
    for i, modulus in zip(range(1, group_stages), (1000, 100, 10)):
        counts = (
            counts
            | "Rekey%d" % i >> beam.Map(_rekey, modulus)
            | "Group%d" % i >> beam.GroupByKey()
            | "Merge%d" % i >> beam.Map(_merge_panes)
        )
    counts | "Record" >> beam.ParDo(RecordPanes(out_dir, record_counts=group_stages == 1))
    return per_tick * (1.0 / interval)


class _BatchLog(logging.Handler):
    """Records each Beam micro-batch when the runner's driver sink logs it
    (logger beam_spark_runner.execution.streaming_execution, INFO): wall time, the
    batch's number and BatchTimes (from StreamingExecution.last_status, set
    just before the log line), and the run's counters at that moment."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.batches = []
        self.result = None

    def _status(self, record):
        # The StreamingExecution is the receiver of the result's cancel hook.
        execution = getattr(getattr(self.result, "_cancel_fn", None), "__self__", None)
        status = getattr(execution, "last_status", None)
        if status is not None:
            return status["batch"], json.loads(status["times"])
        if isinstance(record.args, tuple) and len(record.args) == 3:  # "Beam streaming batch %d ..."
            return record.args[0], json.loads(record.args[2])
        return None, None

    def emit(self, record):
        if not record.getMessage().startswith("Beam streaming"):
            return
        now = time.time()
        beam_batch, times, events, tick_max = None, None, None, None
        try:
            beam_batch, times = self._status(record)
            if self.result is not None:
                metrics = self.result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))
                events = sum(c.committed for c in metrics["counters"] if c.key.metric.name == "events")
                ticks = [d.committed for d in metrics["distributions"] if d.key.metric.name == "tick_ms"]
                tick_max = max((d.max for d in ticks if d and d.count), default=None)
        except Exception as e:  # noqa: BLE001 -- a measurement must not break the run
            print("benchmark: could not read batch status: %r" % e, file=sys.stderr)
        if self.batches and beam_batch is not None and self.batches[-1]["batch"] == beam_batch:
            return
        self.batches.append(
            {
                "t": now,
                "batch": beam_batch,
                "times": times,
                "events": events,
                "tick_max_s": tick_max / 1000.0 if tick_max is not None else None,
            }
        )


def run_beam(spark, listener, rate, seconds, interval, probe_every, group_stages, label, verbose=False, early_s=0):
    from beam_spark_runner.translation.planner import pipeline_proto_of, plan_streaming_pipeline

    out_dir = tempfile.mkdtemp(prefix="beam-spark-bench-panes-")
    log = _BatchLog()
    logger = logging.getLogger(STREAMING_LOGGER)
    old_level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(log)
    logger.propagate = False
    try:
        options = PipelineOptions(
            [
                "--runner=beam_spark_runner.SparkRunner",
                "--streaming",
                "--spark_master=" + MASTER,
                "--parallelism=%d" % PARTITIONS,
            ]
        )
        p = beam.Pipeline(options=options)
        offered = build_beam(p, rate, seconds, interval, probe_every, out_dir, group_stages, early_s)
        plan = plan_streaming_pipeline(pipeline_proto_of(p))
        groups = [op.name for op in plan.operators if op.kind == "group"]
        keyed = [
            "%s %s" % (op.kind, op.display_name if op.kind == "group" else "") for op in plan.operators if op.is_keyed
        ]
        queries_before = set(listener.ids_named("beam-"))
        cpu = CpuMeter().start()
        submitted = time.time()
        result = p.run()
        log.result = result
        result.wait_until_finish()
        ended = time.time()
        cpu = cpu.stop()
        time.sleep(0.2)
        metrics = result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))
        counters = {c.key.metric.name: c.committed for c in metrics["counters"]}
        ticks = [d.committed for d in metrics["distributions"] if d.key.metric.name == "tick_ms"]
        lines = _read_lines(out_dir)
        progress = [p for q in set(listener.ids_named("beam-")) - queries_before for p in listener.of(q)]
    finally:
        logger.removeHandler(log)
        logger.setLevel(old_level)
        logger.propagate = True
        shutil.rmtree(out_dir, ignore_errors=True)
    out = analyze_beam(
        label, offered, seconds, submitted, ended, cpu, counters, ticks, log.batches, lines, groups, verbose
    )
    out["spark"] = _spark_breakdown(progress, keyed)
    if verbose:
        _print_spark_progress(label, progress)
    return out


def _spark_breakdown(progress, keyed):
    """Where Spark says the Beam query's batches spent their time (sums, s):
    durationMs phases, and per keyed operator (transformWithState) the time
    in its Python function and in committing its state. Spark lists state
    operators from the sink back to the source: reverse plan order."""
    total = collections.Counter()
    for p in progress:
        if p["batchId"] == 0:
            continue  # the query start
        for k, v in p.get("durationMs", {}).items():
            total[k] += v / 1000.0
        for name, op in zip(reversed(keyed), p.get("stateOperators", [])):
            total["%s: python" % name.strip()] += op.get("allUpdatesTimeMs", 0) / 1000.0
            total["%s: state commit" % name.strip()] += op.get("commitTimeMs", 0) / 1000.0
    return dict(total)


def _print_spark_progress(label, progress):
    print(
        "  Spark progress of the Beam query (%s): batch, rows in, durationMs, state operators from "
        "the last to the first (rows total, updates ms, commit ms)" % label
    )
    for p in progress:
        d = p.get("durationMs", {})
        ops = [
            "%s/%s/%s" % (o.get("numRowsTotal"), o.get("allUpdatesTimeMs"), o.get("commitTimeMs"))
            for o in p.get("stateOperators", [])
        ]
        print(
            "    %3d %7d trigger %6d addBatch %6d latestOffset %5d planning %5d wal %4d commit %4d  %s"
            % (
                p["batchId"],
                p["numInputRows"],
                d.get("triggerExecution", 0),
                d.get("addBatch", 0),
                d.get("latestOffset", 0),
                d.get("queryPlanning", 0),
                d.get("walCommit", 0),
                d.get("commitOffsets", 0),
                " ".join(ops),
            )
        )


def _read_lines(out_dir):
    lines = []
    for path in glob.glob(os.path.join(out_dir, "*.txt")):
        with open(path) as f:
            lines.extend(line.split() for line in f)
    return lines


def analyze_beam(label, offered, seconds, submitted, ended, cpu, counters, ticks, batches, lines, groups, verbose):
    events = counters.get("events", 0)
    tick = ticks[0] if ticks else None
    gen_start = tick.min / 1000.0 if tick and tick.count else None
    gen_end = tick.max / 1000.0 if tick and tick.count else None
    warm_until = (gen_start or submitted) + _warmup_of(seconds)

    # Per-batch wall durations (between consecutive batch-end logs) and events.
    rows = []
    prev_t, prev_events = submitted, 0
    for b in batches:
        ev = b["events"] if b["events"] is not None else prev_events
        rows.append(
            {
                "batch": b["batch"],
                "start": prev_t,
                "end": b["t"],
                "dur": b["t"] - prev_t,
                "events": ev - prev_events,
                "tick_max_s": b["tick_max_s"],
                "times": b["times"],
            }
        )
        prev_t, prev_events = b["t"], ev
    event_rows = [r for r in rows if r["batch"] and r["batch"] > 1 and r["events"] > 0 and r["end"] >= warm_until]
    busy = sum(r["dur"] for r in event_rows)
    steady_events = sum(r["events"] for r in event_rows)
    durations = [
        r["dur"]
        for r in rows
        if r["batch"] and r["batch"] > 1 and r["end"] >= warm_until and (gen_end is None or r["start"] <= gen_end)
    ]
    # A PeriodicImpulse catches up every tick that came due before it runs, so a
    # pipeline that keeps up processes (offered rate x batch duration) events
    # per batch: its busy rate is the offered rate. A busy rate clearly below
    # the offered rate means batches grow: the pipeline is saturated.
    busy_rate = steady_events / busy if busy else None
    batch_events_p50 = percentile([r["events"] for r in event_rows], 50)
    saturated = busy_rate is not None and busy_rate < 0.9 * offered
    batch_p50 = percentile(durations, 50)

    # Latency of sampled events: first output - generation time.
    first_out, gen_of = {}, {}
    on_time = []
    last_count = {}
    for parts in lines:
        if parts[0] == "P":
            s, gen, out = int(parts[1]), float(parts[2]), float(parts[3])
            gen_of[s] = gen
            if s not in first_out or out < first_out[s]:
                first_out[s] = out
        elif parts[0] == "W":
            on_time.append((int(parts[1]) / 1e6, float(parts[2])))
        elif parts[0] == "C":
            k = (int(parts[1]), int(parts[2]))
            index, count = int(parts[3]), int(parts[4])
            if k not in last_count or index > last_count[k][0]:
                last_count[k] = (index, count)
    lat = [first_out[s] - gen_of[s] for s in first_out if gen_of[s] >= warm_until]
    on_time_delay = [out - end for end, out in on_time if end >= warm_until]
    counted = sum(c for _, c in last_count.values()) if last_count else None

    # Watermark lag between consecutive GroupByKeys, in micro-batches.
    stage_lags = _stage_lags(rows, groups, warm_until, gen_end)

    out = {
        "label": label,
        "offered_per_s": offered,
        "events": events,
        "groups": len(groups),
        "wall_s": ended - submitted,
        "gen_s": (gen_end - gen_start) if gen_start is not None else None,
        "events_per_s_busy": busy_rate,
        "batch_events_p50": batch_events_p50,
        "events_per_s_run": events / (ended - submitted) if ended > submitted else None,
        "batches": len(rows),
        "first_batch_s": rows[0]["dur"] if rows else None,
        "batch_p50_s": batch_p50,
        "batch_p99_s": percentile(durations, 99),
        "saturated": saturated,
        "tail_s": ended - gen_end if gen_end else None,
        "probes": len(lat),
        "probes_total": len(gen_of),
        "e2o_p50_s": percentile(lat, 50),
        "e2o_p99_s": percentile(lat, 99),
        "on_time_p50_s": percentile(on_time_delay, 50),
        "on_time_p99_s": percentile(on_time_delay, 99),
        "panes": {k[len("panes_") :]: v for k, v in counters.items() if k.startswith("panes_")},
        "counted_events": counted,
        "stage_lags": stage_lags,
        "cpu": cpu,
    }
    if verbose:
        print("  per batch (%s): batch, wall s, events, events/s, newest tick processed s before batch end" % label)
        for r in rows:
            print(
                "    %3s %6.2f %8d %9.0f %7s"
                % (
                    r["batch"],
                    r["dur"],
                    r["events"],
                    r["events"] / r["dur"] if r["dur"] else 0,
                    _fmt(r["end"] - r["tick_max_s"] if r["tick_max_s"] else None),
                )
            )
    return out


def _round(beam, native):
    """One throughput round: (Beam events/s, native rows/s, native rows per batch, ratio)."""
    b, n = beam["events_per_s_busy"], native["rows_per_s"]
    return (b, n, native["rows_per_batch"], b / n if b and n else None)


def _warmup_of(seconds):
    return min(10.0, seconds / 4.0)


def _stage_lags(rows, groups, warm_until, gen_end):
    """For each window end W reached during the steady part of the run, the
    first batch in which each GroupByKey's input watermark is >= W; returns
    per pair of consecutive GroupByKeys the list of batch differences."""
    timed = [(r["batch"], r["times"]) for r in rows if r["times"]]
    if len(groups) < 2 or not timed:
        return []
    first_w = (int(warm_until) // WINDOW_S + 1) * WINDOW_S
    last_w = int(gen_end or 0) // WINDOW_S * WINDOW_S
    lags = [[] for _ in groups[1:]]
    for w in range(first_w, last_w + 1, WINDOW_S):
        micros = w * 1_000_000
        reached = []
        for g in groups:
            batch = next((b for b, t in timed if t["input_watermarks"].get(g, -(2**63)) >= micros), None)
            reached.append(batch)
        if None in reached:
            continue
        for i in range(len(groups) - 1):
            lags[i].append(reached[i + 1] - reached[i])
    return lags


# -- main -------------------------------------------------------------------------------------

# The runs, in the order --json lists them.
RUN_NAMES = (
    "native_throughput",
    "native_throughput_1m",
    "python_floor",
    "native_latency",
    "beam_throughput",
    "beam_throughput_probes",
    "beam_latency",
    "beam_latency_early_1s",
    "beam_latency_3gbk",
)


def main(argv=None):
    args = _parse_args(argv)
    attempt = _Attempts({s for s in args.skip.split(",") if s})

    logging.getLogger().setLevel(logging.WARNING)
    started = time.perf_counter()
    spark = start_session()
    session_s = time.perf_counter() - started
    listener = progress_listener(spark)
    print("SparkSession (%s) start-up: %.1f s" % (MASTER, session_s), flush=True)

    warm = _warm_up(spark, listener, args, attempt)
    runs = dict.fromkeys(RUN_NAMES)
    rounds, rows_per_batch = _throughput_rounds(spark, listener, args, attempt, runs)
    _throughput_comparisons(spark, listener, args, attempt, rows_per_batch, runs)
    _latency_runs(spark, listener, args, attempt, runs)

    query = "master %s, %d keys, %d s windows, early panes per micro-batch with data, 1/%d late by %d s" % (
        MASTER,
        KEYS,
        WINDOW_S,
        LATE_EVERY,
        LATE_LAG_S,
    )
    report(
        args,
        query,
        session_s,
        warm,
        runs["native_throughput"],
        runs["native_latency"],
        runs["beam_throughput"],
        runs["beam_latency"],
        runs["beam_latency_3gbk"],
        runs["beam_latency_early_1s"],
        runs["beam_throughput_probes"],
        runs["native_throughput_1m"],
        runs["python_floor"],
        rounds,
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                dict(
                    {"args": vars(args), "session_s": session_s, "warm_up_s": warm},
                    **{name: runs[name] for name in RUN_NAMES},
                    throughput_rounds=rounds,
                ),
                f,
                indent=2,
                default=str,
            )
    spark.stop()
    for path in _LEFTOVERS:
        shutil.rmtree(path, ignore_errors=True)
    status = attempt.exit_status()
    # The headline: sustained throughput, Beam on SparkRunner / native Spark
    # at equal batch sizes, the median of the rounds.
    headline(
        "streaming_throughput",
        statistics.median(r[3] for r in rounds) if rounds else None,
        0.5,
        at_most=False,
        results_ok=status == 0,
    )
    return status


def _parse_args(argv):
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--seconds",
        type=float,
        default=60,
        help="Measured seconds per run (generation time of the Beam runs), after warm-up.",
    )
    parser.add_argument(
        "--native_rows_per_batch",
        type=int,
        default=0,
        help="Rows per native micro-batch; 0: beam_throughput's median batch (1M if skipped).",
    )
    parser.add_argument(
        "--beam_offered_rate",
        type=float,
        default=3_000_000,
        help="events/s offered in beam_throughput: must exceed what it can process.",
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=1000,
        help="events/s of the latency runs (native and Beam); low enough that the "
        "three-GroupByKey Beam pipeline keeps up on a 2-core machine.",
    )
    parser.add_argument("--fire_interval", type=float, default=0.01, help="PeriodicImpulse tick interval, s.")
    parser.add_argument("--probe_every", type=int, default=101, help="Sample 1 in N events for latency.")
    parser.add_argument(
        "--skip",
        default="",
        help="Comma-separated runs to skip: native_throughput, python_floor, native_throughput_1m, "
        "beam_throughput, "
        "beam_throughput_probes, native_latency, beam_latency, "
        "beam_latency_early_1s, beam_latency_3gbk.",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="(beam_throughput, native_throughput) pairs; the throughput ratio is their median.",
    )
    parser.add_argument("--verbose", action="store_true", help="Print every Beam micro-batch.")
    parser.add_argument("--json", default=None, help="Also write the results to this JSON file.")
    return parser.parse_args(argv)


class _Attempts:
    """Runs one measurement at a time. A failure is printed and leaves the run
    out (the exit status stays 0: a measurement, not a test); so do native
    counts that disagree with the rows generated (NativeCountsWrong), but those
    are recorded and make the exit status 1: a ratio against a query that
    computes a wrong answer is no measurement."""

    def __init__(self, skip):
        self.skip = skip
        self.wrong_counts = []  # "run: what is wrong"

    def __call__(self, name, fn, *a):
        """fn(*a) with its CPU use, or None if skipped or failed."""
        if name in self.skip:
            return None
        cpu = CpuMeter().start()
        try:
            out = fn(*a)
        except NativeCountsWrong as e:
            print("%s: native query counts WRONG, run left out: %s" % (name, e), flush=True)
            self.wrong_counts.append("%s: %s" % (name, e))
            return None
        except Exception as e:  # noqa: BLE001 -- a measurement, not a test
            print("%s FAILED: %s" % (name, str(e).splitlines()[0] if str(e) else repr(e)), flush=True)
            return None
        out.setdefault("cpu", cpu.stop())
        return out

    def exit_status(self):
        """0, or 1 (saying why, as the last line) if a native query counted wrong."""
        if not self.wrong_counts:
            return 0
        print(
            "FAILED: the native query's counts disagree with the rows it generated in %d run(s), which "
            "are left out of the results: %s" % (len(self.wrong_counts), "; ".join(self.wrong_counts)),
            flush=True,
        )
        return 1


def _warm_up(spark, listener, args, attempt):
    """Short runs of each side (excluded from the results) that start the Python
    workers; returns {side: wall seconds}."""
    warm = collections.OrderedDict()
    for name, fn, a in (
        ("beam", run_beam, (spark, listener, 200, 3, args.fire_interval, args.probe_every, 3, "warm-up")),
        ("native", native_throughput, (spark, listener, 10_000, 3, 0)),
    ):
        t = time.perf_counter()
        attempt("warm-up " + name, fn, *a)
        warm[name] = time.perf_counter() - t
    print("warm-up runs (excluded): %s" % ", ".join("%s %.1f s" % kv for kv in warm.items()), flush=True)
    return warm


def _throughput_rounds(spark, listener, args, attempt, runs):
    """beam_throughput, then native_throughput at its median batch, --rounds
    times back to back; the first pair goes into `runs`. Returns (the rounds,
    as _round gives them; the first native run's rows per batch)."""
    warmup = _warmup_of(args.seconds)
    bt = attempt(
        "beam_throughput",
        run_beam,
        spark,
        listener,
        args.beam_offered_rate,
        args.seconds,
        args.fire_interval,
        0,
        1,
        "beam_throughput",
        args.verbose,
    )
    if bt:
        print(
            "beam_throughput: %s events/s (saturated: %s, median batch %s events)"
            % (_fmt(bt["events_per_s_busy"], "%.0f"), bt["saturated"], _fmt(bt["batch_events_p50"], "%.0f")),
            flush=True,
        )
    rows_per_batch = args.native_rows_per_batch or int(round((bt and bt["batch_events_p50"]) or 1_000_000, -5))
    nt = attempt("native_throughput", native_throughput, spark, listener, rows_per_batch, args.seconds, warmup)
    if nt:
        print(
            "native_throughput at %d rows per batch: %s rows/s" % (rows_per_batch, _fmt(nt["rows_per_s"], "%.0f")),
            flush=True,
        )
    runs["beam_throughput"], runs["native_throughput"] = bt, nt
    rounds = [_round(bt, nt)] if bt and nt else []
    for i in range(2, args.rounds + 1):
        # Further (Beam, native) pairs back to back: the machine's speed drifts
        # by tens of percent over minutes, so one pair's ratio is a sample.
        b = attempt(
            "beam_throughput",
            run_beam,
            spark,
            listener,
            args.beam_offered_rate,
            args.seconds,
            args.fire_interval,
            0,
            1,
            "beam_throughput round %d" % i,
        )
        n = b and attempt(
            "native_throughput",
            native_throughput,
            spark,
            listener,
            args.native_rows_per_batch or int(round(b["batch_events_p50"] or 1_000_000, -5)),
            args.seconds,
            warmup,
        )
        if b and n:
            rounds.append(_round(b, n))
            print(
                "round %d: beam %.0f events/s, native %.0f rows/s at %d rows per batch: %.3fx" % (i, *rounds[-1]),
                flush=True,
            )
    return rounds, rows_per_batch


def _throughput_comparisons(spark, listener, args, attempt, rows_per_batch, runs):
    """The throughput runs beside the target: python_floor, native at 1M rows
    per batch and Beam with latency probes."""
    warmup = _warmup_of(args.seconds)
    per_tick = max(1, int(round(args.beam_offered_rate * args.fire_interval)))
    pf = attempt(
        "python_floor",
        python_floor,
        spark,
        listener,
        _run_native,
        PARTITIONS,
        max(1, round(rows_per_batch / per_tick)),
        per_tick,
        args.fire_interval,
        functools.partial(GenerateEvents, per_tick, args.fire_interval, 0),
        args.seconds,
        warmup,
    )
    if pf:
        print(
            "python_floor (the Beam run's DoFn alone in PySpark): %s events/s" % _fmt(pf["events_per_s"], "%.0f"),
            flush=True,
        )
    n1 = attempt("native_throughput_1m", native_throughput, spark, listener, 1_000_000, args.seconds, warmup)
    if n1:
        print("native_throughput_1m: %s rows/s" % _fmt(n1["rows_per_s"], "%.0f"), flush=True)
    bp = attempt(
        "beam_throughput_probes",
        run_beam,
        spark,
        listener,
        args.beam_offered_rate,
        args.seconds,
        args.fire_interval,
        args.probe_every,
        1,
        "beam_throughput_probes",
        args.verbose,
    )
    if bp:
        print(
            "beam_throughput_probes: %s events/s (saturated: %s)"
            % (_fmt(bp["events_per_s_busy"], "%.0f"), bp["saturated"]),
            flush=True,
        )
    runs.update(python_floor=pf, native_throughput_1m=n1, beam_throughput_probes=bp)


def _latency_runs(spark, listener, args, attempt, runs):
    """native_latency and the Beam latency runs at --rate events/s."""
    warmup = _warmup_of(args.seconds)
    rate = max(args.rate, 1.0 / args.fire_interval)
    nl = attempt("native_latency", native_latency, spark, listener, rate, args.seconds, warmup)
    if nl:
        print("native_latency at %.0f rows/s: batch p50 %s s" % (rate, _fmt(nl["batch_p50_s"])), flush=True)
    bl = attempt(
        "beam_latency",
        run_beam,
        spark,
        listener,
        rate,
        args.seconds,
        args.fire_interval,
        args.probe_every,
        1,
        "beam_latency",
        args.verbose,
    )
    if bl:
        print("beam_latency at %.0f events/s: event-to-output p50 %s s" % (rate, _fmt(bl["e2o_p50_s"])), flush=True)
    b1 = attempt(
        "beam_latency_early_1s",
        run_beam,
        spark,
        listener,
        rate,
        args.seconds,
        args.fire_interval,
        args.probe_every,
        1,
        "beam_latency_early_1s",
        args.verbose,
        EARLY_S,
    )
    if b1:
        print(
            "beam_latency_early_1s at %.0f events/s: event-to-output p50 %s s" % (rate, _fmt(b1["e2o_p50_s"])),
            flush=True,
        )
    b3 = attempt(
        "beam_latency_3gbk",
        run_beam,
        spark,
        listener,
        rate,
        args.seconds,
        args.fire_interval,
        args.probe_every,
        3,
        "beam_latency_3gbk",
        args.verbose,
    )
    if b3:
        print("beam_latency_3gbk: stage lags %s" % b3["stage_lags"], flush=True)
    runs.update(native_latency=nl, beam_latency=bl, beam_latency_early_1s=b1, beam_latency_3gbk=b3)


if __name__ == "__main__":
    sys.exit(main())
