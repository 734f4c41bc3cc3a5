"""Planning without a SparkSession: the plan's shape and submission checks."""

import apache_beam as beam
import pytest
from apache_beam.testing import test_stream
from apache_beam.transforms import window

from beam_spark_runner import UnsupportedPipelineError, describe_plan, plan_pipeline
from beam_spark_runner.translation.planner import pipeline_proto_of
from beam_spark_runner.plans import BufferKind


def _plan(build):
    p = beam.Pipeline()
    build(p)
    return plan_pipeline(pipeline_proto_of(p))


def test_group_by_key_becomes_a_shuffle_between_two_stages():
    plan = _plan(lambda p: p | beam.Create([(1, 2)]) | "MyGroup" >> beam.GroupByKey() | beam.Map(print))
    groups = [g for g in plan.groups.values() if g.display_name == "MyGroup"]
    assert len(groups) == 1
    writers = [
        s
        for s in plan.stages
        if any(o.buffer.kind == BufferKind.GROUP and o.buffer.name == groups[0].name for o in s.outputs)
    ]
    readers = [
        s
        for s in plan.stages
        if any(i.buffer.kind == BufferKind.GROUP and i.buffer.name == groups[0].name for i in s.inputs)
    ]
    assert len(writers) == 1 and len(readers) == 1
    assert plan.stages.index(writers[0]) < plan.stages.index(readers[0])


def test_lifted_combiner_precombines_in_the_producing_stage():
    plan = _plan(lambda p: p | beam.Create([("a", 1)]) | "Sum" >> beam.CombinePerKey(sum))
    assert any("Sum/Precombine" in s.sdk_transforms for s in plan.stages)
    assert any("Sum/Merge" in s.sdk_transforms for s in plan.stages)


def test_side_input_is_planned_as_broadcast_of_a_materialized_pcollection():
    def build(p):
        side = p | "Side" >> beam.Create([1])
        p | beam.Create([1]) | "UseSide" >> beam.Map(lambda x, s: x, beam.pvalue.AsList(side))

    plan = _plan(build)
    consumers = [s for s in plan.stages if s.side_inputs]
    assert len(consumers) == 1
    assert consumers[0].side_inputs[0].transform_id == "UseSide"


def test_describe_names_transforms_and_shuffles():
    p = beam.Pipeline()
    p | beam.Create([(1, 2)]) | "MyGroup" >> beam.GroupByKey() | "After" >> beam.Map(print)
    text = describe_plan(p)
    assert "MyGroup (GroupByKey as a Spark shuffle)" in text
    assert "runs   After" in text


class _TimeSortedDoFn(beam.DoFn):
    def process(self, kv):
        yield kv


def test_time_sorted_input_rejected_at_submission_naming_transform_and_issue():
    p = beam.Pipeline()
    p | beam.Create([(1, 1)]) | "Sorted" >> beam.ParDo(_TimeSortedDoFn())
    proto = pipeline_proto_of(p)
    from apache_beam.portability.api import beam_runner_api_pb2

    for t in proto.components.transforms.values():
        if t.unique_name == "Sorted":
            payload = beam_runner_api_pb2.ParDoPayload.FromString(t.spec.payload)
            payload.requires_time_sorted_input = True
            t.spec.payload = payload.SerializeToString()
    with pytest.raises(UnsupportedPipelineError) as e:
        plan_pipeline(proto)
    assert "Sorted" in str(e.value) and "requires_time_sorted_input" in str(e.value)
    assert "event-time timer instead" in str(e.value)


def test_test_stream_rejected_naming_urn():
    with pytest.raises(UnsupportedPipelineError) as e:
        _plan(lambda p: p | "TS" >> test_stream.TestStream().add_elements([1]) | beam.Map(print))
    assert "beam:transform:teststream:v1" in str(e.value) and "TS" in str(e.value)


def test_a_test_stream_of_elements_only_another_sdk_decodes_is_refused_naming_its_coder():
    """A Java TestStream of a Java custom coder's elements: the runner reads
    TestStream events in Python, which cannot decode them."""
    from apache_beam.portability.api import beam_runner_api_pb2

    from beam_spark_runner.translation.planner import plan_streaming_pipeline

    p = beam.Pipeline()
    p | "Events" >> test_stream.TestStream().add_elements([1]) | beam.Map(print)
    proto = pipeline_proto_of(p)
    (transform,) = [t for t in proto.components.transforms.values() if t.spec.urn == "beam:transform:teststream:v1"]
    payload = beam_runner_api_pb2.TestStreamPayload.FromString(transform.spec.payload)
    plan_streaming_pipeline(proto)  # its own coder: planned
    proto.components.coders["java_custom"].spec.urn = "beam:coders:javasdk:0.1"
    payload.coder_id = "java_custom"
    transform.spec.payload = payload.SerializeToString()
    with pytest.raises(
        UnsupportedPipelineError,
        match=r"Events: TestStream's elements are encoded with a coder only "
        r"its SDK can read \(beam:coders:javasdk:0.1\)",
    ):
        plan_streaming_pipeline(proto)


