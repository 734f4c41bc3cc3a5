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

from apache_beam.portability.api import metrics_pb2

from beam_spark_runner.errors import CheckpointMismatchError
from beam_spark_runner.plans import PER_KEY_STATE_KINDS
from beam_spark_runner.execution import checkpoint_files, metrics_accumulator as spark_metrics, streaming_commits
from beam_spark_runner.execution.checkpoint_files import open_checkpoint_files
from beam_spark_runner.execution import ui_metrics
from beam_spark_runner.result import RunCancelled
from beam_spark_runner.execution.streaming_udfs import (
    SOURCE_FORMAT,
    BeamStreamSource,
    KeyGroupProcessor,
    stateless_batches,
)
from beam_spark_runner.streaming import plan_fingerprint, progress, rows as R
from beam_spark_runner.streaming.checkpoint_coordinator import CheckpointCoordinator
from beam_spark_runner.streaming.checkpoint_policies import CheckpointSettings
from beam_spark_runner.streaming.checkpoint_records import SideEffects
from beam_spark_runner.streaming.script import compile_script
from beam_spark_runner.streaming.source_planner import hold_record, request_drain, write_holds
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


_PLAN_FILE = checkpoint_files.join(checkpoint_files.BEAM_DIR, plan_fingerprint.FILE_NAME)
_HOLDS_DIR = checkpoint_files.join(checkpoint_files.BEAM_DIR, "holds")
_OLD_HOLDS_DIR = "holds"  # where runners before the plan record kept them
# Hold reports kept in the checkpoint: the planner needs the last committed
# batch's; a couple more cost nothing and help when reading a checkpoint.
_HOLDS_KEPT = 3


