"""The foreachBatch end of a streaming query's runner sinks: each sink's
rows of a micro-batch staged by the staging its URN registered
(execution/runner_io_glue.py), and the commit each staging returns handed
to the driver sink as a FINALIZE row, which the checkpoint coordinator runs
once the batch is a completed checkpoint (streaming/driver_sink.py)."""

import functools
import pickle
import uuid

import pyarrow as pa

from beam_spark_runner.execution import checkpoint_files, runner_io_glue, spark_internals
from beam_spark_runner.streaming import rows as R
from beam_spark_runner.worker.beam_internals import pickler

RUN_ID_FILE = checkpoint_files.join(checkpoint_files.BEAM_DIR, "spark_writes_run_id")


def run_id(files):
    """The id the checkpoint's Spark writes name their files with: made when
    the checkpoint is first used, the same for every restart of it (a
    replayed batch publishes under its earlier names), another for another
    checkpoint writing the same directory."""
    found = files.read(RUN_ID_FILE)
    if found:
        return found.decode().strip()
    made = uuid.uuid4().hex[:12]
    files.write(RUN_ID_FILE, made.encode())
    return made


class SparkSinkWrites:
    """The foreachBatch end of a query with runner sinks: `collect(batch_df,
    batch_id)` has each sink's rows of the batch staged by its URN's
    staging (execution/runner_io_glue.py) and returns the batch's other
    rows plus one FINALIZE row per sink staged, carrying the `SinkCommit`
    that publishes them. `files`: the checkpoint's files, where the run id
    lives."""

    def __init__(self, spark, plan, files):
        self._spark = spark
        self._sinks = plan.spark_sinks
        self._dests = {}  # dest text -> the sinks reading it (one PCollection may have several)
        for sink in self._sinks:
            self._dests.setdefault(R.dest_text(sink.dest), []).append(sink)
        self._stagings = {}  # URN -> its MicroBatchSinkStaging
        if self._sinks:
            context = runner_io_glue.StagingContext(spark, run_id(files), plan.components, files)
            for urn in sorted({sink.urn for sink in self._sinks}):
                staging = runner_io_glue.micro_batch_staging(urn, context)
                staging.prepare([sink for sink in self._sinks if sink.urn == urn])
                self._stagings[urn] = staging
        # Sinks that all stage rows collected on the driver: their rows come
        # to the driver with the batch's other rows, in one Spark job (see
        # `_collect_on_driver`).
        self._driver_collected = bool(self._stagings) and all(
            isinstance(staging, runner_io_glue.DriverCollectedStaging) for staging in self._stagings.values()
        )

    @functools.cached_property
    def _columns(self):
        """The Column expressions every batch uses, built once: PySpark
        records the caller's stack for each expression it builds (a few
        milliseconds each, on the micro-batch's critical path)."""
        from pyspark.sql import functions as F

        is_data = F.col("kind").isin(*R.DATA_KINDS)
        is_sink_row = is_data & F.col("dest").isin(*self._dests)
        # The sinks' rows come to the driver without their payloads: only
        # which sinks have rows this batch.
        without_sink_payloads = [
            F.col(name) if name != "payload" else F.when(is_sink_row, F.lit(None)).otherwise(F.col(name)).alias(name)
            for name in R.SCHEMA_NAMES
        ]
        of_sink = {dest: is_data & (F.col("dest") == dest) for dest in self._dests}
        return without_sink_payloads, of_sink

    def collect(self, batch_df, batch_id):
        if not self._sinks:
            return batch_df.collect()
        if self._driver_collected:
            return self._collect_on_driver(batch_df, batch_id)
        without_sink_payloads, of_sink = self._columns
        # Materialized once: the sinks' writes and the collect below read it
        # without running the batch's operators again.
        frame = batch_df.localCheckpoint(eager=True)
        collected = frame.select(*without_sink_payloads).collect()
        written = sorted({row.dest for row in collected if row.kind in R.DATA_KINDS and row.dest in self._dests})
        rows = [row for row in collected if not (row.kind in R.DATA_KINDS and row.dest in self._dests)]
        for dest in written:
            selected = frame.filter(of_sink[dest])
            for sink in self._dests[dest]:
                with spark_internals.keeping_active_session(self._spark):
                    commit = self._stagings[sink.urn].stage(selected, sink, batch_id)
                rows.append(_finalize_row(sink, commit))
        return rows

    def _collect_on_driver(self, batch_df, batch_id):
        """The batch in one Spark job: every row comes to the driver as
        Arrow (the sinks' payloads are not pickled), each with the
        partition that made it, and the driver stages the sinks' rows
        itself. A database sink's commit reads them on the driver anyway;
        this spares the batch a materialization and a write job per sink."""
        import pyarrow.compute as pc
        from pyspark.sql import Row
        from pyspark.sql import functions as F

        table = batch_df.select("*", F.spark_partition_id().alias("part")).toArrow()
        is_data = pc.is_in(table.column("kind"), pa.array(R.DATA_KINDS, pa.int32()))
        rows = []
        for dest in sorted(self._dests):
            # Arrow's filter keeps the rows' order: collect order, the
            # partitions' and within each its task's.
            of_sink = table.filter(pc.and_(is_data, pc.equal(table.column("dest"), dest)))
            if of_sink.num_rows:
                for sink in self._dests[dest]:
                    commit = self._stagings[sink.urn].stage_collected(of_sink, sink, batch_id)
                    rows.append(_finalize_row(sink, commit))
        is_sink = pc.and_(is_data, pc.is_in(table.column("dest"), pa.array(sorted(self._dests), pa.string())))
        others = table.filter(pc.invert(pc.fill_null(is_sink, False)))
        rows.extend(Row(**row) for row in others.to_pylist())
        return rows


def _finalize_row(sink, commit):
    """The FINALIZE row handing the driver sink a sink's commit, which the
    checkpoint coordinator runs once the batch is a completed checkpoint."""
    return R.finalize(sink.name, pickle.dumps((sink.display_name, pickler.dumps([commit]))))
