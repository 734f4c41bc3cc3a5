"""A Java environment's jars, kept where the run can read them.

The expansion of a cross-language transform leaves its environment's jars
in the pipeline's temporary directory, which Beam's `Pipeline.run` deletes
as soon as the runner returns, before a Java stage starts. At submission
the runner copies each of them into a content-addressed cache
(`$BEAM_SPARK_CACHE_DIR/artifacts/<sha256>/<staging name>`, default under
`~/.cache/beam-spark-runner`) and points the environment there: a jar is
copied once per machine, and two pipelines with the same jars name the
same classpath (a JVM is shared by the executor's Python workers only
within one job, whose options it reads when it starts).
"""

import hashlib
import os
import shutil
import tempfile

from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_runner_api_pb2

from beam_spark_runner.maven_jars import cache_base
from beam_spark_runner.plans import EnvironmentKind
from beam_spark_runner.translation.sdk_environments import kind_of

_FILE = common_urns.artifact_types.FILE.urn
_STAGING_TO = common_urns.artifact_roles.STAGING_TO.urn


def artifact_root():
    return os.path.join(cache_base(), "artifacts")


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _kept(path, sha256, name):
    """The cached copy of `path` (copied if not cached yet)."""
    sha256 = sha256 or _sha256(path)
    directory = os.path.join(artifact_root(), sha256)
    target = os.path.join(directory, name)
    if os.path.isfile(target):
        return target
    os.makedirs(directory, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=".copy-")
    os.close(fd)
    shutil.copyfile(path, temporary)
    if _sha256(temporary) != sha256:
        os.unlink(temporary)
        raise ValueError("artifact %s does not match its sha256 %s" % (path, sha256))
    os.replace(temporary, target)
    return target


def keep_java_artifacts(pipeline):
    """A copy of `pipeline` whose Java environments' file artifacts are in
    the artifact cache (the pipeline itself if it has none)."""
    if not any(kind_of(e) is EnvironmentKind.JAVA for e in pipeline.components.environments.values()):
        return pipeline
    kept = beam_runner_api_pb2.Pipeline()
    kept.CopyFrom(pipeline)
    root = artifact_root() + os.sep
    for environment in kept.components.environments.values():
        if kind_of(environment) is not EnvironmentKind.JAVA:
            continue
        for dependency in environment.dependencies:
            if dependency.type_urn != _FILE:
                continue
            payload = beam_runner_api_pb2.ArtifactFilePayload.FromString(dependency.type_payload)
            if not os.path.isfile(payload.path) or payload.path.startswith(root):
                continue  # requirements name a missing file; a cached one stays
            name = os.path.basename(payload.path)
            if dependency.role_urn == _STAGING_TO:
                staged = beam_runner_api_pb2.ArtifactStagingToRolePayload.FromString(dependency.role_payload)
                name = os.path.basename(staged.staged_name) or name
            payload.path = _kept(payload.path, payload.sha256, name)
            dependency.type_payload = payload.SerializeToString()
    return kept