def _recent(names, count):
    """The `count` hold report names ("<batch>.json") of the latest batches."""
    reports = [n for n in names if n.endswith(".json") and n.split(".")[0].isdigit()]
    return sorted(reports, key=lambda n: int(n.split(".")[0]))[-count:]


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
        self,
        spark,
        plan,
        parallelism=0,
        checkpoint_dir=None,
        trigger_interval="0 seconds",
        log_settings=None,
        checkpointing=None,
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
        # The checkpoint URI (any Hadoop file system): Spark's checkpoint and
        # the runner's records (execution/checkpoint_files.py).
        self.run_dir = checkpoint_dir or tempfile.mkdtemp(prefix="beam-spark-stream-")
        # Local to the driver: what Spark's source-planning process reads (the
        # source script, the latest hold reports), rebuilt on every start.
        self.scratch_dir = None
        self._fingerprint = plan_fingerprint.fingerprint(plan, self.key_groups)
        # At submission: a checkpoint this pipeline cannot resume is refused
        # before any Spark work starts.
        self._files = open_checkpoint_files(spark, self.run_dir)
        self._check_plan()
        self._check_spark_logs()
        # Batches become durable checkpoints; their side effects (bundle
        # finalizers) run only then (streaming/checkpoint_coordinator.py).
        checkpointing = checkpointing or CheckpointSettings()
        self._coordinator = CheckpointCoordinator(
            self._files,
            streaming_commits.release,
            streaming_commits.abort,
            release_policy=checkpointing.release_policy(),
        )
        self._failures = checkpointing.failure_policy()
        self._commit_lock = threading.Lock()
        self._commit_error = None
        self._listener = None
        self.trigger_interval = trigger_interval
        self._token = uuid.uuid4().hex
        self._done = threading.Event()
        self._cancelled = threading.Event()
        self._draining = False
        self._query = None
        self._metrics = {}
        self._progress = progress.ProgressLog()
        self._display_names = {op.name: op.display_name for op in plan.operators if op.is_keyed}
        self._lock = threading.Lock()
        self.last_status = None
        self._started = self._last_batch_end = None
        self._saved_conf = None
        self.ui_metrics_interval_s = UI_METRICS_INTERVAL_S

    def cancel(self):
        self._cancelled.set()
        self._done.set()

    def drain(self):
        """From the next micro-batch on, the sources read nothing more and
        their watermarks go to +infinity; splittable DoFns truncate their
        restrictions (streaming/source_planner.py); every window fires and
        the run ends normally once all watermarks are at +infinity."""
        with self._lock:
            self._draining = True
            scratch = self.scratch_dir
        if scratch is not None:
            request_drain(scratch)
        _LOG.info("Draining the streaming pipeline: its sources read nothing more")

    @property
    def cancelled(self):
        """True once `cancel()` was called."""
        return self._cancelled.is_set()

    def progress(self):
        """The completed micro-batches' progress records, oldest first
        (streaming/progress.py; the last 10,000)."""
        return self._progress.batches()

    def metrics_so_far(self):
        with self._lock:
            return spark_metrics.by_stage({k: list(v) for k, v in self._metrics.items()})

    def run(self):
        recovery = self._coordinator.recover(streaming_commits.last_spark_commit(self._files))
        if recovery.finished:
            _LOG.info(
                "The pipeline finished in an earlier run with this checkpoint (batch %d); nothing left to do",
                recovery.latest.epoch,
            )
            self._cleanup()
            return self.metrics_so_far()
        query = self._start()
        ui = ui_metrics.UiMetricsPublisher(self.spark.sparkContext)
        ui_policy = ui_metrics.PublishPolicy(self.ui_metrics_interval_s)
        try:
            while True:
                # The sink sets _done when the pipeline ends; polling the
                # query (a py4j call) only notices a failed one: once a
                # second keeps an idle run's driver quiet.
                while not self._done.wait(1.0):
                    if not query.isActive:
                        break
                    if ui_policy.due():
                        ui.publish_safely("Beam metrics: streaming run so far", self.metrics_so_far(), ui_policy)
                exception = query.exception()
                if exception is None or self._done.is_set() or not self._failures.failed():
                    break
                _LOG.warning(
                    "A micro-batch failed (%d in a row, %d tolerated by --tolerable_failed_batches); "
                    "restarting the query from the last completed checkpoint: %s",
                    self._failures.consecutive_failures,
                    self._failures.tolerable_consecutive,
                    exception,
                )
                query = self._restart(query)
            if exception is not None:
                raise exception
            if self._commit_error is not None:
                raise self._commit_error
            if self._cancelled.is_set():
                raise RunCancelled("the pipeline was cancelled")
            # Always, even if unchanged since the last refresh: the UI says the run ended.
            ui.publish_safely("Beam metrics: streaming run finished", self.metrics_so_far())
        finally:
            if query.isActive:
                query.stop()
            with self._commit_lock:
                self._coordinator.flush()
            if self._listener is not None:
                self.spark.streams.removeListener(self._listener)
            self._cleanup()
        return self.metrics_so_far()

    def _restart(self, failed_query):
        """A new query from the checkpoint after `failed_query` failed: the
        coordinator recovers as on a driver restart (interrupted commits
        finished, pre-commits of batches to be replayed aborted)."""
        if failed_query.isActive:
            failed_query.stop()
        self.spark.streams.removeListener(self._listener)
        self._restore_session_conf()
        shutil.rmtree(self.scratch_dir, ignore_errors=True)
        with self._commit_lock:
            self._coordinator.recover(streaming_commits.last_spark_commit(self._files))
        return self._start()

    def _cleanup(self):
        self._restore_session_conf()
        if self.scratch_dir:
            shutil.rmtree(self.scratch_dir, ignore_errors=True)
        if self._own_dir:
            shutil.rmtree(self.run_dir, ignore_errors=True)

    def _on_commit(self, batch_id):
        """Spark committed `batch_id` (a listener thread): the checkpoint
        completes, side effects are released; the run ends once the batch
        that finished the pipeline is durable."""
        try:
            with self._commit_lock:
                self._coordinator.committed(batch_id)
                latest = self._coordinator.latest
            self._failures.completed()
            if latest is not None and latest.epoch == batch_id and latest.done:
                self._done.set()
        except Exception as e:  # noqa: BLE001 -- surfaced by run()
            _LOG.error("Completing the checkpoint of batch %d failed: %s", batch_id, e)
            self._commit_error = e
            self._done.set()

    def _start(self):
        spark = self.spark
        spark.dataSource.register(BeamStreamSource)
        scratch = tempfile.mkdtemp(prefix="beam-spark-stream-local-")
        with self._lock:
            self.scratch_dir = scratch
            if self._draining:  # asked before this (re)start
                request_drain(scratch)
        self._restore_holds()
        script_path = os.path.join(self.scratch_dir, "source_script.pickle")
        with open(script_path, "wb") as f:
            pickle.dump((self._script, self.scratch_dir), f)
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
                        self._token,
                        op.name,
                        op.inputs,
                        pickled,
                        op.pass_on,
                        (self.log_settings, op.display_name),
                        per_key=op.kind in PER_KEY_STATE_KINDS,
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
            .option("checkpointLocation", checkpoint_files.join(self.run_dir, checkpoint_files.SPARK_DIR))
            .queryName("beam-%s" % self._token[:8])
            .trigger(processingTime=self.trigger_interval)
        )
        self._started = time.monotonic()
        self._listener = streaming_commits.CommitListener(self._on_commit)
        spark.streams.addListener(self._listener)
        self._query = writer.start()
        self._listener.query_id = str(self._query.id)
        return self._query

    def _check_plan(self):
        """Records the plan's fingerprint in a new checkpoint; refuses a
        checkpoint recorded for a plan its state cannot follow."""
        where = self._files.uri(_PLAN_FILE)
        recorded = self._files.read(_PLAN_FILE)
        if recorded is None:
            if self._files.list(checkpoint_files.SPARK_DIR):
                _LOG.warning(
                    "The checkpoint at %s has no plan record (written by an older runner); "
                    "resuming it without checking that its operators match this pipeline's",
                    self.run_dir,
                )
            self._files.write(_PLAN_FILE, self._fingerprint.to_json())
            return
        recorded_print = plan_fingerprint.PlanFingerprint.from_json(recorded, where)
        problems = self._fingerprint.differences(recorded_print)
        if problems:
            raise CheckpointMismatchError(
                "The checkpoint at %s was written by a pipeline whose keyed operators differ from this one's, "
                "so its state cannot be resumed (start with a new --checkpoint_dir, or run the pipeline that "
                "wrote it):\n  %s\n(recorded in %s)" % (self.run_dir, "\n  ".join(problems), where)
            )
        if recorded_print.format_version < plan_fingerprint.FORMAT_VERSION:
            # It matched in what it records: from now on the record is checked
            # in full (coders too).
            self._files.write(_PLAN_FILE, self._fingerprint.to_json())

    def _check_spark_logs(self):
        damaged = streaming_commits.damaged_spark_logs(self._files)
        if damaged:
            raise CheckpointMismatchError(
                "The checkpoint at %s is damaged, so the run cannot resume from it:\n  %s\n"
                "Spark cannot go back to an earlier batch by itself: with checkpoint format v2 the "
                "commit log names the state files of each batch, so deleting a damaged entry makes "
                "the state unreadable. Restore the file from a copy, or start with a new "
                "--checkpoint_dir (docs/reliability.md, 'A damaged checkpoint')." % (self.run_dir, "\n  ".join(damaged))
            )
        moved = streaming_commits.moved_state_schemas(self._files)
        if moved:
            raise CheckpointMismatchError(
                "The checkpoint at %s names state schema files that do not exist:\n  %s\n"
                "Spark records them by absolute path where the checkpoint was first written, so a "
                "checkpoint copied or moved from there cannot be resumed by Spark. Run it from its "
                "original location (docs/reliability.md, 'A moved checkpoint')." % (self.run_dir, "\n  ".join(moved))
            )

    def _restore_holds(self):
        """Copies the latest hold reports from the checkpoint to the scratch
        directory, where the source planner reads them."""
        holds_dir = _HOLDS_DIR if self._files.list(_HOLDS_DIR) else _OLD_HOLDS_DIR
        for name in _recent(self._files.list(holds_dir), _HOLDS_KEPT):
            path = checkpoint_files.join(holds_dir, name)
            try:
                holds = json.loads(self._files.read(path))
            except (TypeError, ValueError) as e:
                raise CheckpointMismatchError(
                    "%s is damaged (%s); delete it to resume from the hold reports before it"
                    % (self._files.uri(path), e)
                ) from e
            write_holds(self.scratch_dir, int(name.split(".")[0]), holds)

    def _record_holds(self, batch, record):
        """The hold record of a batch (`source_planner.hold_record`): for the
        source planner (scratch) and in the checkpoint (a restarted driver
        plans the next batch with it); older records are pruned."""
        write_holds(self.scratch_dir, batch, record)
        self._files.write(checkpoint_files.join(_HOLDS_DIR, "%d.json" % batch), json.dumps(record).encode())
        # Batches are numbered consecutively: dropping the one _HOLDS_KEPT
        # back keeps the newest ones without listing the directory.
        self._files.delete(checkpoint_files.join(_HOLDS_DIR, "%d.json" % (batch - _HOLDS_KEPT)))

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
        holds, status, finalizers, batch_infos = {}, None, [], []
        for row in rows:
            if row.kind == R.REPORT:
                op = row.dest[len("report:") :]
                report = R.parse_report(row.payload)
                holds.setdefault(op, {})[row.kg] = [report.hold, report.event_hold, report.wake]
            elif row.kind == R.FINALIZE:
                finalizers.append(bytes(row.payload))
            elif row.kind == R.METRICS:
                infos = pickle.loads(row.payload)
                batch_infos.extend(infos)
                with self._lock:
                    self._metrics.setdefault(row.dest, []).extend(infos)
            elif row.kind == R.STATUS:
                status = json.loads(row.payload)
            elif row.kind in R.DATA_KINDS:
                _LOG.warning("Data for %s reached the end of the streaming query; nothing reads it", row.dest)
        if status is None:
            return
        # The batch's checkpoint: every keyed operator's key-groups reported
        # (their state for the batch is written), then the side effects are
        # recorded before Spark commits the batch.
        labels = R.key_group_labels(self.key_groups)
        with self._commit_lock:
            pending = self._coordinator.begin(batch_id, {(op, kg) for op in status["steps"] for kg in labels})
            for op, by_kg in holds.items():
                for kg in by_kg:
                    pending.acknowledge((op, kg))
            pending.add_side_effects(SideEffects(tuple(finalizers)))
            self._coordinator.pre_commit(batch_id, bool(status["done"]))
            # Side effects the release policy holds back need further batches.
            driver_wake = 0 if self._coordinator.release_waits(batch_id) else None
        self._record_holds(status["batch"], hold_record(holds, driver_wake))
        now = time.monotonic()
        elapsed = now - (self._last_batch_end or self._started)
        if not self._script.streams:
            # Wall-clock processing time is when the batch was planned: an
            # idle query (source_planner) waited before it, not in it.
            elapsed = min(elapsed, max(0.0, time.time() - status["pt"] / 1e6))
        duration_ms = int(elapsed * 1000)
        self._last_batch_end = now
        self.last_status = status
        times = BatchTimes.from_json(status["times"])
        with self._lock:
            for label, infos in progress.batch_metrics(times, duration_ms).items():
                self._metrics.setdefault(label, []).extend(i.SerializeToString() for i in infos)
        counters = progress.operator_counters(metrics_pb2.MonitoringInfo.FromString(b) for b in batch_infos)
        self._progress.record(progress.batch_progress(times, duration_ms, self._display_names, counters))
        _LOG.info(
            "Beam streaming (Spark batch %d) %s", batch_id, progress.describe(status["batch"], times, duration_ms)
        )
        # The run ends when the batch that finished it is durable (_on_commit).
