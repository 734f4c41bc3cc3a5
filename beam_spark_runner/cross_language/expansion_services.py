"""The Java expansion services the runner starts for Beam's cross-language
transforms.

Beam's Python transforms that expand in Java (`ReadFromKafka`,
`WriteToKafka`, ...) default to `BeamJarExpansionService(<gradle target>)`,
which downloads Beam's shaded expansion-service jar of the Python SDK's own
release. Under SparkRunner a transform left at that default expands
instead in the runner's expansion service for the same target
(`SERVICES`, a registry by gradle target): Beam's Java expansion service
of `java_sdk.BEAM_JAVA_VERSION` with the target's I/O modules, resolved
from Maven Central into the jar cache (maven_jars.py), started and stopped
by Beam itself (a `JavaJarExpansionService` over a launcher jar whose
manifest names the cached jars). A user's own `expansion_service=`, or a
`--beam_services` entry for the target, is honoured as it is.
"""

import dataclasses
import os
import tempfile
import zipfile
from typing import Dict, Tuple
from urllib.request import pathname2url

from apache_beam.transforms.external import BeamJarExpansionService, ExternalTransform, JavaJarExpansionService

from beam_spark_runner.cross_language.java_sdk import BEAM_JAVA_VERSION
from beam_spark_runner.maven_jars import JarSet, MavenArtifact, cache_root, resolve
from beam_spark_runner.worker.beam_internals import (
    expansion_classpath_of,
    expansion_service_of,
    replace_expansion_service,
)

# Beam's ExpansionService, started so that its environments are plain
# PROCESS ones (java/xlang/beamsparkrunner/xlang/ExpansionServiceMain.java).
EXPANSION_SERVICE_MAIN = "beamsparkrunner.xlang.ExpansionServiceMain"
_BEAM = "org.apache.beam"
_LAUNCHER = "expansion-service-launcher.jar"
_MANIFEST = "META-INF/MANIFEST.MF"


def _beam(artifact, exclusions=()):
    return MavenArtifact(_BEAM, artifact, BEAM_JAVA_VERSION, exclusions)


# The runner's own expansions (java/xlang, built by tools/build_xlang_jar.sh).
RUNNER_XLANG_JAR = os.path.join(os.path.dirname(os.path.dirname(__file__)), "jars", "beam-spark-runner-xlang.jar")


@dataclasses.dataclass(frozen=True)
class JavaExpansionService:
    """What the runner expands a gradle target's transforms with."""

    gradle_target: str
    jars: JarSet
    transforms: str  # what it expands, for messages and docs

    def classpath(self) -> Tuple[str, ...]:
        """Its jars, then the runner's own (main class and expansions)."""
        return resolve(self.jars) + (RUNNER_XLANG_JAR,)

    def launcher_jar(self) -> str:
        """A jar whose manifest starts Beam's expansion service with this
        service's cached jars as its classpath (resolved, and the launcher
        written, on first use; rewritten when its manifest would differ)."""
        manifest = _manifest(self.classpath())
        launcher = os.path.join(cache_root(), self.jars.name, _LAUNCHER)
        try:
            with zipfile.ZipFile(launcher) as jar:
                current = jar.read(_MANIFEST)
        except (OSError, KeyError, zipfile.BadZipFile):
            current = None
        if current != manifest:
            _write_launcher(launcher, manifest)
        return launcher


def _manifest_line(text):
    """A manifest header line wrapped at 72 bytes (the JAR format's limit),
    continuation lines starting with a space."""
    data = text.encode("utf-8")
    lines = [data[:72]]
    data = data[72:]
    while data:
        lines.append(b" " + data[:71])
        data = data[71:]
    return b"\r\n".join(lines) + b"\r\n"


def _manifest(jars):
    class_path = " ".join("file:" + pathname2url(os.path.abspath(j)) for j in jars)
    return (
        _manifest_line("Manifest-Version: 1.0")
        + _manifest_line("Main-Class: " + EXPANSION_SERVICE_MAIN)
        + _manifest_line("Class-Path: " + class_path)
        + b"\r\n"
    )


