"""The job service (beam_spark_runner/job_service/) under good and bad
input: Beam's PortableRunner as the client, or raw Job API calls where a
client would never send what is tested."""

import json
import os
import threading
import time
import typing

import apache_beam as beam
import grpc
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.portability import common_urns
from apache_beam.portability.api import (
    beam_artifact_api_pb2_grpc,
    beam_job_api_pb2,
    beam_job_api_pb2_grpc,
    beam_runner_api_pb2,
)
from apache_beam.runners.portability import artifact_service
from apache_beam.runners.portability.portable_runner import PortableRunner
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms import environments

from beam_spark_runner.job_service.servicer import SparkJobServicer

JobState = beam_job_api_pb2.JobState


@pytest.fixture(scope="module")
def service(spark_session, tmp_path_factory):
    root = tmp_path_factory.mktemp("job-service")
    servicer = SparkJobServicer(staging_dir=str(root / "staging"), spark_session=spark_session)
    port = servicer.start_grpc_server(0)
    channel = grpc.insecure_channel("localhost:%d" % port)
    yield servicer, "localhost:%d" % port, beam_job_api_pb2_grpc.JobServiceStub(channel), root
    channel.close()
    servicer.stop()


def _options(endpoint, *extra):
    return PipelineOptions(["--job_endpoint=" + endpoint, "--environment_type=LOOPBACK", *extra])


def _python_pipeline_proto():
    p = beam.Pipeline()
    _ = p | "Numbers" >> beam.Create([1, 2, 3]) | "Double" >> beam.Map(lambda x: 2 * x)
    return p.to_runner_api(
        default_environment=environments.ExternalEnvironment(
            "localhost:1", capabilities=environments.python_sdk_capabilities()
        )
    )


def _prepare(stub, pipeline, job_name="job"):
    return stub.Prepare(beam_job_api_pb2.PrepareJobRequest(job_name=job_name, pipeline=pipeline))


