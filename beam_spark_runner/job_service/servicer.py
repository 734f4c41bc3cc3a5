"""The Beam Job API over gRPC, running jobs with SparkRunner.

`SparkJobServicer` is Beam's `AbstractJobServiceServicer` (the Job API's
bookkeeping) with what a shared, long-lived service needs on top:

* submission checks at Prepare: a pipeline proto that does not hold
  together, an SDK environment other than this Beam Python SDK, an unknown
  URN or an option the runner cannot honour is refused with
  INVALID_ARGUMENT, every problem named in one message, and no job is kept;
* unknown job ids get NOT_FOUND (Beam's raise a KeyError, which gRPC reports
  as UNKNOWN);
* the staging token is the service's own (`staging.JobStagingArea`), the
  retrieval service serves only staged files, and the server binds to the
  given host only (default `localhost`);
* several jobs run at once on one SparkContext, each on its own
  SparkSession (`SparkSession.newSession`: its own SQL settings), and Cancel
  stops the job's Spark jobs or streaming query.
"""

import logging
import tempfile
import threading

import grpc
from apache_beam.metrics import monitoring_infos
from apache_beam.portability.api import beam_artifact_api_pb2_grpc, beam_job_api_pb2, beam_job_api_pb2_grpc
from apache_beam.portability.api import endpoints_pb2
from apache_beam.runners.pipeline_utils import validate_pipeline_graph
from apache_beam.runners.portability import abstract_job_service, artifact_service

from beam_spark_runner.errors import UnsupportedPipelineError
from beam_spark_runner.job_service import staging
from beam_spark_runner.execution.spark_internals import active_session_or_none
from beam_spark_runner.job_service.artifact_shipping import artifact_shipper
from beam_spark_runner.job_service.beam_job import SparkBeamJob, options_from_struct
from beam_spark_runner.job_service.pipeline_options import describe_runner_options
from beam_spark_runner.runner import SparkRunner
from beam_spark_runner.worker import grpc_servers

_LOG = logging.getLogger(__name__)


class JobServiceRunner(SparkRunner):
    """SparkRunner as the job service runs it: the client already turned
    the environment and staging options into the pipeline's environments
    and artifacts, which the service checks and ships itself."""

    client_staged = True


