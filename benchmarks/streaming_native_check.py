"""The native throughput query of benchmarks/streaming.py checks its own counts.

The query reads Spark's `rate-micro-batch` source: the batch of a progress
event holds the values [startOffset.offset, endOffset.offset) (the first
batch: from 0), all with the event time startOffset.timestamp (the first
batch: the source's startTimestamp). The query moves every LATE_EVERY-th
value (value % LATE_EVERY == 0) back by LATE_LAG_S of event time and counts
rows per key in WINDOW_S fixed windows, into a `noop` sink. So the counts
are read back, once the query has stopped, from its state store (Spark's
`statestore` data source, at the last batch the progress events report),
and checked against the rows the source generated, computed from the
progress events alone:

 * the source's offsets are contiguous from 0 and every batch has
   endOffset - startOffset input rows;
 * no row was dropped as later than the watermark (the query's watermark
   delay is ALLOWED_LATENESS_S > LATE_LAG_S: none should be);
 * every window in the state holds, summed over its keys, exactly the rows
   generated into it;
 * every window rows were generated into and that is not in the state ends
   at or before the last batch's watermark (evicted, as update mode does),
   and the state holds no other window.

Any difference raises NativeCountsWrong, which streaming.py reports as a
failure of the run (exit status 1) instead of its throughput.
"""

import collections

from spark_progress import iso_ms


class NativeCountsWrong(Exception):
    """The native query's counts disagree with the rows its source generated."""


def check_native_counts(spark, checkpoint, progress, start_ms, window_s, late_every, late_lag_s):
    """Raises NativeCountsWrong unless the state in `checkpoint` holds the
    counts of the rows `progress` (the query's progress events) says were
    generated; returns {"windows": windows checked, "rows": rows in them,
    "evicted_windows": windows already evicted}, or None if no batch completed."""
    if not progress:
        return None
    progress = sorted(progress, key=lambda p: p["batchId"])
    generated = generated_rows_per_window(progress, start_ms, window_s * 1000, late_every, late_lag_s * 1000)
    dropped = sum(op.get("numRowsDroppedByWatermark", 0) for p in progress for op in p.get("stateOperators", ()))
    if dropped:
        raise NativeCountsWrong("%d rows dropped as late by the watermark (expected none)" % dropped)
    last = progress[-1]
    counted = state_rows_per_window(spark, checkpoint, last["batchId"])
    watermark_ms = iso_ms(last["eventTime"]["watermark"]) if last.get("eventTime", {}).get("watermark") else 0
    problems = []
    for start, rows in sorted(generated.items()):
        if start in counted:
            if counted[start] != rows:
                problems.append(
                    "window at %d ms counts %d rows, the source generated %d into it" % (start, counted[start], rows)
                )
        elif start + window_s * 1000 > watermark_ms + 1:
            problems.append(
                "window at %d ms (%d rows generated) is missing from the state before the "
                "watermark (%d ms) passed its end" % (start, rows, watermark_ms)
            )
    for start in sorted(set(counted) - set(generated)):
        problems.append("window at %d ms counts %d rows, the source generated none into it" % (start, counted[start]))
    if problems:
        raise NativeCountsWrong(
            "at batch %d: %s%s"
            % (
                last["batchId"],
                "; ".join(problems[:3]),
                " (and %d more)" % (len(problems) - 3) if len(problems) > 3 else "",
            )
        )
    return {
        "windows": len(counted),
        "rows": sum(counted.values()),
        "evicted_windows": len(set(generated) - set(counted)),
    }


def generated_rows_per_window(progress, start_ms, window_ms, late_every, late_lag_ms):
    """{window start ms: rows} the rate-micro-batch source generated into each
    window over the batches of `progress` (sorted by batch), with the query's
    event times; raises NativeCountsWrong if the offsets are not contiguous."""
    rows = collections.Counter()
    expected_first = 0
    for p in progress:
        source = p["sources"][0]
        begin = source["startOffset"] or {"offset": 0, "timestamp": start_ms}
        first, end = int(begin["offset"]), int(source["endOffset"]["offset"])
        if first != expected_first or end - first != p["numInputRows"]:
            raise NativeCountsWrong(
                "batch %d read values [%d, %d) as %d input rows, after values up to %d: the source's "
                "offsets or the progress events are not contiguous"
                % (p["batchId"], first, end, p["numInputRows"], expected_first)
            )
        expected_first = end
        late = _multiples_below(end, late_every) - _multiples_below(first, late_every)
        event_ms = int(begin["timestamp"])
        rows[event_ms - event_ms % window_ms] += end - first - late
        late_ms = event_ms - late_lag_ms
        rows[late_ms - late_ms % window_ms] += late
    return {start: n for start, n in rows.items() if n}


def _multiples_below(n, k):
    """How many of 0, 1, ..., n - 1 are multiples of k."""
    return (n + k - 1) // k


def state_rows_per_window(spark, checkpoint, batch_id):
    """{window start ms: count summed over keys} in the query's state after `batch_id`."""
    from pyspark.sql import functions as F

    state = spark.read.format("statestore").option("batchId", batch_id).load(checkpoint)
    per_window = (
        state.groupBy(F.unix_millis(F.col("key.window.start")).alias("start_ms"))
        .agg(F.sum("value.count").alias("rows"))
        .collect()
    )
    return {row["start_ms"]: row["rows"] for row in per_window}
