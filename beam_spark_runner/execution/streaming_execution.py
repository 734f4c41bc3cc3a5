"""Unbounded pipelines on Spark Structured Streaming: the run of one
StreamingPlan's query, and its restarts. Around it: the query and its
session settings (streaming_query.py), the checkpoint's records
(streaming_checkpoint.py), Spark's commit events (streaming_commits.py);
without Spark: each batch's rows at the driver (streaming/driver_sink.py),
the operators (streaming/operators.py), each batch's plan
(streaming/source_planner.py).
"""

import functools
import logging
import shutil
import tempfile
import threading
import uuid

from beam_spark_runner.execution import metrics_accumulator as spark_metrics
from beam_spark_runner.execution import streaming_commits, ui_metrics
from beam_spark_runner.execution.checkpoint_files import open_checkpoint_files
from beam_spark_runner.execution.stream_interruption import quiet_py4j_callback_log, stops_reported
from beam_spark_runner.execution.streaming_checkpoint import HoldFiles, check_resumable
from beam_spark_runner.execution.streaming_query import QuerySettings, shared_plan, start_query
from beam_spark_runner.execution.query_sinks import SparkSinkWrites
from beam_spark_runner.execution.ui_watermarks import WatermarkTab
from beam_spark_runner.result import RunCancelled
from beam_spark_runner.streaming import plan_fingerprint
from beam_spark_runner.streaming.checkpoint_coordinator import CheckpointCoordinator
from beam_spark_runner.streaming.checkpoint_policies import CheckpointSettings
from beam_spark_runner.streaming.driver_sink import DriverSink
from beam_spark_runner.streaming.script import compile_script
from beam_spark_runner.streaming.source_planner import request_drain

_LOG = logging.getLogger(__name__)

# How often a running pipeline refreshes its metrics in the Spark UI, seconds.
UI_METRICS_INTERVAL_S = 10.0