class SparkJobServicer(abstract_job_service.AbstractJobServiceServicer):
    """Guarantees: a job exists only once Prepare accepted it; each job runs
    at most once; files clients stage stay under `staging_dir`."""

    def __init__(self, spark_session, staging_dir=None, host="localhost", restart_session=None):
        """`spark_session`: the session jobs run on (each on a newSession of
        it); `staging_dir`: where staged artifacts go (default: a temporary
        directory); `host`: the address to listen on; `restart_session`:
        makes the session anew when the driver JVM died (an OutOfMemoryError
        in one job), so that the next job runs (None: it fails)."""
        super().__init__()
        self._owns_staging_dir = staging_dir is None
        self._staging = staging.JobStagingArea(staging_dir or tempfile.mkdtemp(prefix="beam-spark-staging-"))
        self._artifact_service = artifact_service.ArtifactStagingService(self._staging.file_writer)
        self._spark_session = spark_session
        self._restart_session = restart_session
        self._session_lock = threading.Lock()
        self._host = host
        self._endpoint = None
        self._server = None

    # -- server ------------------------------------------------------------------
    def start_grpc_server(self, port=0):
        """Starts serving on `host:port` (0: any free port); returns the port."""
        self._server, port = grpc_servers.listening_server(self._host, port)
        beam_job_api_pb2_grpc.add_JobServiceServicer_to_server(self, self._server)
        beam_artifact_api_pb2_grpc.add_ArtifactStagingServiceServicer_to_server(self._artifact_service, self._server)
        beam_artifact_api_pb2_grpc.add_ArtifactRetrievalServiceServicer_to_server(
            staging.StagedArtifactRetrieval(self._staging), self._server
        )
        self._endpoint = endpoints_pb2.ApiServiceDescriptor(url="%s:%d" % (self._host, port))
        self._server.start()
        _LOG.info("Beam job service for Spark listening on %s:%d", self._host, port)
        return port

    def stop(self, grace=1):
        """Cancels the jobs still running, then stops serving."""
        for job in list(self._jobs.values()):
            if not job.is_terminal_state(job.state) and job.state != beam_job_api_pb2.JobState.STOPPED:
                job.cancel()
        if self._server is not None:
            self._server.stop(grace)

    @property
    def staging_dir(self):
        return self._staging.root

    # -- jobs --------------------------------------------------------------------
    def create_beam_job(self, preparation_id, job_name, pipeline, options):
        self._artifact_service.register_job(preparation_id, staging.dependency_sets(pipeline))
        return SparkBeamJob(
            preparation_id,
            job_name,
            pipeline,
            options,
            self._new_runner,
            self._staging,
            self._artifact_service,
            self._endpoint,
            self._ship,
        )

    def _live_session(self):
        """The server's session; a new one first if its driver JVM died."""
        with self._session_lock:
            if self._restart_session is not None and active_session_or_none()[1]:
                _LOG.warning("Spark's driver JVM is gone (it ended, e.g. on an OutOfMemoryError): starting Spark again")
                self._spark_session = self._restart_session()
            return self._spark_session

    def _ship(self, job_id, pipeline, options):
        """Installs a job's staged packages and ships them to the executors."""
        artifact_shipper(self._live_session().sparkContext, self._staging)(job_id, pipeline, options)

    def _new_runner(self):
        return JobServiceRunner(spark_session=self._live_session().newSession())

    def _job(self, job_id, context):
        job = self._jobs.get(job_id)
        if job is None:
            _abort(context, grpc.StatusCode.NOT_FOUND, "no job %r on this job service" % job_id)
        return job

    # -- the Job API -------------------------------------------------------------
    def Prepare(self, request, context=None, timeout=None):
        problems = submission_problems(request.pipeline, request.pipeline_options)
        if problems:
            _abort(
                context,
                grpc.StatusCode.INVALID_ARGUMENT,
                "The Spark runner cannot run job %r:\n  - %s" % (request.job_name, "\n  - ".join(problems)),
            )
        preparation_id = self._staging.new_token(request.job_name)
        self._jobs[preparation_id] = self.create_beam_job(
            preparation_id, request.job_name, request.pipeline, request.pipeline_options
        )
        _LOG.info("Prepared job %r as %s", request.job_name, preparation_id)
        return beam_job_api_pb2.PrepareJobResponse(
            preparation_id=preparation_id,
            artifact_staging_endpoint=self._endpoint,
            staging_session_token=preparation_id,
        )

    def Run(self, request, context=None, timeout=None):
        job = self._job(request.preparation_id, context)
        try:
            job.run()
        except RuntimeError as e:
            _abort(context, grpc.StatusCode.FAILED_PRECONDITION, str(e))
        return beam_job_api_pb2.RunJobResponse(job_id=request.preparation_id)

    def GetState(self, request, context=None):
        return abstract_job_service.make_state_event(*self._job(request.job_id, context).get_state())

    def GetPipeline(self, request, context=None, timeout=None):
        return beam_job_api_pb2.GetJobPipelineResponse(pipeline=self._job(request.job_id, context).get_pipeline())

    def Cancel(self, request, context=None, timeout=None):
        job = self._job(request.job_id, context)
        return beam_job_api_pb2.CancelJobResponse(state=job.cancel())

    def Drain(self, request, context=None, timeout=None):
        job = self._job(request.job_id, context)
        try:
            state = job.drain()
        except ValueError as e:
            _abort(context, grpc.StatusCode.FAILED_PRECONDITION, str(e))
        return beam_job_api_pb2.DrainJobResponse(state=state)

    def GetStateStream(self, request, context=None, timeout=None):
        job = self._job(request.job_id, context)
        for state, timestamp in job.get_state_stream():
            yield abstract_job_service.make_state_event(state, timestamp)

    def GetMessageStream(self, request, context=None, timeout=None):
        job = self._job(request.job_id, context)
        for message in job.get_message_stream():
            if isinstance(message, tuple):
                yield beam_job_api_pb2.JobMessagesResponse(
                    state_response=abstract_job_service.make_state_event(*message)
                )
            else:
                yield beam_job_api_pb2.JobMessagesResponse(message_response=message)

    def GetJobMetrics(self, request, context=None, timeout=None):
        """The job's user metrics, as attempted and committed (a Spark run
        reports each task's metrics once, from its successful attempt)."""
        job = self._job(request.job_id, context)
        infos = [info for info in job.monitoring_infos() if monitoring_infos.is_user_monitoring_info(info)]
        return beam_job_api_pb2.GetJobMetricsResponse(
            metrics=beam_job_api_pb2.MetricResults(attempted=infos, committed=infos)
        )

    def DescribePipelineOptions(self, request, context=None, timeout=None):
        return beam_job_api_pb2.DescribePipelineOptionsResponse(options=describe_runner_options())


def submission_problems(pipeline, options_struct):
    """Every reason the runner would refuse this job, as messages."""
    from beam_spark_runner.translation import requirements, sdk_environments
    from beam_spark_runner.translation.planner import is_streaming
    from beam_spark_runner.translation.proto_references import dangling_references

    if not pipeline.root_transform_ids or not pipeline.components.transforms:
        return ["the pipeline proto is empty (no root transforms)"]
    dangling = dangling_references(pipeline)
    if dangling:
        return ["the pipeline proto is malformed: %s" % problem for problem in dangling]
    try:
        validate_pipeline_graph(pipeline)
    except Exception as e:  # noqa: BLE001 -- Beam raises plain errors for a broken graph
        return ["the pipeline proto is malformed: %s: %s" % (type(e).__name__, e)]
    problems = sdk_environments.environment_problems(pipeline)
    try:
        options = options_from_struct(options_struct)
    except (SystemExit, ValueError, TypeError) as e:
        return problems + ["the pipeline options cannot be read: %s" % e]
    streaming = is_streaming(pipeline, options)
    problems += JobServiceRunner().option_checks(options, streaming)[0]
    try:
        requirements.check_pipeline(sdk_environments.embed_python_environments(pipeline), streaming, staged_later=True)
    except UnsupportedPipelineError as e:
        problems += [line.strip()[2:] for line in str(e).splitlines()[1:] if line.strip().startswith("- ")]
    except Exception as e:  # noqa: BLE001 -- a proto our checks cannot read is the client's error
        problems.append("the pipeline cannot be checked: %s: %s" % (type(e).__name__, e))
    return problems


def _abort(context, code, message):
    if context is None:  # called in-process, not over gRPC
        raise LookupError(message) if code == grpc.StatusCode.NOT_FOUND else ValueError(message)
    context.abort(code, message)
