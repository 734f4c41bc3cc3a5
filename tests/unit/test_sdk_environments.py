"""Which submitted SDK environments the runner accepts (translation/sdk_environments.py)."""

import apache_beam as beam
from apache_beam.portability import python_urns
from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.transforms import environments

from beam_spark_runner.translation import sdk_environments

JAVA_SDK = environments.SDK_VERSION_CAPABILITY_PREFIX + "apache/beam_java17_sdk:2.77.0"
GO_SDK = environments.SDK_VERSION_CAPABILITY_PREFIX + "apache/beam_go_sdk:2.77.0"
OLD_PYTHON_SDK = environments.SDK_VERSION_CAPABILITY_PREFIX + "apache/beam_python3.11_sdk:2.60.0"


def _pipeline(environment):
    p = beam.Pipeline()
    _ = p | "Numbers" >> beam.Create([1, 2]) | "Double" >> beam.Map(lambda x: 2 * x)
    return p.to_runner_api(default_environment=environment)


def _set_sdk(proto, env_id, capability):
    env = proto.components.environments[env_id]
    kept = [c for c in env.capabilities if not c.startswith(environments.SDK_VERSION_CAPABILITY_PREFIX)]
    del env.capabilities[:]
    env.capabilities.extend(kept + ([capability] if capability else []))


def _env_ids(proto):
    return sorted({t.environment_id for t in proto.components.transforms.values() if t.environment_id})


def test_this_python_sdk_is_accepted_in_every_environment_kind():
    # As Beam's PortableRunner builds them (from_options): with the SDK's capabilities.
    capabilities = environments.python_sdk_capabilities()
    for environment in (
        environments.EmbeddedPythonEnvironment.default(),
        environments.ExternalEnvironment("localhost:50000", capabilities=capabilities),
        environments.ProcessEnvironment("run.sh", capabilities=capabilities),
        environments.DockerEnvironment(
            environments.DockerEnvironment.default_docker_image(), capabilities=capabilities
        ),
    ):
        proto = _pipeline(environment)
        assert sdk_environments.environment_problems(proto) == [], environment


def test_another_sdk_is_refused_naming_every_transform_and_urn():
    proto = _pipeline(environments.DockerEnvironment("apache/beam_go_sdk:2.77.0"))
    (env_id,) = _env_ids(proto)
    _set_sdk(proto, env_id, GO_SDK)
    (problem,) = sdk_environments.environment_problems(proto)
    assert "apache/beam_go_sdk:2.77.0" in problem and env_id in problem
    leaves = [t for t in proto.components.transforms.values() if t.environment_id == env_id and not t.subtransforms]
    assert leaves
    for transform in leaves:
        assert "%s (%s)" % (transform.unique_name, transform.spec.urn) in problem


def test_another_beam_version_and_a_missing_version_are_refused():
    proto = _pipeline(environments.ExternalEnvironment("localhost:1"))
    (env_id,) = _env_ids(proto)
    _set_sdk(proto, env_id, OLD_PYTHON_SDK)
    assert "2.60.0" in sdk_environments.environment_problems(proto)[0]
    _set_sdk(proto, env_id, None)
    assert "declares no Beam SDK version" in sdk_environments.environment_problems(proto)[0]


def test_embedding_keeps_dependencies_and_leaves_the_submitted_proto_alone():
    proto = _pipeline(environments.ExternalEnvironment("localhost:1"))
    (env_id,) = _env_ids(proto)
    artifact = beam_runner_api_pb2.ArtifactInformation(type_urn="beam:artifact:type:file:v1", type_payload=b"x")
    proto.components.environments[env_id].dependencies.append(artifact)
    embedded = sdk_environments.embed_python_environments(proto)
    assert embedded.components.environments[env_id].urn == python_urns.EMBEDDED_PYTHON
    assert not embedded.components.environments[env_id].payload
    assert list(embedded.components.environments[env_id].dependencies)[-1] == artifact
    assert proto.components.environments[env_id].urn == "beam:env:external:v1"


def _java_environment(jar_paths, urn="beam:env:docker:v1"):
    from apache_beam.portability import common_urns

    env = beam_runner_api_pb2.Environment(urn=urn, capabilities=[JAVA_SDK])
    for path in jar_paths:
        env.dependencies.add(
            type_urn=common_urns.artifact_types.FILE.urn,
            type_payload=beam_runner_api_pb2.ArtifactFilePayload(path=path).SerializeToString(),
        )
    return env


def _with_java_stage(env):
    proto = _pipeline(environments.EmbeddedPythonEnvironment.default())
    proto.components.environments["java"].CopyFrom(env)
    double = [
        t for t in proto.components.transforms.values() if t.unique_name.startswith("Double") and not t.subtransforms
    ][0]
    double.environment_id = "java"
    return proto, double