class StreamingExecution:
    """Builds, runs and stops the streaming query of one StreamingPlan.
    `checkpoint_dir`: where Spark's checkpoint and the runner's records live
    (a run started again with it resumes; default: a temporary directory)."""

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
        # At submission: a TestStream the runner cannot replay is refused.
        self._script = compile_script(plan, self.key_groups)
        self._own_dir = checkpoint_dir is None
        # Any Hadoop file system URI (execution/checkpoint_files.py).
        self.run_dir = checkpoint_dir or tempfile.mkdtemp(prefix="beam-spark-stream-")
        # Local to the driver: what Spark's source-planning process reads (the
        # source script, the latest hold records), rebuilt on every start.
        self.scratch_dir = None
        self._shared_plan = None  # the run's SharedPlan, broadcast while the run lasts
        # At submission: a checkpoint this pipeline cannot resume is refused
        # before any Spark work starts.
        self._files = open_checkpoint_files(spark, self.run_dir)
        check_resumable(self._files, self.run_dir, plan_fingerprint.fingerprint(plan, self.key_groups))
        self._holds = HoldFiles(self._files)
        # Side effects (finalizers, publications) run once a batch is durable.
        checkpointing = checkpointing or CheckpointSettings()
        self._coordinator = CheckpointCoordinator(
            self._files,
            functools.partial(streaming_commits.release, context=streaming_commits.commit_context(spark)),
            streaming_commits.abort,
            release_policy=checkpointing.release_policy(),
        )
        self._failures = checkpointing.failure_policy()
        self._commit_lock = threading.Lock()
        self._commit_error = None
        self._driver_sink = DriverSink(
            self._coordinator,
            self._commit_lock,
            self.key_groups,
            {op.name: op.display_name for op in plan.operators if op.is_keyed},
            lambda batch, record: self._holds.record(self.scratch_dir, batch, record),
            planned_processing_time=not self._script.streams,
            on_progress=WatermarkTab(
                spark.sparkContext, {op.name: op.watermark_percentile for op in plan.operators if op.is_keyed}
            ).show,
        )
        self._sink_writes = SparkSinkWrites(spark, plan, self._files)
        self._settings = QuerySettings(spark)
        self._listener = None
        quiet_py4j_callback_log()
        self.trigger_interval = trigger_interval
        self._token = uuid.uuid4().hex
        self._done = threading.Event()
        self._cancelled = threading.Event()
        self._draining = False
        self._lock = threading.Lock()
        self.ui_metrics_interval_s = UI_METRICS_INTERVAL_S

    def cancel(self):
        self._cancelled.set()
        self._done.set()

    def drain(self):
        """From the next micro-batch on, the sources read nothing more
        (streaming/source_planner.py): every window fires, the run ends."""
        with self._lock:
            self._draining = True
            scratch = self.scratch_dir
        if scratch is not None:
            request_drain(scratch)
        _LOG.info(
            "Draining the streaming pipeline: its sources read nothing more (a Spark data source once a batch read nothing)"
        )

    cancelled = property(lambda self: self._cancelled.is_set())

    last_status = property(lambda self: self._driver_sink.last_status, doc="driver_sink.BatchStatus of the last batch")

    def progress(self):
        """The completed micro-batches' progress records (streaming/progress.py)."""
        return self._driver_sink.progress()

    def metrics_so_far(self):
        return spark_metrics.by_stage(self._driver_sink.metric_infos())

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
            _LOG.info("Streaming pipeline finished: every watermark reached +infinity")
        finally:
            if query.isActive:
                query.stop()
            with self._commit_lock:
                self._coordinator.flush()
            if self._listener is not None:
                self._listener.stop()
            self._cleanup()
        return self.metrics_so_far()

    def _restart(self, failed_query):
        """A new query from the checkpoint after `failed_query` failed; the
        coordinator recovers as on a driver restart."""
        if failed_query.isActive:
            failed_query.stop()
        self._listener.stop()
        self._settings.restore()
        shutil.rmtree(self.scratch_dir, ignore_errors=True)
        with self._commit_lock:
            self._coordinator.recover(streaming_commits.last_spark_commit(self._files))
        return self._start()

    def _cleanup(self):
        self._settings.restore()
        if self._shared_plan is not None:
            try:
                self._shared_plan.broadcast.destroy()
            except Exception as e:  # noqa: BLE001 -- a JVM already gone: the run's own error matters, not this
                _LOG.warning("Could not release the run's shared plan broadcast: %s", e)
            self._shared_plan = None
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
                if self._commit_error is not None:
                    # An earlier batch's side effects failed: none of a later
                    # batch runs before them (the next run releases both, in
                    # order).
                    return
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
        scratch = tempfile.mkdtemp(prefix="beam-spark-stream-local-")
        with self._lock:
            self.scratch_dir = scratch
            if self._draining:  # asked before this (re)start
                request_drain(scratch)
        self._holds.restore_into(scratch)
        self._settings.apply(self.run_dir, self.key_groups)
        self._listener = streaming_commits.CommitListener(self.spark, self._on_commit).start()
        self._driver_sink.started()
        if self._shared_plan is None:  # kept across restarts of the query
            self._shared_plan = shared_plan(self.spark, self.plan, self.key_groups, self._token)
        query = start_query(
            self.spark,
            self.plan,
            self.key_groups,
            self._shared_plan,
            self.log_settings,
            scratch,
            self._script,
            self.run_dir,
            self.trigger_interval,
            self._sink,
        )
        self._listener.query_id = str(query.id)
        _LOG.info(
            "Streaming query started: %d operators, %d key-groups; Spark UI %s",
            len(self.plan.operators),
            self.key_groups,
            self.spark.sparkContext.uiWebUrl,
        )
        return query

    def _sink(self, batch_df, batch_id):
        """Spark's foreachBatch sink: the batch's rows go to the driver sink.
        A batch cut short by the query's stop is reported to Spark as a
        stop (execution/stream_interruption.py)."""
        self._settings.restore()
        with stops_reported(batch_id):
            self._driver_sink.on_batch(batch_id, self._sink_writes.collect(batch_df, batch_id))