def _wait_for(stub, job_id, states, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        state = stub.GetState(beam_job_api_pb2.GetJobStateRequest(job_id=job_id)).state
        if state in states:
            return state
        time.sleep(0.2)
    raise AssertionError("job %s still %s after %d s" % (job_id, JobState.Enum.Name(state), timeout))


def _messages(stub, job_id):
    texts = []
    for response in stub.GetMessageStream(beam_job_api_pb2.JobMessagesRequest(job_id=job_id)):
        if response.HasField("message_response"):
            texts.append(response.message_response.message_text)
    return "\n".join(texts)


def _assert_still_serves(endpoint):
    with beam.Pipeline(runner=PortableRunner(), options=_options(endpoint)) as p:
        assert_that(
            p | beam.Create(["a", "b", "a"]) | beam.combiners.Count.PerElement(), equal_to([("a", 2), ("b", 1)])
        )


# -- unknown jobs, malformed and unsupported pipelines ------------------------------


def test_unknown_job_ids_get_not_found(service):
    _, _, stub, _ = service
    calls = [
        lambda: stub.GetState(beam_job_api_pb2.GetJobStateRequest(job_id="no-such-job")),
        lambda: stub.Cancel(beam_job_api_pb2.CancelJobRequest(job_id="no-such-job")),
        lambda: stub.Run(beam_job_api_pb2.RunJobRequest(preparation_id="no-such-job")),
        lambda: stub.GetPipeline(beam_job_api_pb2.GetJobPipelineRequest(job_id="no-such-job")),
        lambda: stub.GetJobMetrics(beam_job_api_pb2.GetJobMetricsRequest(job_id="no-such-job")),
        lambda: stub.Drain(beam_job_api_pb2.DrainJobRequest(job_id="no-such-job")),
        lambda: list(stub.GetStateStream(beam_job_api_pb2.GetJobStateRequest(job_id="no-such-job"))),
        lambda: list(stub.GetMessageStream(beam_job_api_pb2.JobMessagesRequest(job_id="no-such-job"))),
    ]
    for call in calls:
        with pytest.raises(grpc.RpcError) as error:
            call()
        assert error.value.code() == grpc.StatusCode.NOT_FOUND
        assert "no-such-job" in error.value.details()


def test_malformed_pipelines_are_refused_and_no_job_is_kept(service):
    _, endpoint, stub, _ = service
    before = len(stub.GetJobs(beam_job_api_pb2.GetJobsRequest()).job_info)
    dangling = _python_pipeline_proto()
    transform = next(t for t in dangling.components.transforms.values() if t.inputs)
    transform.inputs[next(iter(transform.inputs))] = "no-such-pcollection"
    for pipeline, expected in ((beam_runner_api_pb2.Pipeline(), "empty"), (dangling, "malformed")):
        with pytest.raises(grpc.RpcError) as error:
            _prepare(stub, pipeline)
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert expected in error.value.details()
    # Bytes that are no PrepareJobRequest at all.
    raw = grpc.insecure_channel(endpoint).unary_unary(
        "/org.apache.beam.model.job_management.v1.JobService/Prepare",
        request_serializer=lambda b: b,
        response_deserializer=lambda b: b,
    )
    with pytest.raises(grpc.RpcError):
        raw(b"\xff\xff\xff not a proto")
    assert len(stub.GetJobs(beam_job_api_pb2.GetJobsRequest()).job_info) == before
    _assert_still_serves(endpoint)


def test_unknown_urns_and_other_sdks_are_refused_in_one_message(service):
    _, _, stub, _ = service
    pipeline = _python_pipeline_proto()
    double = next(
        t
        for t in pipeline.components.transforms.values()
        if t.unique_name.startswith("Double") and t.spec.urn == common_urns.primitives.PAR_DO.urn
    )
    double.spec.urn = "beam:transform:acme:frobnicate:v1"
    go = beam_runner_api_pb2.Environment(
        urn="beam:env:docker:v1",
        capabilities=[environments.SDK_VERSION_CAPABILITY_PREFIX + "apache/beam_go_sdk:2.77.0"],
    )
    pipeline.components.environments["go"].CopyFrom(go)
    numbers = next(t for t in pipeline.components.transforms.values() if t.unique_name == "Numbers/Impulse")
    reshuffle = sorted(
        (
            t
            for t in pipeline.components.transforms.values()
            if t.unique_name.startswith("Numbers/") and t.environment_id and not t.subtransforms
        ),
        key=lambda t: t.unique_name,
    )[0]
    reshuffle.environment_id = "go"
    with pytest.raises(grpc.RpcError) as error:
        _prepare(stub, pipeline, "xlang")
    details = error.value.details()
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "beam:transform:acme:frobnicate:v1" in details and double.unique_name in details
    assert "apache/beam_go_sdk:2.77.0" in details and reshuffle.unique_name in details
    assert numbers.unique_name  # the Impulse has no environment and is not blamed
    assert numbers.unique_name + " (" not in details


def test_bad_options_are_refused_at_prepare(service):
    _, endpoint, _, _ = service
    with pytest.raises(grpc.RpcError) as error:
        with beam.Pipeline(runner=PortableRunner(), options=_options(endpoint, "--publish_every_batches=0")) as p:
            _ = p | beam.Create([1])
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "--publish_every_batches=0" in error.value.details()


# -- staging -----------------------------------------------------------------------


def _offer(endpoint, token, files):
    """Stages `files` ({staged name: local path}) as Beam's PortableRunner does."""
    artifact_service.offer_artifacts(
        beam_artifact_api_pb2_grpc.ArtifactStagingServiceStub(grpc.insecure_channel(endpoint)),
        artifact_service.ArtifactRetrievalService(artifact_service.BeamFilesystemHandler(None).file_reader),
        token,
    )


def _with_dependencies(pipeline, files):
    env_id = next(t.environment_id for t in pipeline.components.transforms.values() if t.environment_id)
    env = pipeline.components.environments[env_id]
    for name, path in files.items():
        env.dependencies.append(
            beam_runner_api_pb2.ArtifactInformation(
                type_urn=common_urns.artifact_types.FILE.urn,
                type_payload=beam_runner_api_pb2.ArtifactFilePayload(path=path).SerializeToString(),
                role_urn=common_urns.artifact_roles.STAGING_TO.urn,
                role_payload=beam_runner_api_pb2.ArtifactStagingToRolePayload(staged_name=name).SerializeToString(),
            )
        )
    return pipeline


def _all_files(root):
    return {os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs}


def test_job_names_cannot_steer_where_staged_files_land(service, tmp_path):
    servicer, endpoint, stub, root = service
    payload = tmp_path / "payload.txt"
    payload.write_text("staged")
    outside = str(tmp_path / "absolute-target")
    before = _all_files(root)
    for job_name in ("../../x", "../" * 12 + "tmp/escaped", outside, "a/b/../../../c"):
        response = _prepare(
            stub, _with_dependencies(_python_pipeline_proto(), {"../../up.txt": str(payload)}), job_name
        )
        assert "/" not in response.staging_session_token
        _offer(endpoint, response.staging_session_token, None)
        staged = _all_files(root) - before
        assert staged and all(path.startswith(servicer.staging_dir + os.sep) for path in staged), staged
        assert not os.path.exists(outside) and not any(f.startswith(outside) for f in _all_files(tmp_path))
        stub.Cancel(beam_job_api_pb2.CancelJobRequest(job_id=response.preparation_id))
        assert _all_files(root) == before  # a job cancelled before it ran leaves nothing staged
    assert not os.path.exists(os.path.join(os.path.dirname(str(root)), "x"))


def test_a_missing_artifact_fails_the_job_naming_it(service, tmp_path):
    _, endpoint, stub, _ = service
    pipeline = _with_dependencies(_python_pipeline_proto(), {"mylib-1.0-py3-none-any.whl": str(tmp_path / "gone.whl")})
    response = _prepare(stub, pipeline, "missing-artifact")
    with pytest.raises(Exception):
        _offer(endpoint, response.staging_session_token, None)  # the client cannot read it either
    stub.Run(beam_job_api_pb2.RunJobRequest(preparation_id=response.preparation_id))
    assert _wait_for(stub, response.preparation_id, {JobState.FAILED, JobState.DONE}) == JobState.FAILED
    assert "mylib-1.0-py3-none-any.whl" in _messages(stub, response.preparation_id)
    _assert_still_serves(endpoint)


def test_the_artifact_service_serves_only_staged_files(service, tmp_path):
    _, endpoint, _, _ = service
    from apache_beam.portability.api import beam_artifact_api_pb2

    retrieval = beam_artifact_api_pb2_grpc.ArtifactRetrievalServiceStub(grpc.insecure_channel(endpoint))
    secret = tmp_path / "secret.txt"
    secret.write_text("do not serve")
    for artifact in (
        beam_runner_api_pb2.ArtifactInformation(
            type_urn=common_urns.artifact_types.FILE.urn,
            type_payload=beam_runner_api_pb2.ArtifactFilePayload(path=str(secret)).SerializeToString(),
        ),
        beam_runner_api_pb2.ArtifactInformation(
            type_urn=common_urns.artifact_types.URL.urn,
            type_payload=beam_runner_api_pb2.ArtifactUrlPayload(url="file://" + str(secret)).SerializeToString(),
        ),
    ):
        with pytest.raises(grpc.RpcError) as error:
            list(retrieval.GetArtifact(beam_artifact_api_pb2.GetArtifactRequest(artifact=artifact)))
        assert error.value.code() == grpc.StatusCode.PERMISSION_DENIED


# -- running jobs ------------------------------------------------------------------


def test_a_failing_pipeline_reports_the_users_error(service):
    _, endpoint, _, _ = service

    def explode(x):
        raise ValueError("user code exploded on %s" % x)

    with pytest.raises(Exception) as error:
        with beam.Pipeline(runner=PortableRunner(), options=_options(endpoint)) as p:
            _ = p | beam.Create([7]) | "Explode" >> beam.Map(explode)
    assert "user code exploded on 7" in str(error.value)


def _slow(x):
    time.sleep(0.5)
    return x


def test_two_jobs_run_at_once_and_cancelling_one_stops_its_spark_jobs(service, spark_session):
    _, endpoint, stub, _ = service
    # 400 tasks of 0.5 s: with the FAIR scheduler (the job server's
    # default) the second job's tasks get the slots as each ends.
    slow = beam.Pipeline(runner=PortableRunner(), options=_options(endpoint, "--job_name=slow", "--parallelism=400"))
    _ = slow | beam.Create(list(range(400))) | beam.Reshuffle() | "Slow" >> beam.Map(_slow)
    slow_result = slow.run()
    tracker = spark_session.sparkContext.statusTracker()
    deadline = time.time() + 120
    while not tracker.getActiveJobsIds() and time.time() < deadline:
        time.sleep(0.2)
    assert tracker.getActiveJobsIds(), "the slow job never started a Spark job"

    quick_done = threading.Event()

    def quick():
        _assert_still_serves(endpoint)
        quick_done.set()

    runner = threading.Thread(target=quick)
    runner.start()
    runner.join(180)
    assert quick_done.is_set(), "a second job did not finish while the first ran"
    assert slow_result.state == "RUNNING"  # still going: the two ran at once
    (running,) = [
        j.job_id for j in stub.GetJobs(beam_job_api_pb2.GetJobsRequest()).job_info if j.state == JobState.RUNNING
    ]
    with pytest.raises(grpc.RpcError) as refused:  # a batch job ends by itself
        stub.Drain(beam_job_api_pb2.DrainJobRequest(job_id=running))
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "batch job" in refused.value.details()

    slow_result.cancel()
    with pytest.raises(RuntimeError, match="CANCELLED"):  # Beam's PortableRunner raises for it
        slow_result.wait_until_finish(60 * 1000)
    deadline = time.time() + 30
    while tracker.getActiveJobsIds() and time.time() < deadline:
        time.sleep(0.2)
    assert not tracker.getActiveJobsIds(), "the cancelled job's Spark jobs kept running"
    states = [j.state for j in stub.GetJobs(beam_job_api_pb2.GetJobsRequest()).job_info]
    assert JobState.CANCELLED in states and JobState.RUNNING not in states


def test_job_api_describes_the_runner_options_and_returns_the_pipeline(service):
    _, endpoint, stub, _ = service
    described = {
        o.name: o for o in stub.DescribePipelineOptions(beam_job_api_pb2.DescribePipelineOptionsRequest()).options
    }
    assert described["spark_conf"].type == beam_job_api_pb2.PipelineOptionType.ARRAY
    assert described["publish_every_batches"].type == beam_job_api_pb2.PipelineOptionType.INTEGER
    assert described["print_plan"].type == beam_job_api_pb2.PipelineOptionType.BOOLEAN
    pipeline = _python_pipeline_proto()
    response = _prepare(stub, pipeline, "described")
    returned = stub.GetPipeline(beam_job_api_pb2.GetJobPipelineRequest(job_id=response.preparation_id)).pipeline
    assert set(returned.components.transforms) == set(pipeline.components.transforms)
    stub.Cancel(beam_job_api_pb2.CancelJobRequest(job_id=response.preparation_id))
    assert (
        stub.GetState(beam_job_api_pb2.GetJobStateRequest(job_id=response.preparation_id)).state == JobState.CANCELLED
    )


def test_a_streaming_job_is_drained_and_ends_drained(service, tmp_path):
    """Drain of a running streaming job: DRAINING at once, then its unbounded
    source stops, every window fires and the job ends DRAINED."""
    from tests import drain_pipelines

    _, endpoint, stub, _ = service
    p = beam.Pipeline(runner=PortableRunner(), options=_options(endpoint, "--streaming", "--job_name=ticks"))
    drain_pipelines.ticks(p, str(tmp_path))
    result = p.run()
    drain_pipelines.wait_for(tmp_path, "tick", 3)
    (job_id,) = [
        j.job_id for j in stub.GetJobs(beam_job_api_pb2.GetJobsRequest()).job_info if j.state == JobState.RUNNING
    ]
    response = stub.Drain(beam_job_api_pb2.DrainJobRequest(job_id=job_id))
    assert response.state == JobState.DRAINING
    # Beam's PortableRunner raises for every end but DONE (as for CANCELLED).
    with pytest.raises(RuntimeError, match="DRAINED"):
        result.wait_until_finish(120 * 1000)
    history = [event.state for event in stub.GetStateStream(beam_job_api_pb2.GetJobStateRequest(job_id=job_id))]
    assert history[-2:] == [JobState.DRAINING, JobState.DRAINED]
    drain_pipelines.assert_ticks_drained(tmp_path)
    with pytest.raises(grpc.RpcError) as refused:
        stub.Drain(beam_job_api_pb2.DrainJobRequest(job_id=job_id))
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_a_portable_client_reads_and_writes_spark_data_sources(service, tmp_path):
    """ReadFromSpark and WriteToSpark expand in the client, without Spark, to
    the runner's primitives; the service reads the source's schema when it
    plans the job, and runs it."""
    from pyspark.sql import SparkSession

    from beam_spark_runner.io import ReadFromSpark, WriteToSpark

    _, endpoint, _, _ = service
    spark = SparkSession.getActiveSession()
    source, out = str(tmp_path / "source"), str(tmp_path / "out")
    spark.createDataFrame([(i, "n%d" % i) for i in range(50)], "id int, name string").write.parquet(source)
    with beam.Pipeline(runner=PortableRunner(), options=_options(endpoint)) as p:
        p | ReadFromSpark(format="parquet", path=source) | WriteToSpark(format="orc", path=out)
    assert sorted(spark.read.orc(out).collect()) == sorted(spark.read.parquet(source).collect())
    # The job ran on a session of its own, which WriteToSpark's DataFrame
    # must not leave as the process's active session.
    assert SparkSession.getActiveSession() is spark


def test_a_portable_client_reads_and_writes_database_tables(service, postgresql_url):
    """ReadFromDatabase (plain Beam) and WriteToDatabase (the runner's write
    primitive) submitted through the Job API."""
    from beam_spark_runner.io import ReadFromDatabase, WriteToDatabase
    from tests.services import drop_table, execute, unique_table

    _, endpoint, _, _ = service
    source, copy = unique_table(), unique_table()
    execute(
        postgresql_url,
        "CREATE TABLE %s (id BIGINT, name TEXT)" % source,
        "INSERT INTO %s SELECT i, 'n' || i FROM generate_series(1, 50) AS i" % source,
    )
    try:
        with beam.Pipeline(runner=PortableRunner(), options=_options(endpoint)) as p:
            (
                p
                | ReadFromDatabase(postgresql_url, table=source)
                | WriteToDatabase(postgresql_url, copy, key_columns=["id"])
            )
        assert execute(postgresql_url, "SELECT * FROM %s ORDER BY id" % copy) == [(i, "n%d" % i) for i in range(1, 51)]
    finally:
        drop_table(postgresql_url, source)
        drop_table(postgresql_url, copy)


def test_a_portable_client_writes_a_kafka_topic_exactly_once(service, request):
    """WriteToKafka (the runner's write primitive) submitted through the Job
    API: every record once, to a read_committed consumer."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from beam_spark_runner.io import WriteToKafka
    from tests import kafka_topics, services

    _, endpoint, _, _ = service
    servers = services.require(request, services.KAFKA)
    topic = services.unique_table("eos_job")
    admin = AdminClient({"bootstrap.servers": servers})
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(30)
    try:
        with beam.Pipeline(runner=PortableRunner(), options=_options(endpoint)) as p:
            (
                p
                | beam.Create(range(300))
                | beam.Map(lambda i: (b"k%d" % (i % 3), b"%d" % i))
                | WriteToKafka({"bootstrap.servers": servers}, topic)
            )
        assert kafka_topics.committed_values(servers, topic) == sorted(b"%d" % i for i in range(300))
    finally:
        admin.delete_topics([topic])[topic].result(30)


class _Sale(typing.NamedTuple):
    shop: str
    amount: int


beam.coders.registry.register_coder(_Sale, beam.coders.RowCoder)


def test_a_portable_client_runs_a_cross_language_sql_transform(service):
    """The client expands SqlTransform in the runner's expansion service
    (--beam_services from `python -m beam_spark_runner.cross_language`),
    stages the Java environment's jars, and the job runs the Java stage in
    Beam's Java SDK harness."""
    from apache_beam.transforms.sql import SqlTransform

    from beam_spark_runner.cross_language.expansion_services import beam_services

    _, endpoint, _, _ = service
    sales = [_Sale("s%d" % (i % 3), i) for i in range(30)]
    expected = {}
    for sale in sales:
        expected[sale.shop] = expected.get(sale.shop, 0) + sale.amount
    options = _options(endpoint, "--beam_services=" + json.dumps(beam_services()))
    with beam.Pipeline(runner=PortableRunner(), options=options) as p:
        totals = (
            p
            | beam.Create(sales).with_output_types(_Sale)
            | SqlTransform("SELECT shop, SUM(amount) AS total FROM PCOLLECTION GROUP BY shop")
            | beam.Map(lambda row: (row.shop, row.total))
        )
        assert_that(totals, equal_to(sorted(expected.items())))