def test_environments_are_classified_by_the_sdk_they_declare():
    from beam_spark_runner.plans import EnvironmentKind

    assert sdk_environments.kind_of(_java_environment([])) is EnvironmentKind.JAVA
    python = environments.ProcessEnvironment("run.sh", capabilities=environments.python_sdk_capabilities())
    assert sdk_environments.kind_of(python.to_runner_api(None)) is EnvironmentKind.PYTHON
    go = beam_runner_api_pb2.Environment(
        urn="beam:env:docker:v1",
        capabilities=[environments.SDK_VERSION_CAPABILITY_PREFIX + "apache/beam_go_sdk:2.77.0"],
    )
    assert sdk_environments.kind_of(go) is None


def test_a_java_stage_gets_its_jars_as_classpath(tmp_path):
    from beam_spark_runner.plans import EnvironmentKind

    jars = [str(tmp_path / "a.jar"), str(tmp_path / "b.jar")]
    proto, _ = _with_java_stage(_java_environment(jars))
    environment = sdk_environments.stage_environment(proto.components, "java")
    assert environment.kind is EnvironmentKind.JAVA
    assert environment.classpath == tuple(jars)
    assert environment.sdk == "apache/beam_java17_sdk:2.77.0"
    assert sdk_environments.stage_environment(proto.components, "") == sdk_environments.PYTHON_ENVIRONMENT


def test_an_anyof_environment_resolves_to_the_first_alternative_the_runner_runs():
    from apache_beam.portability import common_urns

    go = beam_runner_api_pb2.Environment(
        urn="beam:env:docker:v1", capabilities=[environments.SDK_VERSION_CAPABILITY_PREFIX + "apache/beam_go_sdk:1"]
    )
    java = _java_environment(["/x.jar"], urn="beam:env:process:v1")
    anyof = beam_runner_api_pb2.Environment(
        urn=common_urns.environments.ANYOF.urn,
        payload=beam_runner_api_pb2.AnyOfEnvironmentPayload(environments=[go, java]).SerializeToString(),
    )
    proto, _ = _with_java_stage(anyof)
    resolved = sdk_environments.resolve_anyof_environments(proto)
    assert resolved.components.environments["java"] == java
    assert proto.components.environments["java"].urn == common_urns.environments.ANYOF.urn  # not mutated


def test_java_stages_run_in_batch_and_streaming_and_are_refused_without_their_jars(tmp_path):
    from beam_spark_runner.translation import requirements

    jar = tmp_path / "a.jar"
    jar.write_bytes(b"")
    proto, double = _with_java_stage(_java_environment([str(jar)]))
    assert requirements.check_environments(proto) == []  # jars present: accepted
    requirements.check_pipeline(proto, streaming=True)  # raises UnsupportedPipelineError if refused
    missing, double = _with_java_stage(_java_environment([str(tmp_path / "gone.jar")]))
    (problem,) = requirements.check_environments(missing)
    assert "gone.jar" in problem and double.unique_name in problem


def test_a_go_stage_is_refused_naming_the_environment_and_its_transforms():
    from beam_spark_runner.translation import requirements

    go = beam_runner_api_pb2.Environment(
        urn="beam:env:docker:v1",
        capabilities=[environments.SDK_VERSION_CAPABILITY_PREFIX + "apache/beam_go_sdk:2.77.0"],
    )
    proto, double = _with_java_stage(go)
    (problem,) = requirements.check_environments(proto)
    assert "java" in problem and "apache/beam_go_sdk:2.77.0" in problem and double.unique_name in problem


def test_a_java_environment_passes_the_job_services_environment_check():
    proto = _pipeline(environments.DockerEnvironment("apache/beam_java17_sdk:2.77.0"))
    (env_id,) = _env_ids(proto)
    _set_sdk(proto, env_id, JAVA_SDK)
    assert sdk_environments.environment_problems(proto) == []
    embedded = sdk_environments.embed_python_environments(proto)
    assert embedded.components.environments[env_id] == proto.components.environments[env_id]


class _TimerAfterGroup(beam.DoFn):
    from apache_beam.transforms import userstate as _userstate
    from apache_beam.transforms.timeutil import TimeDomain as _TimeDomain

    TIMER = _userstate.TimerSpec("t", _TimeDomain.WATERMARK)

    def process(self, kv, timer=beam.DoFn.TimerParam(TIMER)):
        timer.set(1)
        yield 3

    @_userstate.on_timer(TIMER)
    def fire(self):
        yield 42


