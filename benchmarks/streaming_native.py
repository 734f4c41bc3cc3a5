"""The native side of benchmarks/streaming.py: the query in Spark Structured
Streaming with no Python (per-key counts of fixed event-time windows,
update output mode, `noop` sink), run saturated on `rate-micro-batch`
(native_throughput, its counts checked by streaming_native_check) and at
a fixed rate on `rate` (native_latency), and the helpers that run a
query for a number of seconds, python_floor's included (_run_native)."""

import tempfile
import time

from procstat import CpuMeter
from spark_progress import iso_ms
from stats import percentile, weighted_percentiles
from streaming_config import (
    _SESSION_CONF,
    ALLOWED_LATENESS_S,
    KEYS,
    LATE_EVERY,
    LATE_LAG_S,
    PARTITIONS,
    WINDOW_S,
)
from streaming_native_check import check_native_counts

# Checkpoint directories of the stopped native queries, removed at exit.
_LEFTOVERS = []


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
    for key, value in _SESSION_CONF.items():  # see streaming_config._RUNNER_CONF
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
        started = run_for(spark, query, seconds, "native query")
    finally:
        _LEFTOVERS.append(checkpoint)  # removed at exit: tasks of a stopped query may still be ending
    return started, listener.of(query.id), checkpoint


def run_for(spark, query, seconds, what):
    """Lets a started `query` run for `seconds`, then stops it; raises if it
    failed. Returns when it started running here (time.time())."""
    try:
        started = time.time()
        while time.time() - started < seconds and query.isActive:
            time.sleep(0.2)
        if query.exception() is not None:
            raise RuntimeError("%s failed: %s" % (what, query.exception()))
    finally:
        # Stopping interrupts a running batch, which Spark logs as an aborted
        # write: expected here, so quiet while stopping (a real failure of the
        # query is raised above from query.exception()).
        spark.sparkContext.setLogLevel("FATAL")
        query.stop()
        time.sleep(1.0)  # cancelled tasks log their aborts after stop() returns
        spark.sparkContext.setLogLevel("ERROR")
    time.sleep(0.5)  # the listener bus delivers the last progress events asynchronously
    return started


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
