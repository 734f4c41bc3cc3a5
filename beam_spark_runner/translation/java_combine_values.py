"""A Java CombineValues runs as Java wrote it.

Beam's `lift_combiners` phase leaves a CombinePerKey it does not lift (in
streaming, one under a trigger lifting does not allow) as its GroupByKey
and its `beam:transform:combine_grouped_values:v1` step, the latter as one
transform for the SDK harness to run: Beam Python's harness knows it, Beam
Java's does not ("Cannot process composite transform"). This phase, run
right after `lift_combiners`, replaces a stage holding a Java one by
stages of its leaf subtransforms (the ParDo Java's expansion holds).
A `(stages, context) -> stages` phase.
"""

from apache_beam.portability import common_urns
from beam_spark_runner.translation.beam_translations import translations

from beam_spark_runner.plans import EnvironmentKind
from beam_spark_runner.translation.sdk_environments import kind_of

_CGV = common_urns.combine_components.COMBINE_GROUPED_VALUES.urn


def expand_java_combine_values(stages, context):
    """Every stage, a Java CombineValues' stage replaced by a stage per
    leaf subtransform of it, in order, each keeping the stage's side-input
    and ordering constraints."""
    components = context.components
    for stage in stages:
        if len(stage.transforms) == 1 and _is_java_combine_values(components, stage.transforms[0]):
            for transform in _leaves(components, stage.transforms[0]):
                yield translations.Stage(
                    transform.unique_name,
                    [transform],
                    downstream_side_inputs=stage.downstream_side_inputs,
                    must_follow=stage.must_follow,
                    parent=stage.name,
                    environment=transform.environment_id or stage.environment,
                )
        else:
            yield stage


def _is_java_combine_values(components, transform):
    if transform.spec.urn != _CGV or not transform.subtransforms:
        return False
    ids = [transform.environment_id] + [components.transforms[s].environment_id for s in transform.subtransforms]
    return any(
        env_id in components.environments and kind_of(components.environments[env_id]) is EnvironmentKind.JAVA
        for env_id in ids
        if env_id
    )


def _leaves(components, transform):
    if not transform.subtransforms:
        yield transform
        return
    for sub_id in transform.subtransforms:
        yield from _leaves(components, components.transforms[sub_id])