def _runner_stage_environments(java_coders):
    """The environment kind of each planned stage of a pipeline whose every
    SDK transform runs in a Java environment (a GroupByKey, then a DoFn
    with a timer: the runner writes the grouping's output again, in a stage
    of runner transforms only, for the stateful DoFn to read keyed)."""
    from beam_spark_runner.translation import phases
    from beam_spark_runner.translation.planner import pipeline_proto_of
    from beam_spark_runner.translation.stage_plans import StagePlanner

    p = beam.Pipeline()
    _ = p | beam.Create([(1, 37)]) | "Group" >> beam.GroupByKey() | "Timers" >> beam.ParDo(_TimerAfterGroup())
    proto = pipeline_proto_of(p)
    proto.components.environments["java"].CopyFrom(_java_environment([]))
    for transform in proto.components.transforms.values():
        if transform.environment_id:
            transform.environment_id = "java"
    if java_coders:
        # The elements' coders are the Java SDK's own, as a Java pipeline's are.
        for coder in proto.components.coders.values():
            if coder.spec.urn == "beam:coder:varint:v1":
                coder.spec.urn = "beam:coders:javasdk:0.1"
                coder.spec.payload = b"serialized Java coder"
    context, stages = phases.create_stages(proto)
    planner = StagePlanner(context, stages)
    return {stage.name: planner.stage(stage, i).environment.kind for i, stage in enumerate(stages)}


def test_a_runner_stage_holding_another_sdks_coders_runs_in_the_sdk_that_made_them():
    from beam_spark_runner.plans import EnvironmentKind

    kinds = _runner_stage_environments(java_coders=True)
    (runner_stage,) = [name for name in kinds if name.startswith("(Group/Read)")]
    assert kinds[runner_stage] is EnvironmentKind.JAVA
    assert set(kinds.values()) == {EnvironmentKind.JAVA}


def test_a_runner_stage_this_sdk_can_decode_stays_in_python():
    from beam_spark_runner.plans import EnvironmentKind

    kinds = _runner_stage_environments(java_coders=False)
    (runner_stage,) = [name for name in kinds if name.startswith("(Group/Read)")]
    assert kinds[runner_stage] is EnvironmentKind.PYTHON


def _windowed_elements_plan(java):
    """The planned stages of Create -> "Reify" -> "Use", where Reify's
    output elements are windowed values (its coder a windowed-value coder,
    as `Reify.windows` and `Create.windowedValues` make in Beam Java)."""
    from apache_beam.portability import common_urns

    from beam_spark_runner.translation import phases
    from beam_spark_runner.translation.planner import pipeline_proto_of
    from beam_spark_runner.translation.stage_plans import StagePlanner

    p = beam.Pipeline()
    _ = p | beam.Create([1, 2]) | "Reify" >> beam.Map(lambda x: x) | "Use" >> beam.Map(lambda x: x)
    proto = pipeline_proto_of(p)
    reify = next(t for t in proto.components.transforms.values() if t.unique_name == "Reify")
    pcoll = proto.components.pcollections[next(iter(reify.outputs.values()))]
    window_coder = next(
        cid for cid, c in proto.components.coders.items() if c.spec.urn == common_urns.coders.GLOBAL_WINDOW.urn
    )
    proto.components.coders["windowed_element"].CopyFrom(
        beam_runner_api_pb2.Coder(
            spec=beam_runner_api_pb2.FunctionSpec(urn=common_urns.coders.WINDOWED_VALUE.urn),
            component_coder_ids=[pcoll.coder_id, window_coder],
        )
    )
    pcoll.coder_id = "windowed_element"
    if java:
        proto.components.environments["java"].CopyFrom(_java_environment([]))
        for transform in proto.components.transforms.values():
            if transform.environment_id:
                transform.environment_id = "java"
    context, stages = phases.create_stages(proto)
    planner = StagePlanner(context, stages)
    return next(iter(reify.outputs.values())), [planner.stage(stage, i) for i, stage in enumerate(stages)]


def test_a_java_stage_gets_windowed_value_elements_length_prefixed():
    """Beam's Java harness reads a windowed-value PCollection coder as one a
    runner wrapped and measures the elements with the value coder inside
    (a ClassCastException on a WindowedValue element): a Java stage's
    descriptor gives that coder length-prefixed; Python's stays as it is."""
    from apache_beam.portability import common_urns
    from apache_beam.portability.api import beam_fn_api_pb2

    for java in (True, False):
        pcoll_id, stages = _windowed_elements_plan(java)
        (stage,) = [s for s in stages if "Reify" in s.sdk_transforms]
        descriptor = beam_fn_api_pb2.ProcessBundleDescriptor.FromString(stage.descriptor)
        coder = descriptor.coders[descriptor.pcollections[pcoll_id].coder_id]
        if java:
            assert coder.spec.urn == common_urns.coders.LENGTH_PREFIX.urn
            assert list(coder.component_coder_ids) == ["windowed_element"]
        else:
            assert descriptor.pcollections[pcoll_id].coder_id == "windowed_element"
