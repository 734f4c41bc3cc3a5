"""The streaming query of a StreamingPlan, built on a SparkSession: the Beam
source, one Spark operator per plan operator, the foreachBatch sink; and
the session settings the query needs while it starts.

One query per pipeline, a single chain (see streaming/rows.py):

    Beam source (Python DataSourceStreamReader: TestStream, Impulse, CONTROL rows)
      (unioned with each Spark data source: readStream -> mapInArrow to
       query rows, io/spark/streaming_glue.py)
      -> per plan operator, in topological order:
           stateless stage:  mapInArrow (after a repartition by key-group when
                             it reads a splittable DoFn's output)
           GroupByKey / stateful DoFn / splittable DoFn / side inputs:
                             groupBy(kg).transformWithState (RocksDB state)
      -> foreachBatch sink on the driver (streaming/driver_sink.py; Spark
         sinks' rows written there first, io/spark/streaming_glue.py).
"""

import functools
import os
import pickle
import urllib.parse

from beam_spark_runner.execution import checkpoint_files, runner_io_glue, spark_internals
from beam_spark_runner.execution.streaming_udfs import (
    SOURCE_FORMAT,
    BeamStreamSource,
    KeyGroupProcessor,
    OperatorRef,
    SharedPlan,
    stateless_batches,
)
from beam_spark_runner.plans import PER_KEY_STATE_KINDS
from beam_spark_runner.streaming import rows as R
from beam_spark_runner.streaming.source_planner import is_planner_offset

# Spark SQL settings a streaming query needs (None: the key-group count).
# RocksDB: transformWithState requires it; checkpoint format v2: Spark warns
# that v1 can lose data when a failed batch is re-run.
_QUERY_CONF = {
    "spark.sql.streaming.stateStore.providerClass": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    "spark.sql.streaming.stateStore.checkpointFormatVersion": "2",
    # Each batch uploads the changed state only, not a RocksDB snapshot.
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    "spark.sql.shuffle.partitions": None,
    # Spark turns adaptive execution off for a streaming query anyway, and
    # warns twice at its start when the session has it on.
    "spark.sql.adaptive.enabled": "false",
}
# Retention of Spark's checkpoint files, unless the session sets its own: a
# run that goes on for weeks keeps a bounded number of offset, commit and
# state store files. Spark keeps the files of the last `minBatchesToRetain`
# batches (its default, 100, is for rolling a query back by hand; the runner
# replays at most the last uncommitted batch) and deletes older state store
# files in a maintenance task every `maintenanceInterval` (default 60 s, in
# which a fast query writes hundreds of batches' changelog files).
_RETENTION_DEFAULTS = {
    "spark.sql.streaming.minBatchesToRetain": "20",
    "spark.sql.streaming.stateStore.maintenanceInterval": "10s",
}
# Checkpoint files in a local directory: Spark's default file manager goes
# through Hadoop's FileContext, which cost ~70 ms per state store commit per
# partition and ~30 ms per offset/commit log write here (measured:
# benchmarks/streaming.py's query, state commits 150 -> 10 ms per operator and
# batch); the FileSystem one renames the same temporary files into place,
# which on a local file system (rename(2)) is just as atomic.
_LOCAL_CHECKPOINT_CONF = {
    "spark.sql.streaming.checkpointFileManagerClass": "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager",
}


def _is_local_path(path):
    """A path on the local file system (no URI scheme, or file:)."""
    scheme = urllib.parse.urlparse(path).scheme
    return scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt")


class QuerySettings:
    """The session settings a query needs, set while it starts. Spark copies
    the session's settings for a query when its first batch runs (and keeps
    them in its offset log), so the user's session gets its own values back
    after that batch (`restore`)."""

    def __init__(self, spark):
        self._spark = spark
        self._saved = None

    def apply(self, run_dir, key_groups):
        conf = dict(_QUERY_CONF)
        if _is_local_path(run_dir):
            conf.update(_LOCAL_CHECKPOINT_CONF)
        for key, value in _RETENTION_DEFAULTS.items():
            if self._spark.conf.get(key, None) is None:
                conf[key] = value
        self._saved = {key: self._spark.conf.get(key, None) for key in conf}
        for key, value in conf.items():
            self._spark.conf.set(key, value if value is not None else str(key_groups))

    def restore(self):
        saved, self._saved = self._saved, None
        for key, value in (saved or {}).items():
            if value is None:
                self._spark.conf.unset(key)
            else:
                self._spark.conf.set(key, value)


def shared_plan(spark, plan, key_groups, token) -> SharedPlan:
    """The run's SharedPlan, broadcast; the caller destroys
    `.broadcast` when the run ends."""
    return SharedPlan(token, spark.sparkContext.broadcast(pickle.dumps((plan.for_operators(), key_groups))))


def operator_refs(plan, shared):
    """(plan operator, its OperatorRef) for each operator of `plan`: the
    operator pickled alone, what they share of the plan named once, in
    `shared`."""
    return [(op, OperatorRef(shared, op.name, pickle.dumps(op))) for op in plan.operators]


def start_query(spark, plan, key_groups, shared, log_settings, scratch_dir, script, run_dir, trigger_interval, sink):
    """Starts the query of `plan`: its source replays `script` (pickled to
    `scratch_dir`, where Spark's source-planning process reads it), its
    operators run the plan's, reading what they share of it from `shared`
    (shared_plan), `sink(batch_df, batch_id)` gets each batch's remaining
    rows on the driver. Returns the StreamingQuery."""
    spark.dataSource.register(BeamStreamSource)
    script_path = os.path.join(scratch_dir, "source_script.pickle")
    resume_offset = None
    if not spark_internals.stream_reader_gets_start():
        resume_offset = spark_internals.last_logged_source_offset(
            checkpoint_files.open_checkpoint_files(spark, run_dir), checkpoint_files.SPARK_DIR, is_planner_offset
        )
    with open(script_path, "wb") as f:
        pickle.dump((script, scratch_dir, resume_offset), f)
    df = (
        spark.readStream.format(SOURCE_FORMAT)
        .option("script_path", script_path)
        .option("partitions", str(key_groups))
        .load()
    )
    fused = {s.fused_operator for s in plan.spark_sources if s.fused_operator}
    readers = {op.name: (ref, (log_settings, op.display_name)) for op, ref in operator_refs(plan, shared)}
    for source in plan.spark_sources:
        reader = readers.get(source.fused_operator) if source.fused_operator else None
        df = df.union(runner_io_glue.streaming_source_frame(spark, source, key_groups, shared, reader))
    for op in plan.operators:
        if op.name in fused:
            continue  # runs in its Spark source's tasks
        ref, logs = readers[op.name]
        inputs = tuple(R.dest_text(d) for d in op.inputs)
        pass_on = tuple(R.dest_text(d) for d in op.pass_on)
        if op.is_keyed:
            processor = KeyGroupProcessor(ref, inputs, pass_on, logs, per_key=op.kind in PER_KEY_STATE_KINDS)
            df = df.groupBy("kg").transformWithState(processor, R.SCHEMA, "Append", "None")
        else:
            if op.rebalance_input:
                df = df.repartition(key_groups, "kg")
            df = df.mapInArrow(functools.partial(stateless_batches, ref, inputs, pass_on, logs), R.SCHEMA)
    return (
        df.writeStream.foreachBatch(sink)
        .option("checkpointLocation", checkpoint_files.join(run_dir, checkpoint_files.SPARK_DIR))
        .queryName("beam-%s" % shared.token[:8])
        .trigger(processingTime=trigger_interval)
        .start()
    )
