"""Submission-time checks: anything the runner cannot run correctly is
rejected here with a message naming the transform and the URN, before any
Spark job starts. A table maps each supported leaf URN to nothing; each
check below is a small function of (pipeline proto) -> errors.
"""

from apache_beam.portability import common_urns, python_urns
from apache_beam.portability.api import beam_runner_api_pb2
from beam_spark_runner.translation.beam_translations import translations
from beam_spark_runner.translation.processing_time_triggers import processing_time_trigger_problems
from apache_beam.utils import proto_utils

from beam_spark_runner.errors import UnsupportedPipelineError
from beam_spark_runner.plans import EnvironmentKind
from beam_spark_runner.translation import runner_io, sdk_environments
from beam_spark_runner.worker.beam_internals import PYTHON_WINDOW_FN_URNS
from triggers.closing import ClosingRules, UnspecifiedBehavior


_P = common_urns.primitives
_C = common_urns.combine_components
_S = common_urns.sdf_components

# Leaf transform URNs the batch runner executes (via the SDK harness unless
# the runner executes them itself: GroupByKey and Flatten).
SUPPORTED_LEAF_URNS = (
    frozenset(
        [
            _P.IMPULSE.urn,
            _P.PAR_DO.urn,
            _P.GROUP_BY_KEY.urn,
            _P.FLATTEN.urn,
            _P.ASSIGN_WINDOWS.urn,
            _P.MAP_WINDOWS.urn,
            _P.MERGE_WINDOWS.urn,
            _P.TO_STRING.urn,
            common_urns.deprecated_primitives.READ.urn,
            _C.COMBINE_PER_KEY_PRECOMBINE.urn,
            _C.COMBINE_PER_KEY_MERGE_ACCUMULATORS.urn,
            _C.COMBINE_PER_KEY_EXTRACT_OUTPUTS.urn,
            _C.COMBINE_GROUPED_VALUES.urn,
            _C.COMBINE_PER_KEY_CONVERT_TO_ACCUMULATORS.urn,
            _S.PAIR_WITH_RESTRICTION.urn,
            _S.SPLIT_AND_SIZE_RESTRICTIONS.urn,
            _S.PROCESS_SIZED_ELEMENTS_AND_RESTRICTIONS.urn,
            _S.TRUNCATE_SIZED_RESTRICTION.urn,
            python_urns.IMPULSE_READ_TRANSFORM,
        ]
    )
    | translations.KNOWN_COMPOSITES
)

# Composites Beam's phases handle whole (combiner lifting, ...).
_ALWAYS_EXPANDED = translations.KNOWN_COMPOSITES | {_P.GROUP_BY_KEY.urn, _P.FLATTEN.urn}

SUPPORTED_REQUIREMENTS = frozenset(
    [
        common_urns.requirements.REQUIRES_STATEFUL_PROCESSING.urn,
        common_urns.requirements.REQUIRES_SPLITTABLE_DOFN.urn,
        common_urns.requirements.REQUIRES_BUNDLE_FINALIZATION.urn,
        # Batch materializes such a stage's input before it runs; streaming
        # holds it one micro-batch in the checkpoint (plans.StagePlan).
        common_urns.requirements.REQUIRES_STABLE_INPUT.urn,
        # Java's @OnWindowExpiration: the runner sets the callback's timer
        # (worker/window_expiration_timers.py).
        common_urns.requirements.REQUIRES_ON_WINDOW_EXPIRATION.urn,
    ]
)


def _leaf_transforms(pipeline):
    """The transforms the runner executes, by the same rule as Beam's
    `leaf_transform_stages`: known composites whole, pass-through leaves
    (outputs a subset of inputs) skipped."""
    transforms = pipeline.components.transforms

    def visit(tid):
        t = transforms[tid]
        if t.spec.urn in _ALWAYS_EXPANDED:
            yield tid, t
        elif t.subtransforms:
            for sub in t.subtransforms:
                yield from visit(sub)
        elif set(t.outputs.values()) - set(t.inputs.values()):
            yield tid, t

    for root in pipeline.root_transform_ids:
        yield from visit(root)


def check_transforms(pipeline, streaming=False):
    errors = []
    for tid, t in _leaf_transforms(pipeline):
        urn = t.spec.urn
        name = t.unique_name or tid
        if urn == _P.TEST_STREAM.urn and streaming:
            errors.extend(_check_test_stream(name, t, pipeline.components))
            continue
        if urn == _P.TEST_STREAM.urn:
            errors.append("%s: TestStream (%s) needs a streaming run: pass --streaming" % (name, urn))
        elif runner_io.lookup(urn) is not None:
            io = runner_io.lookup(urn)
            errors.extend(runner_io.engine_problems(name, io, streaming) or io.check(name, t, pipeline, streaming))
        elif urn not in SUPPORTED_LEAF_URNS:
            errors.append("%s: transform URN %s is not supported by the Spark runner" % (name, urn or "<empty>"))
        elif urn in translations.PAR_DO_URNS:
            errors.extend(_check_pardo(name, t))
    return errors


