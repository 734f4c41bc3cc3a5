"""python_floor of benchmarks/streaming.py: the Beam run's user code alone, in PySpark.

The Beam throughput run spends most of its time in Python: the benchmark's
own DoFn builds one `TimestampedValue` per event, and the runner routes
and counts each one. This run measures the first part alone, on the same
session and machine, with PySpark's own Python path and nothing of
SparkRunner: a `rate-micro-batch` source gives one row per PeriodicImpulse
tick (tick i at start + i x interval, as the Beam run's ticks), a
`mapInArrow` runs the very DoFn class of the Beam run on each tick and
drops its events as they come (a `deque` of length 0: no window, no count,
no state, every event freed at once), one row per task goes to a `noop`
sink. Ticks per batch = the Beam run's median batch / events per tick, so
both amortize their per-batch costs over the same number of events.

python_count_floor (`count=True`): the same, but each event is also put in
its 10 s fixed window and counted per (key, window) in a Python dict (one
per task and batch, dropped at its end): the least a runner that windows
and counts the events in Python must add to the user code, with no
GroupByKey, state, trigger or output. Its rate over python_floor's is the
best Beam / python_floor any such runner reaches on this machine.

Throughput = events (input rows x events per tick) / batch wall time
(`durationMs.triggerExecution`) over the batches after the warm-up. It
bounds what any engine that runs this user code in CPython on this machine
can reach for the query; the report prints it against the native query
and the Beam run against it (what the runner adds to the user code).
"""

import collections
import sys
import time

from spark_progress import iso_ms
from stats import percentile


def _generate_and_drop(make_dofn, start_s, interval):
    """mapInArrow function: each input row is a tick index; runs the DoFn on
    the tick and drops its outputs; yields the number of ticks run."""

    def generate(batches):
        import pyarrow as pa

        dofn = make_dofn()
        drop = collections.deque(maxlen=0).extend
        ticks = 0
        for batch in batches:
            for index in batch.column(0).to_pylist():
                drop(dofn.process(start_s + index * interval))
                ticks += 1
        yield pa.RecordBatch.from_pydict({"ticks": [ticks]})

    return generate


def _generate_and_count(make_dofn, start_s, interval, window_s):
    """mapInArrow function: as _generate_and_drop, but counts each event
    per (fixed window of `window_s` s, key), in dicts per task: the window
    looked up again only when an event's timestamp is not the previous
    event's (a tick's events share two), a defaultdict per window."""

    def generate(batches):
        import pyarrow as pa

        dofn = make_dofn()
        size = int(window_s * 1_000_000)
        windows = {}
        ticks = 0
        for batch in batches:
            for index in batch.column(0).to_pylist():
                last = counts = None
                for event in dofn.process(start_s + index * interval):
                    timestamp = event.timestamp
                    if timestamp is not last:
                        last, micros = timestamp, timestamp.micros
                        start = micros - micros % size
                        counts = windows.get(start)
                        if counts is None:
                            counts = windows[start] = collections.defaultdict(int)
                    counts[event.value[0]] += 1
                ticks += 1
        yield pa.RecordBatch.from_pydict({"ticks": [ticks]})

    return generate


def python_floor(
    spark,
    listener,
    run_query,
    partitions,
    ticks_per_batch,
    events_per_tick,
    interval,
    make_dofn,
    seconds,
    warmup,
    count_window_s=None,
):
    """Runs the floor query for `seconds` (+ warm-up); `run_query(spark,
    listener, df, name, seconds)` runs a query as the native runs do and
    returns (start time, progress events). `make_dofn()` builds the DoFn
    (picklable: the workers build their own). `count_window_s`: count the
    events per key and window of that size (python_count_floor)."""
    from pyspark import cloudpickle

    module = sys.modules[__name__]
    # The workers cannot import this module (benchmarks/ is not on their
    # path): ship its functions by value, as __main__'s are.
    cloudpickle.register_pickle_by_value(module)
    start_s = time.time()
    df = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", ticks_per_batch)
        .option("numPartitions", partitions)
        .option("startTimestamp", int(start_s * 1000))
        .option("advanceMillisPerBatch", 1000)
        .load()
        .select("value")
        .mapInArrow(
            _generate_and_drop(make_dofn, start_s, interval)
            if count_window_s is None
            else _generate_and_count(make_dofn, start_s, interval, count_window_s),
            "ticks long",
        )
    )
    name = "python-floor" if count_window_s is None else "python-count-floor"
    started, progress = run_query(spark, listener, df, name, seconds + warmup)
    steady = [p for p in progress if iso_ms(p["timestamp"]) >= (started + warmup) * 1000 and p["numInputRows"]]
    events = sum(p["numInputRows"] for p in steady) * events_per_tick
    busy_ms = sum(p["durationMs"]["triggerExecution"] for p in steady)
    durations = [p["durationMs"]["triggerExecution"] / 1000.0 for p in steady]
    return {
        "batches": len(steady),
        "events": events,
        "events_per_batch": ticks_per_batch * events_per_tick,
        "events_per_s": events / (busy_ms / 1000.0) if busy_ms else None,
        "batch_p50_s": percentile(durations, 50),
    }
