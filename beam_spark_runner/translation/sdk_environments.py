"""Which SDK environments of a pipeline the runner can run, each stage's
`plans.StageEnvironment`, and the rewrite of submitted Python environments
to the embedded Python SDK.

Two kinds run (a registry by the SDK each environment declares in its
`beam:version:sdk_base:` capability, `SDK_KINDS`): Beam's Python SDK of
the version installed here, embedded in Spark's Python workers, and Beam's
Java SDK (`apache/beam_java<N>_sdk:<version>`: a cross-language
transform's expansion), run by Beam's Java SDK harness in a JVM the
Python workers of an executor share (worker/java_harness.py) with the environment's jar
artifacts as its classpath. A Java environment's artifacts must be files
this machine can read (as the expansion of a cross-language transform in
this process leaves them), in batch and in streaming alike.

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

import os

from apache_beam.portability import common_urns, python_urns
from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.runners import pipeline_context
from apache_beam.transforms import environments

from beam_spark_runner.plans import PYTHON_ENVIRONMENT, EnvironmentKind, StageEnvironment

_SDK_BASE_PREFIX = environments.SDK_VERSION_CAPABILITY_PREFIX
# Environments whose code runs in the executor's own Python process.
EMBEDDED_PYTHON_URNS = frozenset([python_urns.EMBEDDED_PYTHON, python_urns.EMBEDDED_PYTHON_GRPC])
# The SDK an environment declares (the image name of its sdk_base
# capability, up to the version) -> the kind of harness that runs it.
SDK_KINDS = (
    ("apache/beam_python", EnvironmentKind.PYTHON),
    ("apache/beam_java", EnvironmentKind.JAVA),
)
_FILE_ARTIFACT = common_urns.artifact_types.FILE.urn


def this_sdk():
    """The sdk_base capability of the Python SDK installed here."""
    return environments.sdk_base_version_capability()


def sdk_of(environment):
    """The environment's `beam:version:sdk_base:...` image, or None."""
    for capability in environment.capabilities:
        if capability.startswith(_SDK_BASE_PREFIX):
            return capability[len(_SDK_BASE_PREFIX) :]
    return None


def resolve_anyof_environments(pipeline):
    """`pipeline` with each AnyOf environment (a choice of ways to run the
    same SDK, as Beam's Java expansion service offers) replaced by its
    first alternative this runner can run; the pipeline itself if it has
    none."""
    anyof = common_urns.environments.ANYOF.urn
    if not any(e.urn == anyof for e in pipeline.components.environments.values()):
        return pipeline
    resolved = beam_runner_api_pb2.Pipeline()
    resolved.CopyFrom(pipeline)
    for environment in resolved.components.environments.values():
        if environment.urn != anyof:
            continue
        payload = beam_runner_api_pb2.AnyOfEnvironmentPayload.FromString(environment.payload)
        for alternative in payload.environments:
            if kind_of(alternative) is not None:
                # The AnyOf's own dependencies, where it has them, are what
                # a client staged (the job service resolved those).
                staged = list(environment.dependencies)
                environment.CopyFrom(alternative)
                if staged:
                    del environment.dependencies[:]
                    environment.dependencies.extend(staged)
                break
    return resolved


def kind_of(environment):
    """The EnvironmentKind that runs `environment`, or None."""
    if environment.urn in EMBEDDED_PYTHON_URNS:
        return EnvironmentKind.PYTHON
    sdk = sdk_of(environment)
    for prefix, kind in SDK_KINDS:
        if sdk is not None and sdk.startswith(prefix):
            return kind
    return None


def java_classpath(environment):
    """The local paths of a Java environment's jar artifacts, in order."""
    paths = []
    for dependency in environment.dependencies:
        if dependency.type_urn != _FILE_ARTIFACT:
            raise ValueError("artifact of type %s (only local files are read)" % dependency.type_urn)
        paths.append(beam_runner_api_pb2.ArtifactFilePayload.FromString(dependency.type_payload).path)
    return tuple(paths)