def _check_test_stream(name, transform, components):
    """The runner reads a TestStream's events itself, in Python: their
    elements' coder must be one Python can build, which another SDK's own
    coder (a Java custom coder, `beam:coders:javasdk:0.1`) is not."""
    payload = proto_utils.parse_Bytes(transform.spec.payload, beam_runner_api_pb2.TestStreamPayload)
    if sdk_environments.python_decodes(components, payload.coder_id):
        return []
    return [
        "%s: TestStream's elements are encoded with a coder only its SDK can read (%s); the runner reads a "
        "TestStream's events itself, in Python: give the elements a standard Beam coder (strings, longs, "
        "doubles, bytes, KVs, iterables or rows of them; Java's VarIntCoder and custom coders are not)"
        % (name, _coder_urns(components, payload.coder_id))
    ]


def _coder_urns(components, coder_id):
    """The coder's URN, with its components' in brackets."""
    coder = components.coders[coder_id]
    parts = [_coder_urns(components, c) for c in coder.component_coder_ids]
    return coder.spec.urn + ("[%s]" % ", ".join(parts) if parts else "")


def _check_pardo(name, transform):
    payload = proto_utils.parse_Bytes(transform.spec.payload, beam_runner_api_pb2.ParDoPayload)
    errors = []
    if payload.requires_time_sorted_input:
        errors.append(
            "%s: requires_time_sorted_input (%s) is not supported by this runner; keep the elements in "
            "state (an OrderedListState or a BagState) and process them in timestamp order from an "
            "event-time timer instead" % (name, common_urns.requirements.REQUIRES_TIME_SORTED_INPUT.urn)
        )
    return errors


_GROUPING_URNS = frozenset([_P.GROUP_BY_KEY.urn, common_urns.composites.COMBINE_PER_KEY.urn])


def check_windowing(pipeline):
    """A grouping needs to know how its windows close (the windowing
    strategy's closing_behavior and on_time_behavior): UNSPECIFIED is not a
    behaviour, so guessing one could emit or drop final panes wrongly. And
    the runner merges windows by calling the WindowFn, which it can only do
    for a WindowFn Python knows: another SDK's merging WindowFn (a Java
    custom one) is refused, where it would otherwise fail the run."""
    errors = []
    components = pipeline.components
    groupings = []
    for tid, t in _leaf_transforms(pipeline):
        if t.spec.urn not in _GROUPING_URNS or len(t.inputs) != 1:
            continue
        groupings.append((t.unique_name or tid, t.spec.urn, translations.only_element(t.inputs.values())))
        pcoll = components.pcollections[translations.only_element(t.inputs.values())]
        strategy = components.windowing_strategies[pcoll.windowing_strategy_id]
        if (
            strategy.window_fn.urn not in PYTHON_WINDOW_FN_URNS
            and strategy.merge_status == beam_runner_api_pb2.MergeStatus.NEEDS_MERGE
        ):
            errors.append(
                "%s: %s reads PCollection %s windowed by another SDK's merging WindowFn %s: the runner merges "
                "windows only with WindowFns of this Python SDK (sessions included)"
                % (t.unique_name or tid, t.spec.urn, pcoll.unique_name or t.inputs, strategy.window_fn.urn)
            )
            continue
        try:
            ClosingRules.from_proto(strategy)
        except UnspecifiedBehavior as e:
            errors.append(
                "%s: %s reads PCollection %s whose windowing strategy %s is not supported: %s"
                % (t.unique_name or tid, t.spec.urn, pcoll.unique_name or t.inputs, pcoll.windowing_strategy_id, e)
            )
    return errors + processing_time_trigger_problems(pipeline, groupings)


def check_requirements(pipeline):
    return [
        "pipeline requirement %s is not supported by the Spark runner" % r
        for r in pipeline.requirements
        if r not in SUPPORTED_REQUIREMENTS
    ]


def check_environments(pipeline, staged_later=False):
    """Every environment a leaf transform uses must be one the runner runs
    (translation/sdk_environments.py): the embedded Python SDK, or Beam's
    Java SDK with its jars on this machine."""
    errors = []
    by_env = {}
    for _, t in _leaf_transforms(pipeline):
        if t.environment_id:
            by_env.setdefault(t.environment_id, []).append(t.unique_name)
    for env_id, names in sorted(by_env.items()):
        env = pipeline.components.environments[env_id]
        kind = sdk_environments.kind_of(env)
        if env.urn in sdk_environments.EMBEDDED_PYTHON_URNS:
            continue
        if kind is EnvironmentKind.JAVA:
            errors.extend(sdk_environments.java_environment_problems(env, env_id, names, staged_later))
            continue
        errors.append(
            "environment %s (%s, SDK %s) used by %s cannot run here: this runner runs Beam's Python SDK "
            "embedded in Spark's Python workers and Beam's Java SDK harness"
            % (env_id, env.urn, sdk_environments.sdk_of(env) or "undeclared", ", ".join(sorted(names)[:3]))
        )
    return errors


def check_pipeline(pipeline, streaming=False, staged_later=False):
    """Raises UnsupportedPipelineError listing every problem found.
    `staged_later`: the job service's check at Prepare, before the client
    staged the artifacts."""
    errors = (
        check_requirements(pipeline)
        + check_environments(pipeline, staged_later)
        + check_transforms(pipeline, streaming)
        + check_windowing(pipeline)
    )
    if errors:
        raise UnsupportedPipelineError(
            "The Spark runner cannot run this pipeline:\n  - " + "\n  - ".join(dict.fromkeys(errors))
        )
