"""The ordered phases that turn a pipeline into stages.

Three kinds, in the order they apply (SparkRunner.run_pipeline applies the
pipeline overrides; translation/planner.py runs the rest):
 * pipeline overrides, on the `beam.Pipeline` object before it becomes a
   proto (`apply_pipeline_overrides`: the runner's own text reads and file
   writes, batch only; unbounded file writes are replaced when applied,
   translation/file_sink_overrides.py);
 * proto rewrites, `(pipeline proto) -> pipeline proto` (`PROTO_REWRITES`:
   retractions, combines that must not be lifted);
 * graph phases, `(stages, context) -> stages`: Beam's own (combiner
   lifting, SDF expansion, GBK expansion, fusion, ...) from
   `fn_api_runner.translations`, and ours only where Spark needs a
   different shape (`BATCH_PHASES`, `STREAMING_PHASES`).
Every phase is a plain function, testable on its own.
"""

import copy

from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.utils import proto_utils
from beam_spark_runner.translation.beam_translations import translations

from beam_spark_runner.translation import (
    java_combine_values,
    processing_time_triggers,
    native_io_overrides,
    record_counting,
    retracting,
    runner_io,
    stable_order,
    unliftable_combines,
)


def apply_pipeline_overrides(pipeline):
    """Batch: the runner's Spark-native text reads and file writes in place
    of Beam's expansions, where they give the same result
    (translation/native_io_overrides.py). (Unbounded file writes are
    replaced earlier, when applied: translation/file_sink_overrides.py.)"""
    native_io_overrides.apply_native_io(pipeline)


# Before Beam's phases, in this order; each a pure `proto -> proto`.
PROTO_REWRITES = (
    # AfterProcessingTime with exactly the one delay Python's trigger reads.
    processing_time_triggers.normalize_processing_time_delays,
    # RETRACTING: coders that carry retractions, combines that consume them.
    retracting.rewrite_retracting,
    # CombinePerKeys whose timestamp combiner lifting would change.
    unliftable_combines.keep_timestamp_combiners,
    # Java CombinePerKeys whose strategy fires empty panes: the lifted merge
    # would encode their empty accumulators.
    unliftable_combines.keep_empty_pane_java_combines,
)

# Transforms the runner (Spark) executes itself rather than the SDK harness,
# besides its I/O transforms (translation/runner_io.py).
_RUNNER_PRIMITIVES = frozenset([common_urns.primitives.FLATTEN.urn, common_urns.primitives.GROUP_BY_KEY.urn])


def runner_urns(streaming=False):
    """The URNs fusion leaves to the runner: its primitives and the I/O
    transforms registered for the kind of pipeline; in streaming also
    TestStream, a runner-side source (the micro-batch reader), which must
    not be fused into an SDK stage."""
    if streaming:
        return _RUNNER_PRIMITIVES | runner_io.urns(streaming=True) | {common_urns.primitives.TEST_STREAM.urn}
    return _RUNNER_PRIMITIVES | runner_io.urns(streaming=False)


_SDF_PROCESS_URN = common_urns.sdf_components.PROCESS_SIZED_ELEMENTS_AND_RESTRICTIONS.urn


def stable_input_readers_start_stages(stages, context):
    """A ParDo whose DoFn requires stable input starts a new stage instead
    of being fused after its input's producer.

    Why: the runner makes a stage's *input* stable (batch materializes it,
    streaming holds it one micro-batch in the checkpoint). Fused after other
    transforms, the DoFn's input would be what they compute again on a
    retry, which may differ (a random draw, a clock, an external lookup);
    as the first transform of its stage, it reads exactly the stored input.
    """
    stages = list(stages)
    for stage in stages:
        for t in stage.transforms:
            if t.spec.urn in translations.PAR_DO_URNS:
                payload = proto_utils.parse_Bytes(t.spec.payload, beam_runner_api_pb2.ParDoPayload)
                if payload.requires_stable_input:
                    stage.forced_root = True
    return stages