def test_unknown_urn_rejected_naming_transform_and_urn():
    p = beam.Pipeline()
    p | beam.Create([1]) | "Plain" >> beam.Map(print)
    proto = pipeline_proto_of(p)
    for t in proto.components.transforms.values():
        if t.unique_name == "Plain/ParDo(_MapFn)" or (t.unique_name.startswith("Plain") and not t.subtransforms):
            t.spec.urn = "beam:transform:made_up:v1"
    with pytest.raises(UnsupportedPipelineError) as e:
        plan_pipeline(proto)
    assert "beam:transform:made_up:v1" in str(e.value) and "Plain" in str(e.value)


def test_non_python_environment_rejected():
    p = beam.Pipeline()
    p | beam.Create([1]) | beam.Map(print)
    proto = pipeline_proto_of(p)
    for env in proto.components.environments.values():
        env.urn = "beam:env:docker:v1"
    with pytest.raises(UnsupportedPipelineError, match="beam:env:docker:v1"):
        plan_pipeline(proto)


def test_retracting_mode_is_planned_with_retraction_aware_group_output():
    from apache_beam.transforms import trigger

    p = beam.Pipeline()
    (
        p
        | beam.Create([("k", 1)])
        | "Win" >> beam.WindowInto(window.FixedWindows(10), trigger=trigger.AfterWatermark(), accumulation_mode=3)
        | "G" >> beam.GroupByKey()
        | beam.Map(print)
    )
    proto = pipeline_proto_of(p)
    plan = plan_pipeline(proto)  # accepted in batch
    group = next(g for g in plan.groups.values() if g.display_name == "G")
    assert "retraction_aware" in group.output_coder_id
    # The streaming planner applies the same rewrite.
    from beam_spark_runner.translation.planner import plan_streaming_pipeline
    from beam_spark_runner.plans import OperatorKind

    streaming = plan_streaming_pipeline(proto)
    op = next(o for o in streaming.operators if o.kind == OperatorKind.GROUP and o.display_name == "G")
    assert "retraction_aware" in op.group.output_coder_id


def test_combine_per_key_is_not_lifted_when_it_would_lose_an_earliest_timestamp():
    from beam_spark_runner.translation import unliftable_combines

    def build(combiner):
        p = beam.Pipeline()
        (
            p
            | beam.Create([("k", 1)])
            | beam.WindowInto(window.FixedWindows(10), timestamp_combiner=combiner)
            | "Sum" >> beam.CombinePerKey(sum)
            | beam.Map(print)
        )
        return pipeline_proto_of(p)

    def lifted(proto):
        names = [
            t.unique_name
            for s in plan_pipeline(proto).stages
            for t in __import__("apache_beam")
            .portability.api.beam_fn_api_pb2.ProcessBundleDescriptor.FromString(s.descriptor)
            .transforms.values()
        ]
        return any("Precombine" in n for n in names)

    assert lifted(build(window.TimestampCombiner.OUTPUT_AT_EOW))
    earliest = build(window.TimestampCombiner.OUTPUT_AT_EARLIEST)
    assert not lifted(earliest)
    assert unliftable_combines.keep_timestamp_combiners(earliest) is not earliest


def _fixed_windows_group_proto():
    p = beam.Pipeline()
    (
        p
        | beam.Create([("k", 1)])
        | beam.WindowInto(window.FixedWindows(10))
        | "MyGroup" >> beam.GroupByKey()
        | beam.Map(print)
    )
    return pipeline_proto_of(p)


def test_unspecified_closing_behavior_rejected_naming_the_grouping_and_field():
    proto = _fixed_windows_group_proto()
    for strategy in proto.components.windowing_strategies.values():
        if strategy.window_fn.urn == "beam:window_fn:fixed_windows:v1":
            strategy.ClearField("closing_behavior")
    with pytest.raises(UnsupportedPipelineError) as e:
        plan_pipeline(proto)
    assert "MyGroup" in str(e.value) and "closing_behavior" in str(e.value)