def stage_environment(components, environment_id) -> StageEnvironment:
    """The StageEnvironment of the stage running in `environment_id` (the
    Python SDK for a stage of runner primitives only: no environment)."""
    environment = components.environments.get(environment_id) if environment_id else None
    if environment is None or kind_of(environment) is not EnvironmentKind.JAVA:
        return PYTHON_ENVIRONMENT
    return StageEnvironment(EnvironmentKind.JAVA, sdk_of(environment) or "", java_classpath(environment))


def upstream_environment(components, pcoll_ids):
    """The environment of the SDK transform nearest upstream of
    `pcoll_ids`, through runner primitives (GroupByKey, Flatten) that have
    none; None when there is none (an Impulse's output)."""
    producers = {}
    for transform in components.transforms.values():
        if not transform.subtransforms:
            for pcoll in transform.outputs.values():
                producers[pcoll] = transform
    seen, pending = set(), list(pcoll_ids)
    while pending:
        pcoll = pending.pop(0)
        if pcoll in seen or pcoll not in producers:
            continue
        seen.add(pcoll)
        producer = producers[pcoll]
        if producer.environment_id:
            return producer.environment_id
        pending.extend(producer.inputs.values())
    return None


def python_decodes(components, coder_id) -> bool:
    """Whether this Python SDK can build `coder_id` (and its components):
    not when it is another SDK's own coder (`beam:coders:javasdk:0.1`)."""
    try:
        pipeline_context.PipelineContext(components).coders[coder_id]
    except KeyError:  # Beam's registry of coder URNs has no such URN
        return False
    return True


def java_environment_problems(environment, env_id, names, staged_later=False):
    """Why a Java environment cannot run here (empty when it can).
    `staged_later`: its jars reach the job service after this check (they
    are checked when the job runs)."""
    listed = ", ".join(sorted(names))
    if staged_later:
        return []
    try:
        classpath = java_classpath(environment)
    except ValueError as e:
        return ["environment %s (%s) used by %s: %s" % (env_id, sdk_of(environment), listed, e)]
    missing = [path for path in classpath if not os.path.isfile(path)]
    if not classpath or missing:
        return [
            "environment %s (%s) used by %s: its jars must be files on this machine; %s"
            % (
                env_id,
                sdk_of(environment),
                listed,
                "it names none" if not classpath else "missing: %s" % ", ".join(missing[:3]),
            )
        ]
    return []


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
    pipeline = resolve_anyof_environments(pipeline)
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
        if kind_of(environment) is EnvironmentKind.JAVA:
            continue  # Beam's Java SDK harness runs it (requirements.check_environments)
        if sdk is None:
            why = "it declares no Beam SDK version (no %s capability)" % _SDK_BASE_PREFIX
        else:
            why = "its SDK is %s" % sdk
        listed = ", ".join("%s (%s)" % (name, _urn_of(components, name)) for name in sorted(names))
        problems.append(
            "environment %s (%s): %s; this runner runs Beam's Python SDK %s embedded in Spark's "
            "Python workers and Beam's Java SDK in its Java harness, nothing else (no other SDK, no "
            "other Beam or Python version of the Python SDK). Transforms in it: %s"
            % (env_id, environment.urn, why, expected[len(_SDK_BASE_PREFIX) :], listed)
        )
    return problems


def _urn_of(components, unique_name):
    for transform in components.transforms.values():
        if transform.unique_name == unique_name:
            return transform.spec.urn or "composite"
    return "unknown"


def embed_python_environments(pipeline):
    """A copy of `pipeline` whose Python environments (of this SDK: check
    with `environment_problems` first) run embedded in Spark's Python
    workers; AnyOf environments resolved, Java ones kept. Their
    dependencies (the artifacts the client staged) and capabilities are
    kept."""
    rewritten = beam_runner_api_pb2.Pipeline()
    rewritten.CopyFrom(resolve_anyof_environments(pipeline))
    for environment in rewritten.components.environments.values():
        if kind_of(environment) is EnvironmentKind.JAVA:
            continue
        if environment.urn != python_urns.EMBEDDED_PYTHON:
            environment.urn = python_urns.EMBEDDED_PYTHON
            environment.ClearField("payload")
    return rewritten
