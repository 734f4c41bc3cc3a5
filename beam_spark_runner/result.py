"""The PipelineResult of a Spark run."""
import threading

from apache_beam.runners import runner
from apache_beam.runners.portability.fn_api_runner.fn_runner import FnApiMetrics

PipelineState = runner.PipelineState


class PipelineExecutionError(RuntimeError):
    """A pipeline failed while running; carries the failing transform's
    name and the user's traceback in its message."""


class SparkPipelineResult(runner.PipelineResult):
    """Result of a batch run: the run is synchronous, so by the time a
    result exists its state is terminal (DONE, FAILED or CANCELLED)."""

    def __init__(self, state, monitoring_infos_by_stage=None, error=None, cancel=None):
        super().__init__(state)
        self._infos = monitoring_infos_by_stage or {}
        self._error = error
        self._cancel = cancel
        self._lock = threading.Lock()

    def wait_until_finish(self, duration=None):
        if self._state == PipelineState.FAILED and self._error is not None:
            raise self._error
        return self._state

    def cancel(self):
        with self._lock:
            if not PipelineState.is_terminal(self._state) and self._cancel:
                self._cancel()
                self._state = PipelineState.CANCELLED
        return self._state

    def metrics(self):
        """User metrics (counters, distributions, gauges, string sets,
        bounded tries) aggregated over all executors."""
        return FnApiMetrics(self._infos, user_metrics_only=True)

    def monitoring_metrics(self):
        """All metrics, including the SDK's system metrics."""
        return FnApiMetrics(self._infos, user_metrics_only=False)

    def monitoring_infos(self):
        for infos in self._infos.values():
            yield from infos
