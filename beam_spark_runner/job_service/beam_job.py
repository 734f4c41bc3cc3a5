"""One job of the job service: a submitted pipeline, its run on Spark,
its states and messages.

States follow Beam's Job API: STOPPED (prepared) -> STARTING -> RUNNING ->
DONE | FAILED | CANCELLED (via CANCELLING). Every state change and every
log record the job's own threads emit (the job thread and the run's thread)
reaches the clients of GetStateStream / GetMessageStream; a failure's
message (the failing transform and the user's traceback) is sent as a
JOB_MESSAGE_ERROR before the FAILED state, which Beam's PortableRunner
raises to its caller.
"""

import concurrent.futures
import itertools
import logging
import queue
import threading
import time
import traceback

from apache_beam.options import pipeline_options
from apache_beam.portability.api import beam_job_api_pb2
from apache_beam.runners.job import utils as job_utils
from apache_beam.runners.portability import abstract_job_service, local_job_service, portable_runner

from beam_spark_runner.errors import UnsupportedPipelineError
from beam_spark_runner.job_service import staging
from beam_spark_runner.result import PipelineExecutionError, RunCancelled
from beam_spark_runner.job_service.pipeline_options import declared_number_types
from beam_spark_runner.translation.planner import is_streaming
from beam_spark_runner.translation.sdk_environments import embed_python_environments

_LOG = logging.getLogger(__name__)

JobState = beam_job_api_pb2.JobState
JobMessage = beam_job_api_pb2.JobMessage

# How long a job waits at Run for the client to finish staging artifacts
# (Beam's PortableRunner stages them before it calls Run).
_STAGING_WAIT_SECONDS = 60

_LEVELS = local_job_service.JobLogHandler.LOG_LEVEL_MAP


def options_from_struct(struct):
    """The job's PipelineOptions from the Job API's Struct
    (`beam:option:<name>:v1` -> value), exactly as the client sent them (as
    Beam's own job service does: re-parsing them as flags loses options
    that only have a `--no_...` flag), except that numbers the client sent
    as strings get the type their option declares."""
    values = {}
    for key, value in job_utils.struct_to_dict(struct).items():
        if key.startswith("beam:option:") and key.endswith(":v1"):
            values[key[len("beam:option:") : -len(":v1")]] = value
    types = declared_number_types()
    for name, value in values.items():
        number = types.get(name)
        if number is not None and isinstance(value, (str, float)):
            try:
                values[name] = number(value)
            except ValueError:
                raise ValueError("pipeline option %s=%r is not a valid %s" % (name, value, number.__name__)) from None
    return pipeline_options.PipelineOptions(**values)


class _JobLogHandler(logging.Handler):
    """Forwards the log records of the job's threads as JobMessages."""

    def __init__(self, log_queues):
        super().__init__()
        self._queues = log_queues
        self._threads = set()
        self._ids = itertools.count(1)
        self.setFormatter(logging.Formatter("%(name)s: %(message)s"))

    def follow(self, thread):
        if thread is not None:
            self._threads.add(thread)

    def message(self, importance, text, created=None):
        self._queues.put(
            JobMessage(
                message_id=str(next(self._ids)),
                time=time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(created or time.time())),
                importance=importance,
                message_text=text,
            )
        )

    def emit(self, record):
        if threading.current_thread() in self._threads:
            try:
                text = self.format(record)
            except Exception:  # noqa: BLE001 -- a bad log call must not break the job
                text = str(record.msg)
            self.message(_LEVELS.get(record.levelno, JobMessage.JOB_MESSAGE_BASIC), text, record.created)


