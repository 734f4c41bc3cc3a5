"""Unbounded pipelines on Spark Structured Streaming: the Spark glue.

One streaming query per pipeline, a single chain (see streaming/rows.py):

    Beam source (Python DataSourceStreamReader: TestStream, Impulse, CONTROL rows)
      -> per plan operator, in topological order:
           stateless stage:  mapInArrow (after a repartition by key-group when
                             it reads a splittable DoFn's output)
           GroupByKey / stateful DoFn: groupBy(kg).transformWithState (RocksDB state)
      -> foreachBatch sink on the driver: REPORT rows become the holds file the
         source reads to plan the next batch; METRICS rows are merged; the
         STATUS row says when every watermark reached +infinity.

What each operator computes lives in streaming/operators.py (no Spark);
what each batch reads and the times it uses in streaming/source_planner.py.
"""

import functools
import json
import logging
import os
import pickle
import shutil
import tempfile
import threading
import time
import urllib.parse
import uuid

from beam_spark_runner.execution import metrics_accumulator as spark_metrics
from beam_spark_runner.execution import ui_metrics
from beam_spark_runner.result import RunCancelled
from beam_spark_runner.execution.streaming_udfs import (
    SOURCE_FORMAT,
    BeamStreamSource,
    KeyGroupProcessor,
    stateless_batches,
)
from beam_spark_runner.streaming import progress, rows as R
from beam_spark_runner.streaming.script import compile_script
from beam_spark_runner.streaming.source_planner import write_holds
from beam_spark_runner.streaming.watermarks import BatchTimes

