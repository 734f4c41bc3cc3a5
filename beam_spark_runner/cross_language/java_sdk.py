"""Beam's Java SDK jars: which release, which artifacts, and the harness
classpath of each Java stage.

`BEAM_JAVA_VERSION` is the Beam Java release the runner's own expansion
services use (docs/cross_language.md says why this one). A Java stage runs
Beam's Java SDK harness of the release its environment declares
(`apache/beam_java17_sdk:<version>`): the expansion that made the stage
and the harness that runs it must be the same release, as in Beam's own
containers.
"""

import dataclasses
import json

from beam_spark_runner import plans
from beam_spark_runner.maven_jars import JarSet, MavenArtifact, resolve

# The newest Beam Java release whose harness, Kafka, JDBC and SQL modules
# Maven Central serves together.
BEAM_JAVA_VERSION = "2.71.0"
FN_HARNESS_ARTIFACT = "beam-sdks-java-harness"
_BEAM = "org.apache.beam"


def java_version_of(sdk):
    """'apache/beam_java17_sdk:2.71.0' -> '2.71.0'."""
    version = sdk.rpartition(":")[2]
    if not version or not version[0].isdigit():
        raise ValueError("Java environment declares SDK %r, which names no Beam version" % sdk)
    return version.replace(".dev", "").split("-")[0]


# Beam publishes the harness shaded, with what it needs at run time declared
# `provided`: those are listed here (as the harness's POM of this release
# names them), with slf4j's binding to java.util.logging, whose records the
# harness sends to the runner over the Fn API's logging stream.
_HARNESS_RUNTIME = (
    ("org.apache.beam", "beam-vendor-grpc-1_69_0", "0.1"),
    ("org.apache.beam", "beam-vendor-guava-32_1_2-jre", "0.1"),
    ("com.github.jbellis", "jamm", "0.4.0"),
    ("org.apache.avro", "avro", "1.11.4"),
    ("com.fasterxml.jackson.core", "jackson-databind", "2.15.4"),
    ("joda-time", "joda-time", "2.14.0"),
    ("org.slf4j", "slf4j-api", "2.0.16"),
    ("org.slf4j", "slf4j-jdk14", "2.0.16"),
)


def harness_jars(version) -> JarSet:
    """Beam's Java SDK harness of `version` and what it runs with."""
    beam = tuple(
        MavenArtifact(_BEAM, artifact, version)
        for artifact in (FN_HARNESS_ARTIFACT, "beam-sdks-java-core", "beam-model-pipeline")
    )
    return JarSet(
        "beam-java-harness-%s" % version, beam + tuple(MavenArtifact(g, a, v) for g, a, v in _HARNESS_RUNTIME)
    )


def _stages_of(plan):
    if isinstance(plan, plans.ExecutionPlan):
        return [stage for stage in plan.stages]
    return [op.stage for op in plan.operators if op.stage is not None]


def has_java_stages(plan):
    """Whether a stage of `plan` (batch or streaming) runs in Java."""
    return any(stage.environment.is_java for stage in _stages_of(plan))


def harness_pipeline_options(options) -> str:
    """The job's pipeline options as Beam's Java harness reads them from
    its PIPELINE_OPTIONS variable: JSON of `beam:option:<name>:v1` keys, as
    Beam's boot programs pass them. Only options set explicitly (or sent by
    a job service client, whatever its SDK): the harness applies its own
    defaults. A Java DoFn's `PipelineOptions` are then the job's."""
    values = options.get_all_options(drop_default=True, retain_unknown_options=True)
    return json.dumps(
        {"beam:option:%s:v1" % name: value for name, value in values.items() if value is not None},
        sort_keys=True,
        default=str,
    )


def with_java_harness(plan, jvm_options=(), pipeline_options=""):
    """`plan` (an ExecutionPlan or a StreamingPlan) with each Java stage's
    classpath completed by Beam's Java SDK harness of its release (resolved
    through the jar cache: may download once; raises maven_jars.MissingJars
    naming what is missing), and its harness JVM given `jvm_options` and
    the job's `pipeline_options` (`harness_pipeline_options`)."""

    def completed(stage):
        environment = stage.environment
        if not environment.is_java:
            return stage
        harness = resolve(harness_jars(java_version_of(environment.sdk)))
        extra = tuple(p for p in harness if p not in environment.classpath)
        return dataclasses.replace(
            stage,
            environment=dataclasses.replace(
                environment,
                classpath=environment.classpath + extra,
                jvm_options=tuple(jvm_options),
                pipeline_options=pipeline_options,
            ),
        )

    if isinstance(plan, plans.ExecutionPlan):
        return dataclasses.replace(plan, stages=tuple(completed(stage) for stage in plan.stages))
    operators = tuple(
        op if op.stage is None else dataclasses.replace(op, stage=completed(op.stage)) for op in plan.operators
    )
    return dataclasses.replace(plan, operators=operators)
