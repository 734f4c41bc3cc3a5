"""The PipelineResult of a Spark run.

`SparkRunner.run_pipeline` returns at once with a RUNNING result while the
Spark jobs run on a background thread (like Beam's portable runners);
`wait_until_finish()` blocks, `cancel()` cancels the run's Spark job group,
`drain()` drains a streaming run.
"""

import threading

from apache_beam.runners import runner
from beam_spark_runner.worker.beam_internals import FnApiMetrics

PipelineState = runner.PipelineState


class PipelineExecutionError(RuntimeError):
    """A pipeline failed while running; carries the failing transform's
    name and the user's traceback in its message."""


class RunCancelled(RuntimeError):
    """The run was cancelled through its PipelineResult (not a failure)."""


class NotDrainable(ValueError):
    """`drain()` of a run that cannot be drained (a batch run, or one that
    ended); the message says why."""


class SparkPipelineResult(runner.PipelineResult):
    """Guarantees: `state` is RUNNING (DRAINING once `drain()` was called)
    until the run ends, then exactly one of DONE, FAILED, CANCELLED or
    (after `drain()`) DRAINED, never changing again; `wait_until_finish()`
    raises the run's PipelineExecutionError when it FAILED."""

    def __init__(
        self, execution, cancel_fn=None, drain_fn=None, progress_fn=None, batch_progress_fn=None, drain_refusal=None
    ):
        """`drain_fn`: starts draining the run (None: it cannot be drained,
        as a batch run, which ends by itself); `drain_refusal`: why a
        streaming run cannot be drained (None: it can); `progress_fn`: the streaming
        run's progress records so far (None: a batch run);
        `batch_progress_fn`: the batch run's Spark jobs so far (None: a
        streaming run)."""
        super().__init__(PipelineState.RUNNING)
        self._execution = execution  # callable returning {stage: [MonitoringInfo]}
        self._cancel_fn = cancel_fn
        self._drain_fn = drain_fn
        self._drain_refusal = drain_refusal
        self._progress_fn = progress_fn
        self._batch_progress_fn = batch_progress_fn
        self._metrics_fn = None
        self._infos = {}
        self._error = None
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._thread = None

    # -- driven by the runner ------------------------------------------------
    def start(self, metrics_so_far):
        self._metrics_fn = metrics_so_far
        self._thread = threading.Thread(target=self._run, name="beam-spark-run", daemon=True)
        self._thread.start()
        return self

    def _run(self):
        try:
            infos = self._execution()
            self._finish(PipelineState.DONE, infos)
        except BaseException as e:  # noqa: B902 -- any failure ends the run as FAILED
            self._finish(PipelineState.FAILED, self._metrics_fn(), e)

    def _finish(self, state, infos, error=None):
        with self._lock:
            if self._state == PipelineState.CANCELLED:
                state, error = PipelineState.CANCELLED, None
            elif self._state == PipelineState.DRAINING and state == PipelineState.DONE:
                state = PipelineState.DRAINED
            self._state, self._infos, self._error = state, infos or {}, error
        self._done.set()

    @property
    def run_thread(self):
        """The thread the run executes on (None before `start`)."""
        return self._thread

    # -- Beam's PipelineResult API ----------------------------------------------
    def wait_until_finish(self, duration=None):
        """Waits (at most `duration` milliseconds if given) and returns the
        final state, or None on timeout. Raises the run's error if it FAILED."""
        if not self._done.wait(None if duration is None else duration / 1000.0):
            return None
        if self._state == PipelineState.FAILED and self._error is not None:
            raise self._error
        return self._state

    def cancel(self):
        with self._lock:
            if PipelineState.is_terminal(self._state):
                return self._state
            self._state = PipelineState.CANCELLED
        if self._cancel_fn is not None:
            self._cancel_fn()
        self._done.wait()
        return self._state

    def drain(self):
        """Drains a streaming run, as Beam's Drain: its sources read nothing
        more and their watermarks go to +infinity, splittable DoFns
        truncate their restrictions (an unbounded one's remaining work is
        dropped, `RestrictionProvider.truncate`), every window fires, and
        the run ends DRAINED once everything buffered was processed.
        Processing-time timers no longer hold the watermark back. Returns
        the state (DRAINING); `wait_until_finish()` waits for the end.
        Raises NotDrainable for a batch run or a run that ended."""
        with self._lock:
            if PipelineState.is_terminal(self._state):
                raise NotDrainable("the run is %s: only a running pipeline can be drained" % self._state)
            if self._drain_fn is None:
                raise NotDrainable("a batch run ends by itself and cannot be drained; cancel() stops it now")
            if self._drain_refusal is not None:
                raise NotDrainable(self._drain_refusal)
            if self._state == PipelineState.DRAINING:
                return self._state
            self._state = PipelineState.DRAINING
        self._drain_fn()
        return PipelineState.DRAINING

    def streaming_progress(self):
        """A streaming run's completed micro-batches, oldest first (the last
        10,000), as `streaming.progress.BatchProgress` records: each keyed
        operator's input and output watermark, rows in and out and input
        dropped as late, the batch's processing time and duration. Readable
        while the run goes on; empty for a batch run."""
        return self._progress_fn() if self._progress_fn is not None else ()

    def batch_progress(self):
        """A batch run's Spark jobs and stages so far, as a
        `batch_progress.BatchRunProgress`: per job its status, per stage its
        name (the Beam transforms it runs) and its tasks (total, completed,
        running, failed). Readable while the run goes on and after it
        ended (as long as Spark retains the jobs, spark.ui.retainedJobs);
        empty for a streaming run (see `streaming_progress()`)."""
        from beam_spark_runner.batch_progress import BatchRunProgress

        return self._batch_progress_fn() if self._batch_progress_fn is not None else BatchRunProgress()

    def metrics(self):
        """User metrics (counters, distributions, gauges, string sets,
        bounded tries) aggregated over all executors. Before the run ends,
        the values of the tasks finished so far."""
        return FnApiMetrics(self._current_infos(), user_metrics_only=True)

    def monitoring_metrics(self):
        """All metrics, including the SDK's system metrics."""
        return FnApiMetrics(self._current_infos(), user_metrics_only=False)

    def monitoring_infos(self):
        for infos in self._current_infos().values():
            yield from infos

    def _current_infos(self):
        if self._done.is_set() or self._metrics_fn is None:
            return self._infos
        return self._metrics_fn()