_LOG = logging.getLogger(__name__)
# Spark SQL settings a streaming run needs (None: the key-group count).
# RocksDB: transformWithState requires it; checkpoint format v2: Spark warns
# that v1 can lose data when a failed batch is re-run.
_QUERY_CONF = {
    "spark.sql.streaming.stateStore.providerClass": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    "spark.sql.streaming.stateStore.checkpointFormatVersion": "2",
    # Each batch uploads the changed state only, not a RocksDB snapshot.
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    "spark.sql.shuffle.partitions": None,
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


# How often a running pipeline refreshes its metrics in the Spark UI, seconds.
UI_METRICS_INTERVAL_S = 10.0


def _is_local_path(path):
    """A path on the local file system (no URI scheme, or file:)."""
    scheme = urllib.parse.urlparse(path).scheme
    return scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt")


# -- the run ---------------------------------------------------------------------


class StreamingExecution:
    """Builds, runs and stops the streaming query of one StreamingPlan.

    `checkpoint_dir`: where Spark's checkpoint and the hold reports live; a
    run started again with the same directory resumes where it stopped.
    Without one, a temporary directory is used and removed at the end.
    """

    def __init__(
        self, spark, plan, parallelism=0, checkpoint_dir=None, trigger_interval="0 seconds", log_settings=None
    ):
        self.spark = spark
        # Where executors send user code's log records (worker/log_forwarding.py).
        self.log_settings = log_settings
        self.plan = plan
        self.key_groups = parallelism or spark.sparkContext.defaultParallelism
        # Compiled here, at submission: a TestStream the runner cannot
        # replay faithfully is rejected before any Spark work starts.
        self._script = compile_script(plan, self.key_groups)
        self._own_dir = checkpoint_dir is None
        self.run_dir = checkpoint_dir or tempfile.mkdtemp(prefix="beam-spark-stream-")
        self.trigger_interval = trigger_interval
        self._token = uuid.uuid4().hex
        self._done = threading.Event()
        self._cancelled = threading.Event()
        self._query = None
        self._metrics = {}
        self._lock = threading.Lock()
        self.last_status = None
        self._started = self._last_batch_end = None
        self._saved_conf = None
        self.ui_metrics_interval_s = UI_METRICS_INTERVAL_S

    def cancel(self):
        self._cancelled.set()
        self._done.set()

    def metrics_so_far(self):
        with self._lock:
            return spark_metrics.by_stage({k: list(v) for k, v in self._metrics.items()})

    def run(self):
        query = self._start()
        ui = ui_metrics.UiMetricsPublisher(self.spark.sparkContext)
        ui_policy = ui_metrics.PublishPolicy(self.ui_metrics_interval_s)
        try:
            while not self._done.wait(0.2):
                if not query.isActive:
                    break
                if ui_policy.due():
                    ui.publish_safely("Beam metrics: streaming run so far", self.metrics_so_far(), ui_policy)
            exception = query.exception()
            if exception is not None:
                raise exception
            if self._cancelled.is_set():
                raise RunCancelled("the pipeline was cancelled")
            # Always, even if unchanged since the last refresh: the UI says the run ended.
            ui.publish_safely("Beam metrics: streaming run finished", self.metrics_so_far())
        finally:
            if query.isActive:
                query.stop()
            self._restore_session_conf()
            if self._own_dir:
                shutil.rmtree(self.run_dir, ignore_errors=True)
        return self.metrics_so_far()

    def _start(self):
        spark = self.spark
        spark.dataSource.register(BeamStreamSource)
        os.makedirs(self.run_dir, exist_ok=True)
        script_path = os.path.join(self.run_dir, "source_script.pickle")
        with open(script_path, "wb") as f:
            pickle.dump((self._script, self.run_dir), f)
        # The query needs these; Spark copies the session for a query when its
        # first batch runs (and keeps them in its offset log), so the user's
        # session gets its own values back after that batch (see _sink).
        query_conf = dict(_QUERY_CONF)
        if _is_local_path(self.run_dir):
            query_conf.update(_LOCAL_CHECKPOINT_CONF)
        self._saved_conf = {key: spark.conf.get(key, None) for key in query_conf}
        for key, value in query_conf.items():
            spark.conf.set(key, value if value is not None else str(self.key_groups))
        df = (
            spark.readStream.format(SOURCE_FORMAT)
            .option("script_path", script_path)
            .option("partitions", str(self.key_groups))
            .load()
        )
        shared = self.plan.for_operators()
        for op in self.plan.operators:
            pickled = pickle.dumps((op, shared, self.key_groups))
            if op.is_keyed:
                df = df.groupBy("kg").transformWithState(
                    KeyGroupProcessor(
                        self._token, op.name, op.inputs, pickled, op.pass_on, (self.log_settings, op.display_name)
                    ),
                    R.SCHEMA,
                    "Append",
                    "None",
                )
            else:
                if op.rebalance_input:
                    df = df.repartition(self.key_groups, "kg")
                df = df.mapInArrow(
                    functools.partial(
                        stateless_batches,
                        self._token,
                        pickled,
                        op.inputs,
                        op.pass_on,
                        (self.log_settings, op.display_name),
                    ),
                    R.SCHEMA,
                )
        writer = (
            df.writeStream.foreachBatch(self._sink)
            .option("checkpointLocation", os.path.join(self.run_dir, "spark"))
            .queryName("beam-%s" % self._token[:8])
            .trigger(processingTime=self.trigger_interval)
        )
        self._started = time.monotonic()
        self._query = writer.start()
        return self._query

    def _restore_session_conf(self):
        saved, self._saved_conf = self._saved_conf, None
        for key, value in (saved or {}).items():
            if value is None:
                self.spark.conf.unset(key)
            else:
                self.spark.conf.set(key, value)

    def _sink(self, batch_df, batch_id):
        self._restore_session_conf()
        rows = batch_df.collect()
        holds, status = {}, None
        for row in rows:
            if row.kind == R.REPORT:
                op = row.dest[len("report:") :]
                report = json.loads(row.payload)
                holds.setdefault(op, {})[row.kg] = [report["hold"], report["event_hold"]]
            elif row.kind == R.METRICS:
                with self._lock:
                    self._metrics.setdefault(row.dest, []).extend(pickle.loads(row.payload))
            elif row.kind == R.STATUS:
                status = json.loads(row.payload)
            elif row.kind == R.DATA:
                _LOG.warning("Data for %s reached the end of the streaming query; nothing reads it", row.dest)
        if status is None:
            return
        write_holds(self.run_dir, status["batch"], holds)
        now = time.monotonic()
        duration_ms = int((now - (self._last_batch_end or self._started)) * 1000)
        self._last_batch_end = now
        self.last_status = status
        times = BatchTimes.from_json(status["times"])
        with self._lock:
            for label, infos in progress.batch_metrics(times, duration_ms).items():
                self._metrics.setdefault(label, []).extend(i.SerializeToString() for i in infos)
        _LOG.info(
            "Beam streaming (Spark batch %d) %s", batch_id, progress.describe(status["batch"], times, duration_ms)
        )
        if status["done"]:
            self._done.set()
