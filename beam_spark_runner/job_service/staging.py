"""Where the job service keeps the artifacts clients stage, and what it
serves back.

Beam's `artifact_service.ArtifactStagingService` stores a job's artifacts
under `os.path.join(staging_token, name)` through a file writer given by the
job service. Beam's own job service derives the token from the client's
`job_name`, so a name like `../../x` or `/tmp/x` steered the files out of
the staging directory. Here the token is chosen by the service
(`JobStagingArea.new_token`: a cleaned name and a UUID, one path component)
and the writer refuses any path that does not resolve inside the job's
own directory.

Beam's `ArtifactRetrievalService` reads whatever FILE path or URL a request
names. `StagedArtifactRetrieval` serves only files this service staged.
"""

import os
import re
import shutil
import threading
import uuid

import grpc
from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_artifact_api_pb2, beam_artifact_api_pb2_grpc, beam_runner_api_pb2
from apache_beam.utils import proto_utils

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_CHUNK = 2 << 20


class StagingPathError(ValueError):
    """A staged file's path would leave the staging directory."""


def _clean_name(job_name):
    cleaned = _UNSAFE.sub("_", job_name or "").strip("._-")
    return cleaned[:64] or "job"


class JobStagingArea:
    """One directory per job under `root`. Guarantees: every file written
    through `file_writer` is inside `root/<token>/`, whatever names the
    client sent; `discard(token)` removes exactly that directory."""

    def __init__(self, root):
        self.root = os.path.realpath(root)
        os.makedirs(self.root, exist_ok=True)
        self._staged = set()
        self._lock = threading.Lock()

    def new_token(self, job_name):
        """A fresh staging token (also the job id): `<name>-<uuid>`, where
        the name keeps only letters, digits, `_`, `.` and `-`."""
        return "%s-%s" % (_clean_name(job_name), uuid.uuid4().hex)

    def job_dir(self, token):
        path = os.path.realpath(os.path.join(self.root, token))
        if os.path.dirname(path) != self.root:
            raise StagingPathError("staging token %r is not one directory under %s" % (token, self.root))
        return path

    def file_writer(self, name, unused_path=None):
        """The writer Beam's ArtifactStagingService calls with
        `<token>/<artifact name>`: (open file, its path)."""
        token, _, leaf = name.partition("/")
        job_dir = self.job_dir(token)
        path = os.path.realpath(os.path.join(job_dir, leaf))
        if os.path.dirname(path) != job_dir or not leaf:
            raise StagingPathError("artifact %r would be written outside %s" % (name, job_dir))
        os.makedirs(job_dir, exist_ok=True)
        with self._lock:
            self._staged.add(path)
        return open(path, "wb"), path

    def is_staged(self, path):
        with self._lock:
            return os.path.realpath(path) in self._staged

    def not_staged(self, pipeline):
        """Names of the pipeline's artifacts that are not files staged here."""
        return [
            staged_name(artifact)
            for env in pipeline.components.environments.values()
            for artifact in env.dependencies
            if staged_path(artifact) is None or not self.is_staged(staged_path(artifact))
        ]

    def discard(self, token):
        job_dir = self.job_dir(token)
        with self._lock:
            self._staged = {p for p in self._staged if os.path.dirname(p) != job_dir}
        shutil.rmtree(job_dir, ignore_errors=True)


class StagedArtifactRetrieval(beam_artifact_api_pb2_grpc.ArtifactRetrievalServiceServicer):
    """Beam's ArtifactRetrievalService, limited to the files clients staged
    here: a FILE artifact naming any other path, a URL, or another type is
    refused with PERMISSION_DENIED (EMBEDDED data is served: it is in the
    request itself)."""

    def __init__(self, staging_area):
        self._staging = staging_area

    def ResolveArtifacts(self, request, context=None):
        return beam_artifact_api_pb2.ResolveArtifactsResponse(replacements=request.artifacts)

    def GetArtifact(self, request, context=None):
        artifact = request.artifact
        if artifact.type_urn == common_urns.artifact_types.EMBEDDED.urn:
            payload = proto_utils.parse_Bytes(artifact.type_payload, beam_runner_api_pb2.EmbeddedFilePayload)
            yield beam_artifact_api_pb2.GetArtifactResponse(data=payload.data)
            return
        if artifact.type_urn == common_urns.artifact_types.FILE.urn:
            path = proto_utils.parse_Bytes(artifact.type_payload, beam_runner_api_pb2.ArtifactFilePayload).path
            if self._staging.is_staged(path):
                with open(path, "rb") as staged:
                    for chunk in iter(lambda: staged.read(_CHUNK), b""):
                        yield beam_artifact_api_pb2.GetArtifactResponse(data=chunk)
                return
            _refuse(context, "%s is not an artifact staged with this job service" % path)
            return
        _refuse(context, "artifacts of type %s are not served by this job service" % artifact.type_urn)


def dependency_sets(pipeline):
    """{environment id: its dependencies}: what Beam's staging service
    fetches from the client for a job."""
    return {env_id: list(env.dependencies) for env_id, env in pipeline.components.environments.items()}


def set_dependencies(pipeline, resolved):
    """Replaces each environment's dependencies by their staged files."""
    for env_id, dependencies in resolved.items():
        environment = pipeline.components.environments[env_id]
        del environment.dependencies[:]
        environment.dependencies.extend(dependencies)


def staged_path(artifact):
    """The local path of a staged FILE artifact, else None."""
    if artifact.type_urn != common_urns.artifact_types.FILE.urn:
        return None
    return proto_utils.parse_Bytes(artifact.type_payload, beam_runner_api_pb2.ArtifactFilePayload).path


def staged_name(artifact):
    """The name the SDK gave the artifact (`requirements.txt`, a package
    file, `pickled_main_session`, ...), else its type."""
    if artifact.role_urn == common_urns.artifact_roles.STAGING_TO.urn:
        return proto_utils.parse_Bytes(
            artifact.role_payload, beam_runner_api_pb2.ArtifactStagingToRolePayload
        ).staged_name
    return artifact.type_urn


def _refuse(context, message):
    if context is None:
        raise PermissionError(message)
    context.abort(grpc.StatusCode.PERMISSION_DENIED, message)
