"""Which submitted SDK environments the runner accepts (translation/sdk_environments.py)."""

import apache_beam as beam
from apache_beam.portability import python_urns
from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.transforms import environments

from beam_spark_runner.translation import sdk_environments

JAVA_SDK = environments.SDK_VERSION_CAPABILITY_PREFIX + "apache/beam_java17_sdk:2.77.0"
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
    proto = _pipeline(environments.DockerEnvironment("apache/beam_java17_sdk:2.77.0"))
    (env_id,) = _env_ids(proto)
    _set_sdk(proto, env_id, JAVA_SDK)
    (problem,) = sdk_environments.environment_problems(proto)
    assert "apache/beam_java17_sdk:2.77.0" in problem and env_id in problem
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