class SparkBeamJob(abstract_job_service.AbstractBeamJob):
    """A prepared pipeline; `run()` starts it on a thread of its own."""

    def __init__(
        self, job_id, job_name, pipeline, options, runner_factory, staging_area, artifact_service, endpoint, shipper
    ):
        super().__init__(job_id, job_name, pipeline, options)
        self._runner_factory = runner_factory
        self._artifact_shipper = shipper
        self._staging = staging_area
        self._artifact_service = artifact_service
        self._endpoint = endpoint
        self._lock = threading.Lock()
        self._state_queues = []
        self._log_queues = local_job_service.JobLogQueues()
        self._log_handler = _JobLogHandler(self._log_queues)
        self._cancel_requested = threading.Event()
        self._drain_requested = threading.Event()
        self._thread = None
        # Prepare checked that the options read (servicer.submission_problems).
        self._streaming = is_streaming(pipeline, options_from_struct(options))
        self.result = None

    # -- AbstractBeamJob ---------------------------------------------------------
    def prepare(self):
        pass

    def artifact_staging_endpoint(self):
        return self._endpoint

    def set_state(self, new_state):
        with self._lock:
            timestamp = super().set_state(new_state)
            if timestamp is not None:
                for state_queue in self._state_queues:
                    state_queue.put((new_state, timestamp))
        return timestamp

    def run(self):
        with self._lock:
            if self._thread is not None:
                raise RuntimeError("job %s was already run" % self._job_id)
            self._thread = threading.Thread(target=self._run_job, name="beam-job-" + self._job_id, daemon=True)
        self.set_state(JobState.STARTING)
        self._thread.start()

    def cancel(self):
        """Stops the run's Spark jobs (batch) or query (streaming); the job
        ends CANCELLED. A job not started yet is cancelled at once."""
        with self._lock:
            if self.is_terminal_state(self.state):
                return self.state
            self._cancel_requested.set()
            result, started = self.result, self._thread is not None
        self.set_state(JobState.CANCELLING)
        if result is not None:
            result.cancel()
        elif not started:
            self._staging.discard(self._job_id)
            self.set_state(JobState.CANCELLED)
        return self.state

    def drain(self):
        """Drains a streaming job (SparkPipelineResult.drain: its sources
        read nothing more, every window fires, it ends DRAINED); returns
        DRAINING. A job still starting drains as soon as it runs. Raises
        ValueError, saying why, for a batch job (it ends by itself) or a
        job that ended."""
        with self._lock:
            state = self.state
            if self.is_terminal_state(state) or state in (JobState.STOPPED, JobState.CANCELLING):
                raise ValueError(
                    "job %s is %s: only a running job can be drained" % (self._job_id, JobState.Enum.Name(state))
                )
            if not self._streaming:
                raise ValueError("job %s is a batch job: it ends by itself; cancel it to stop it now" % self._job_id)
            if state == JobState.DRAINING:
                return state
            self._drain_requested.set()
            result = self.result
        if result is not None:
            result.drain()
        self.set_state(JobState.DRAINING)
        return JobState.DRAINING

    def get_state_stream(self):
        state_queue = queue.Queue()
        with self._lock:
            self._state_queues.append(state_queue)
            history = list(self.with_state_history(iter(())))  # Beam's public view of the history
        for state, timestamp in itertools.chain(history, _queued_items(state_queue)):
            yield state, timestamp
            if self.is_terminal_state(state):
                break

    def get_message_stream(self):
        log_queue = queue.Queue()
        self._log_queues.append(log_queue)
        with self._lock:
            self._state_queues.append(log_queue)
            history = list(self.with_state_history(iter(())))  # Beam's public view of the history
        for message in itertools.chain(self._log_queues.cache(), history, _queued_items(log_queue)):
            yield message
            if isinstance(message, tuple) and self.is_terminal_state(message[0]):
                break

    # -- the run -------------------------------------------------------------------
    def monitoring_infos(self):
        return list(self.result.monitoring_infos()) if self.result is not None else []

    def _run_job(self):
        handler = self._log_handler
        handler.follow(threading.current_thread())
        logging.getLogger().addHandler(handler)
        try:
            pipeline = embed_python_environments(self._resolved_pipeline())
            options = options_from_struct(self._pipeline_options)
            self._ship_artifacts(pipeline, options)
            if self._cancel_requested.is_set():
                self.set_state(JobState.CANCELLED)
                return
            self.set_state(JobState.RUNNING)
            result = self._runner_factory().run_portable_pipeline(pipeline, options)
            handler.follow(result.run_thread)
            with self._lock:
                self.result = result
            if self._cancel_requested.is_set():
                result.cancel()
            elif self._drain_requested.is_set():
                result.drain()
            result.wait_until_finish()
            state = portable_runner.PipelineResult.pipeline_state_to_runner_api_state(result.state)
            _LOG.info("Job %s ended %s", self._job_id, JobState.Enum.Name(state))
            self.set_state(state)
        except BaseException as e:  # noqa: B902 -- any failure ends the job FAILED, with its message
            if self._cancel_requested.is_set() and self.result is not None:
                self.set_state(JobState.CANCELLED)
                return
            expected = isinstance(e, (UnsupportedPipelineError, PipelineExecutionError, RunCancelled))
            # The runner's own refusals and a pipeline's failures say what
            # happened; anything else is the runner's fault, and its message
            # alone (a KeyError's key) would not say where.
            text = str(e) if str(e) and expected else "%s\n%s" % (str(e) or type(e).__name__, traceback.format_exc())
            _LOG.error("Job %s failed: %s", self._job_id, text)
            handler.message(JobMessage.JOB_MESSAGE_ERROR, "%s: %s" % (type(e).__name__, text))
            self.set_state(JobState.FAILED)
        finally:
            logging.getLogger().removeHandler(handler)
            self._staging.discard(self._job_id)

    def _resolved_pipeline(self):
        """The pipeline with its environments' dependencies replaced by the
        files the client staged here; fails naming any artifact that was
        not staged."""
        pipeline = self._pipeline_proto
        if not any(env.dependencies for env in pipeline.components.environments.values()):
            return pipeline
        try:
            resolved = self._artifact_service.resolved_deps(self._job_id, timeout=_STAGING_WAIT_SECONDS)
        except concurrent.futures.TimeoutError:
            raise RuntimeError(
                "the client did not stage the job's artifacts within %d s of Run" % _STAGING_WAIT_SECONDS
            ) from None
        staging.set_dependencies(pipeline, resolved)
        missing = self._staging.not_staged(pipeline)
        if missing:
            raise RuntimeError(
                "artifacts of the pipeline were not staged with the job service: %s" % ", ".join(missing)
            )
        return pipeline

    def _ship_artifacts(self, pipeline, options):
        self._artifact_shipper(self._job_id, pipeline, options)


def _queued_items(q):
    while True:
        yield q.get()