def _write_launcher(path, manifest):
    fd, temporary = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".launcher-")
    os.close(fd)
    with zipfile.ZipFile(temporary, "w") as jar:
        jar.writestr(zipfile.ZipInfo(_MANIFEST, date_time=(2026, 1, 1, 0, 0, 0)), manifest)
    os.replace(temporary, path)


_KAFKA_CLIENTS = MavenArtifact("org.apache.kafka", "kafka-clients", "3.9.1")


def _target(gradle_target):
    return gradle_target.lstrip(":")


# By gradle target, without Beam's optional leading colon.
SERVICES: Dict[str, JavaExpansionService] = {
    _target(service.gradle_target): service
    for service in (
        JavaExpansionService(
            "sdks:java:io:expansion-service:shadowJar",
            JarSet(
                "beam-java-io-expansion-%s" % BEAM_JAVA_VERSION,
                (
                    _beam("beam-sdks-java-expansion-service"),
                    # Confluent's schema-registry serializers are optional
                    # and not on Maven Central.
                    _beam("beam-sdks-java-io-kafka", (("io.confluent", "*"),)),
                    _KAFKA_CLIENTS,
                ),
            ),
            "Kafka (apache_beam.io.kafka)",
        ),
        JavaExpansionService(
            ":sdks:java:extensions:sql:expansion-service:shadowJar",
            JarSet(
                "beam-java-sql-expansion-%s" % BEAM_JAVA_VERSION,
                (_beam("beam-sdks-java-expansion-service"), _beam("beam-sdks-java-extensions-sql")),
            ),
            "Beam SQL (apache_beam.transforms.sql.SqlTransform)",
        ),
        JavaExpansionService(
            ":sdks:java:extensions:schemaio-expansion-service:shadowJar",
            JarSet(
                "beam-java-schemaio-expansion-%s" % BEAM_JAVA_VERSION,
                (_beam("beam-sdks-java-expansion-service"), _beam("beam-sdks-java-io-jdbc")),
            ),
            "JDBC (apache_beam.io.jdbc; the JDBC driver from the transform's classpath=)",
        ),
    )
}


def compile_classpath():
    """The jars java/xlang compiles against (tools/build_xlang_jar.sh)."""
    jars = []
    for service in SERVICES.values():
        jars.extend(j for j in resolve(service.jars) if j not in jars)
    return tuple(jars)


def runner_expansion_service(transform):
    """The JavaJarExpansionService to expand `transform` with, when it is a
    cross-language transform left at Beam's default expansion service for a
    target in `SERVICES`; None otherwise (nothing to replace)."""
    if not isinstance(transform, ExternalTransform):
        return None
    service = expansion_service_of(transform)
    if not isinstance(service, BeamJarExpansionService):
        return None
    ours = SERVICES.get(_target(service.gradle_target))
    if ours is None or service.is_existing_service() or service.path_to_jar.endswith(_LAUNCHER):
        return None
    if not (service.path_to_jar.startswith("http://") or service.path_to_jar.startswith("https://")):
        return None  # a jar the user chose (--beam_services) or built
    # The transform's own extra jars (JDBC's driver) are Beam's to fetch.
    return JavaJarExpansionService(ours.launcher_jar(), classpath=expansion_classpath_of(service))


def use_runner_expansion_service(transform):
    """Points `transform` at the runner's expansion service when
    `runner_expansion_service` gives one; returns whether it did."""
    replacement = runner_expansion_service(transform)
    if replacement is None:
        return False
    replace_expansion_service(transform, replacement)
    return True


def known_targets() -> Tuple[str, ...]:
    return tuple(sorted(SERVICES))


def beam_services() -> Dict[str, str]:
    """Beam's `--beam_services` for a client that builds its pipeline for
    the job service (`--runner=PortableRunner`): each target the runner
    serves, as Beam spells it, -> the runner's launcher jar for it
    (resolving the jars on first use). Beam then starts the runner's
    expansion services where it would download its own."""
    return {service.gradle_target: service.launcher_jar() for service in SERVICES.values()}