def test_group_plan_carries_the_windowing_strategy_closing_rules():
    """The two proto fields reach the reduce driver (Windowing objects drop them)."""
    from apache_beam.portability.api import beam_runner_api_pb2 as pb
    from beam_spark_runner.worker.grouping import GroupCodec
    from triggers.closing import ClosingRules

    proto = _fixed_windows_group_proto()
    for strategy in proto.components.windowing_strategies.values():
        strategy.closing_behavior = pb.ClosingBehavior.EMIT_IF_NONEMPTY
        strategy.on_time_behavior = pb.OnTimeBehavior.FIRE_IF_NONEMPTY
    plan = plan_pipeline(proto)
    group = next(g for g in plan.groups.values() if g.display_name == "MyGroup")
    assert GroupCodec(plan.components, group).closing == ClosingRules(
        pb.ClosingBehavior.EMIT_IF_NONEMPTY, pb.OnTimeBehavior.FIRE_IF_NONEMPTY
    )


def test_a_grouping_under_another_sdks_merging_windowfn_is_refused_naming_it():
    """The runner merges windows by calling the WindowFn: a merging WindowFn
    only another SDK knows (a Java custom one) is refused at submission,
    where the run would otherwise fail in a worker; another SDK's
    non-merging WindowFn and Python's sessions are accepted."""
    from apache_beam.portability.api import beam_runner_api_pb2

    from beam_spark_runner.translation.requirements import check_windowing

    p = beam.Pipeline()
    _ = p | beam.Create([("a", 1)]) | beam.WindowInto(window.Sessions(10)) | "Group" >> beam.GroupByKey()
    proto = pipeline_proto_of(p)
    assert check_windowing(proto) == []
    gbk = next(t for t in proto.components.transforms.values() if t.unique_name == "Group")
    pcoll = proto.components.pcollections[next(iter(gbk.inputs.values()))]
    strategy = proto.components.windowing_strategies[pcoll.windowing_strategy_id]
    strategy.window_fn.urn = "beam:window_fn:serialized_java:v1"
    strategy.merge_status = beam_runner_api_pb2.MergeStatus.NEEDS_MERGE
    (error,) = check_windowing(proto)
    assert "Group" in error and "beam:window_fn:serialized_java:v1" in error and "merging WindowFn" in error
    strategy.merge_status = beam_runner_api_pb2.MergeStatus.NON_MERGING
    assert check_windowing(proto) == []


def test_a_java_combine_whose_strategy_fires_empty_panes_is_not_lifted():
    """An empty pane would reach the lifted merge as no accumulators, and
    the merge's output, a Java CombineFn's empty accumulator, is encoded
    with an accumulator coder that need not hold it (Beam Java's Latest):
    such a combine runs unlifted. Python's, and Java's under triggers that
    fire no empty pane, are lifted as before."""
    from apache_beam.portability.api import beam_runner_api_pb2
    from apache_beam.transforms import trigger

    from beam_spark_runner.translation import unliftable_combines
    from tests.unit.test_sdk_environments import _java_environment

    def build(early):
        p = beam.Pipeline()
        triggered = trigger.AfterWatermark(early=trigger.AfterCount(1)) if early else trigger.AfterWatermark()
        (
            p
            | beam.Create([("k", 1)])
            | beam.WindowInto(
                window.FixedWindows(10), trigger=triggered, accumulation_mode=trigger.AccumulationMode.DISCARDING
            )
            | "Sum" >> beam.CombinePerKey(sum)
            | beam.Map(print)
        )
        return pipeline_proto_of(p)

    def in_java(proto):
        java = beam_runner_api_pb2.Pipeline()
        java.CopyFrom(proto)
        java.components.environments["java"].CopyFrom(_java_environment([]))
        (cpk,) = [tid for tid, t in java.components.transforms.items() if t.unique_name == "Sum"]
        java.components.transforms[cpk].environment_id = "java"
        return java, cpk

    def with_behaviors(proto, on_time, closing):
        for strategy in proto.components.windowing_strategies.values():
            strategy.on_time_behavior, strategy.closing_behavior = on_time, closing
        return proto

    fire_always = beam_runner_api_pb2.OnTimeBehavior.FIRE_ALWAYS
    if_non_empty = beam_runner_api_pb2.OnTimeBehavior.FIRE_IF_NONEMPTY
    emit_always = beam_runner_api_pb2.ClosingBehavior.EMIT_ALWAYS
    emit_if_non_empty = beam_runner_api_pb2.ClosingBehavior.EMIT_IF_NONEMPTY
    for on_time, closing in ((fire_always, emit_if_non_empty), (if_non_empty, emit_always)):
        java, cpk = in_java(with_behaviors(build(early=True), on_time, closing))
        assert not unliftable_combines.keep_empty_pane_java_combines(java).components.transforms[cpk].spec.urn
    for kept in (
        with_behaviors(build(early=True), fire_always, emit_always),  # a Python CombineFn
        in_java(with_behaviors(build(early=True), if_non_empty, emit_if_non_empty))[0],
        in_java(with_behaviors(build(early=False), fire_always, emit_always))[0],
    ):
        assert unliftable_combines.keep_empty_pane_java_combines(kept) is kept
