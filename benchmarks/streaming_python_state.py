"""The least a Python stateful stage costs per micro-batch in PySpark: Spark's
`rate` source at the benchmark's rate, a per-key count kept by a Python
`transformWithState` processor (RocksDB state, as the runner's keyed
operators), its rows collected by a `foreachBatch` sink, with the runner's
query settings (checkpoint format 2, changelog checkpointing, the
FileSystem checkpoint manager). No Beam: what any pipeline with one Python
stateful step pays on this machine before it does any work of its own.

`python_state_floor(spark, listener, rate, seconds, warmup, stages=1)`:
micro-batch p50/p99 over the batches with input rows; `stages` chains
that many stateful steps (re-keyed between them)."""

import contextlib
import tempfile

from spark_progress import iso_ms
from stats import percentile
from streaming_config import KEYS, PARTITIONS
from streaming_native import run_for

from beam_spark_runner.execution.stream_interruption import quiet_py4j_callback_log, stops_reported

QUERY_CONF = {
    "spark.sql.streaming.stateStore.providerClass": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    "spark.sql.streaming.stateStore.checkpointFormatVersion": "2",
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    "spark.sql.streaming.checkpointFileManagerClass": "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager",
    "spark.sql.shuffle.partitions": str(PARTITIONS),
}


@contextlib.contextmanager
def session_conf(spark, conf):
    """The session's SQL settings set to `conf` inside the block, as they
    were after it."""
    saved = {key: spark.conf.get(key, None) for key in conf}
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def count_processor(key_columns=("key",)):
    """A Python StatefulProcessor counting each grouping key's rows in a
    ValueState; emits the key's columns (`key_columns`) and its count."""
    from pyspark.sql import Row
    from pyspark.sql.streaming import StatefulProcessor

    class CountPerKey(StatefulProcessor):
        def init(self, handle):
            self._count = handle.getValueState("count", "count long")

        def handleInputRows(self, key, rows, timerValues):
            count = (self._count.get() or (0,))[0] + sum(1 for _ in rows)
            self._count.update((count,))
            yield Row(**dict(zip(key_columns, key)), count=count)

        def close(self):
            pass

    return CountPerKey()


def _collect(batch, batch_id):
    """The query's foreachBatch sink. A batch cut short by the query's stop
    is said in the runner's one-line form (its Java stack overflowed the
    regular expression Spark tells a stop by, printing a StackOverflowError)."""
    with stops_reported(batch_id):
        batch.collect()


def python_state_floor(spark, listener, rate, seconds, warmup, stages=1):
    from pyspark.sql import functions as F

    checkpoint = tempfile.mkdtemp(prefix="beam-spark-bench-python-state-")
    with session_conf(spark, QUERY_CONF):
        df = spark.readStream.format("rate").option("rowsPerSecond", int(rate)).option("numPartitions", PARTITIONS)
        df = df.load().select((F.col("value") % KEYS).alias("key"))
        for stage in range(stages):
            if stage:
                df = df.select(((F.col("key") + F.col("count")) % KEYS).alias("key"))
            df = df.groupBy("key").transformWithState(count_processor(), "key long, count long", "Update", "None")
        quiet_py4j_callback_log()
        query = (
            df.writeStream.foreachBatch(_collect)
            .queryName("python-state-floor")
            .option("checkpointLocation", checkpoint)
            .start()
        )
        started = run_for(spark, query, seconds + warmup, "python state floor query")
        progress = listener.of(query.id)
    steady = [p for p in progress if iso_ms(p["timestamp"]) >= (started + warmup) * 1000 and p["numInputRows"]]
    durations = [p["durationMs"]["triggerExecution"] / 1000.0 for p in steady]
    return {
        "batches": len(steady),
        "batch_p50_s": percentile(durations, 50),
        "batch_p99_s": percentile(durations, 99),
        "add_batch_p50_s": percentile([p["durationMs"].get("addBatch", 0) / 1000.0 for p in steady], 50),
    }
