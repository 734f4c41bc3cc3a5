"""Which SDK environments of a submitted pipeline the runner can run, and
their rewrite to the embedded Python SDK.

A pipeline that reaches the job service names how its SDK harness should be
started: LOOPBACK (a worker pool in the client, sent as EXTERNAL), EXTERNAL,
PROCESS, DOCKER, or embedded. The runner starts none of them: every stage
runs in Beam's Python SDK embedded in Spark's own Python workers, which is
what makes LOOPBACK work on a cluster (the executors never call back into
the client). That is only right when the environment is Beam's Python SDK
of the version installed here: its capabilities carry the SDK's base image
(`beam:version:sdk_base:apache/beam_python3.11_sdk:2.77.0`), which names both
the Python minor version (pickled code is not portable across them) and the
Beam version. Any other environment (Java, Go, a cross-language expansion,
another Beam or Python version) is refused at submission, every transform in
it named with its URN.

Pure planning: no Spark, no gRPC.
"""

from apache_beam.portability import python_urns
from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.transforms import environments

_SDK_BASE_PREFIX = environments.SDK_VERSION_CAPABILITY_PREFIX


def this_sdk():
    """The sdk_base capability of the Python SDK installed here."""
    return environments.sdk_base_version_capability()


def sdk_of(environment):
    """The environment's `beam:version:sdk_base:...` image, or None."""
    for capability in environment.capabilities:
        if capability.startswith(_SDK_BASE_PREFIX):
            return capability[len(_SDK_BASE_PREFIX) :]
    return None


def _transforms_by_environment(pipeline):
    found = {}
    for tid, transform in pipeline.components.transforms.items():
        if transform.environment_id and not transform.subtransforms:
            found.setdefault(transform.environment_id, []).append(transform.unique_name or tid)
    return found


def environment_problems(pipeline):
    """Messages naming each environment the runner cannot run and every
    transform (name and URN) that uses it; empty when all can run."""
    problems = []
    components = pipeline.components
    expected = this_sdk()
    for env_id, names in sorted(_transforms_by_environment(pipeline).items()):
        environment = components.environments.get(env_id)
        if environment is None:
            problems.append(
                "transforms %s name environment %r, which the pipeline does not define"
                % (", ".join(sorted(names)), env_id)
            )
            continue
        sdk = sdk_of(environment)
        if sdk is not None and _SDK_BASE_PREFIX + sdk == expected:
            continue
        if sdk is None:
            why = "it declares no Beam SDK version (no %s capability)" % _SDK_BASE_PREFIX
        else:
            why = "its SDK is %s" % sdk
        listed = ", ".join("%s (%s)" % (name, _urn_of(components, name)) for name in sorted(names))
        problems.append(
            "environment %s (%s): %s; this runner runs Beam's Python SDK %s embedded in Spark's "
            "Python workers and nothing else (no other SDK, no cross-language transform, no other "
            "Beam or Python version). Transforms in it: %s"
            % (env_id, environment.urn, why, expected[len(_SDK_BASE_PREFIX) :], listed)
        )
    return problems


def _urn_of(components, unique_name):
    for transform in components.transforms.values():
        if transform.unique_name == unique_name:
            return transform.spec.urn or "composite"
    return "unknown"


def embed_python_environments(pipeline):
    """A copy of `pipeline` whose environments (all of this SDK: check with
    `environment_problems` first) run embedded in Spark's Python workers.
    Their dependencies (the artifacts the client staged) and capabilities
    are kept."""
    rewritten = beam_runner_api_pb2.Pipeline()
    rewritten.CopyFrom(pipeline)
    for environment in rewritten.components.environments.values():
        if environment.urn != python_urns.EMBEDDED_PYTHON:
            environment.urn = python_urns.EMBEDDED_PYTHON
            environment.ClearField("payload")
    return rewritten
