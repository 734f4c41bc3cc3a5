"""A Java CombineValues runs as Java wrote it.

Beam's phases keep `beam:transform:combine_grouped_values:v1` (the step of
a CombinePerKey after its GroupByKey, when the combine is not lifted) as one
transform for the SDK harness to run: Beam Python's harness knows it, Beam
Java's does not ("Cannot process composite transform"). For a Java one the
composite's spec is cleared, so Beam's phases run its subtransforms (the
ParDo Java's expansion holds) instead. A pure proto -> proto function,
applied before Beam's phases.
"""

from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_runner_api_pb2

from beam_spark_runner.plans import EnvironmentKind
from beam_spark_runner.translation.sdk_environments import kind_of

_CGV = common_urns.combine_components.COMBINE_GROUPED_VALUES.urn


def expand_java_combine_values(pipeline_proto):
    """A copy of the proto in which every CombineValues whose subtransforms
    run in a Java environment is a plain composite (the input is not
    modified; returned as is when there is none)."""
    components = pipeline_proto.components
    java = [
        tid
        for tid, t in components.transforms.items()
        if t.spec.urn == _CGV and t.subtransforms and _runs_in_java(components, t)
    ]
    if not java:
        return pipeline_proto
    result = beam_runner_api_pb2.Pipeline()
    result.CopyFrom(pipeline_proto)
    for tid in java:
        result.components.transforms[tid].ClearField("spec")
    return result


def _runs_in_java(components, transform):
    ids = [transform.environment_id] + [components.transforms[s].environment_id for s in transform.subtransforms]
    return any(
        env_id in components.environments and kind_of(components.environments[env_id]) is EnvironmentKind.JAVA
        for env_id in ids
        if env_id
    )