BATCH_PHASES = (
    translations.annotate_downstream_side_inputs,
    # A stateful DoFn must start a stage: its input is re-partitioned by key
    # so that all of a key's elements (and its state) live in one partition.
    translations.annotate_stateful_dofns_as_roots,
    translations.fix_side_input_pcoll_coders,
    translations.pack_combiners,
    translations.lift_combiners,
    # An unlifted Java CombineValues as its subtransforms: Java's harness
    # runs no combine_grouped_values composite.
    java_combine_values.expand_java_combine_values,
    translations.expand_sdf,
    translations.expand_gbk,
    translations.sink_flattens,
    # Before fusing: a DoFn that requires stable input starts its stage.
    stable_input_readers_start_stages,
    translations.greedily_fuse,
    translations.read_to_impulse,
    translations.impulse_to_input,
    translations.sort_stages,
    # The same pipeline, the same stages, order and names, whatever the
    # interpreter's hash seed: a checkpoint's state stays with its operator.
    stable_order.stable_stage_order,
    translations.add_impulse_to_dangling_transforms,
    translations.setup_timer_mapping,
    translations.populate_data_channel_coders,
)


def sdf_outputs_start_stages(stages, context):
    """Streaming: whatever reads a splittable DoFn's output starts a new
    stage instead of being fused into the SDF's.

    Why: an SDF operator keeps its restrictions per key-group, so all the
    work fused after it runs where its restrictions live; PeriodicImpulse's
    single restriction put a whole pipeline's per-element work on one core.
    As its own stage, that work runs as a stateless operator over the SDF's
    output spread across partitions (translation/streaming_plan.py), and on
    the plain-Python path when it qualifies.
    """
    stages = list(stages)
    sdf_outputs = set()
    for stage in stages:
        for t in stage.transforms:
            if t.spec.urn == _SDF_PROCESS_URN:
                sdf_outputs.update(t.outputs.values())
    for stage in stages:
        if any(pcoll in sdf_outputs for t in stage.transforms for pcoll in t.inputs.values()):
            stage.forced_root = True
    return stages


def side_input_readers_start_stages(stages, context):
    """Streaming: a transform that reads side inputs starts a new stage
    instead of being fused after its main input's producer.

    Why: a main-input element waits at the stage's input until the side
    windows it needs are ready, and which side windows it needs follows from
    its windows. Those are the stage input's windows only if nothing before
    the reader changes them: fused after a WindowInto, an element from the
    global window waited until the side input ended (its global window maps
    to the last side window), which an unbounded side input never does.
    """
    stages = list(stages)
    producer_urn = {pcoll: t.spec.urn for stage in stages for t in stage.transforms for pcoll in t.outputs.values()}
    for stage in stages:
        for t in stage.transforms:
            sides = translations.side_inputs(t)
            mains = [pcoll for tag, pcoll in t.inputs.items() if tag not in sides]
            # The steps of a splittable DoFn keep their input's windows: the
            # process step may stay with the restriction steps before it.
            if sides and not all(producer_urn.get(pcoll) in _WINDOW_KEEPING_SDF_STEPS for pcoll in mains):
                stage.forced_root = True
    return stages


_WINDOW_KEEPING_SDF_STEPS = frozenset(
    [
        common_urns.sdf_components.PAIR_WITH_RESTRICTION.urn,
        common_urns.sdf_components.SPLIT_AND_SIZE_RESTRICTIONS.urn,
        common_urns.sdf_components.TRUNCATE_SIZED_RESTRICTION.urn,
    ]
)


# Streaming's own phases, each inserted before the Beam phase it precedes.
_STREAMING_BEFORE = {
    # Lifted partial sums say how many records they hold, so that late input
    # is counted in records (translation/record_counting.py).
    translations.lift_combiners: (record_counting.count_records_in_lifted_combines,),
    translations.greedily_fuse: (sdf_outputs_start_stages, side_input_readers_start_stages),
}

STREAMING_PHASES = tuple(phase for p in BATCH_PHASES for phase in (*_STREAMING_BEFORE.get(p, ()), p))


def create_stages(pipeline_proto, phases=BATCH_PHASES, drain=False, streaming=False):
    """Returns (TransformContext, ordered stages) for a pipeline proto.

    `drain`: splittable DoFns get a truncate step, so unbounded restrictions
    are cut to what is already available and the run finishes (Beam's drain).
    The proto is copied: the caller's pipeline is never mutated.
    """
    return translations.create_and_optimize_stages(
        copy.deepcopy(pipeline_proto),
        phases=list(phases),
        known_runner_urns=runner_urns(streaming),
        use_state_iterables=False,
        is_drain=drain,
    )
