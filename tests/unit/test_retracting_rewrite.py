"""translation/retracting.py: the proto rewrite, and the GroupByKey wire
contract between the runner-side grouping and the SDK harness (no Spark)."""

import apache_beam as beam
import pytest
from apache_beam.coders import coders
from apache_beam.coders.coder_impl import create_InputStream, create_OutputStream
from apache_beam.internal import pickler
from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.runners import pipeline_context
from apache_beam.transforms import trigger, window
from apache_beam.transforms.window import WindowFn
from apache_beam.utils.windowed_value import WindowedValue

import triggers
from beam_spark_runner import UnsupportedPipelineError, plan_pipeline
from beam_spark_runner.translation.planner import pipeline_proto_of
from beam_spark_runner.translation import phases, batch_plan as plan_lib
from beam_spark_runner.plans import BufferKind, BufferRef
from beam_spark_runner.translation.retracting import rewrite_retracting
from beam_spark_runner.worker import context
from beam_spark_runner.worker.grouping import GroupCodec
from triggers import Retraction
from triggers.retracting_combine import RetractionAwareCombineValuesDoFn
from triggers.retraction_coder import RetractionAwareCoder
from tests.unit.user_types import Point

EARLY = dict(trigger=trigger.AfterWatermark(early=trigger.AfterCount(1)))
# Beam lifts combiners under this trigger (it does not under EARLY alone,
# whose unset late trigger fails `is_compatible_with_combiner_lifting`).
LIFTABLE = dict(trigger=trigger.AfterWatermark(early=trigger.AfterCount(1), late=trigger.AfterCount(1)))


def _proto(mode, build, values=(1,), windowing=EARLY):
    p = beam.Pipeline()
    pcoll = (
        p
        | beam.Create([("k", v) for v in values])
        | beam.WindowInto(window.Sessions(10), accumulation_mode=mode, **windowing)
    )
    build(pcoll)
    return pipeline_proto_of(p)


def _by_name(proto, name):
    return next(t for t in proto.components.transforms.values() if t.unique_name == name)


def _output_coder(proto, transform_name):
    t = _by_name(proto, transform_name)
    pcoll = proto.components.pcollections[next(iter(t.outputs.values()))]
    return pipeline_context.PipelineContext(proto.components).coders[pcoll.coder_id]


def test_rewrite_is_pure_and_keeps_original_coders():
    proto = _proto(triggers.RETRACTING, lambda pc: pc | "G" >> beam.GroupByKey())
    before = proto.SerializeToString()
    new = rewrite_retracting(proto)
    assert proto.SerializeToString() == before
    for coder_id, coder in proto.components.coders.items():
        assert new.components.coders[coder_id] == coder
    assert set(new.components.transforms) == set(proto.components.transforms)


def test_non_retracting_pipeline_comes_back_equal():
    for mode in (triggers.DISCARDING, triggers.ACCUMULATING):
        proto = _proto(mode, lambda pc: (pc | "G" >> beam.GroupByKey(), pc | "S" >> beam.CombinePerKey(sum)))
        assert rewrite_retracting(proto) == proto


def test_group_by_key_output_coder_carries_retractions():
    proto = _proto(triggers.RETRACTING, lambda pc: pc | "G" >> beam.GroupByKey())
    assert _output_coder(proto, "G") == coders.TupleCoder(
        [coders.StrUtf8Coder(), coders.IterableCoder(coders.VarIntCoder())]
    )
    new = rewrite_retracting(proto)
    assert _output_coder(new, "G") == coders.TupleCoder(
        [coders.StrUtf8Coder(), RetractionAwareCoder(coders.IterableCoder(coders.VarIntCoder()))]
    )


def test_unknown_value_coder_is_length_prefixed_like_the_data_channel():
    proto = _proto(triggers.RETRACTING, lambda pc: pc | "G" >> beam.GroupByKey(), values=[Point(1)])
    new = rewrite_retracting(proto)
    assert _output_coder(new, "G") == coders.TupleCoder(
        [
            coders.StrUtf8Coder(),
            RetractionAwareCoder(coders.IterableCoder(coders.LengthPrefixCoder(coders.FastPrimitivesCoder()))),
        ]
    )


def _sdk_transforms(proto):
    return [n for s in plan_pipeline(proto).stages for n in s.sdk_transforms]


def test_combine_per_key_is_expanded_wrapped_and_never_lifted():
    def build(pc):
        pc | "S" >> beam.CombinePerKey(sum)

    # Beam would lift this combine; on RETRACTING input it must not.
    assert "S/Precombine" in _sdk_transforms(_proto(triggers.ACCUMULATING, build, windowing=LIFTABLE))
    proto = _proto(triggers.RETRACTING, build, windowing=LIFTABLE)
    new = rewrite_retracting(proto)
    assert _by_name(new, "S").spec.urn == "" and _by_name(new, "S/Combine").spec.urn == ""
    pardo = _by_name(new, "S/Combine/ParDo(CombineValuesDoFn)")
    payload = beam_runner_api_pb2.ParDoPayload.FromString(pardo.spec.payload)
    assert isinstance(pickler.loads(payload.do_fn.payload)[0], RetractionAwareCombineValuesDoFn)
    assert _output_coder(new, "S") == coders.TupleCoder(
        [coders.StrUtf8Coder(), RetractionAwareCoder(coders.FastPrimitivesCoder())]
    )
    names = _sdk_transforms(proto)
    assert "S/Combine/ParDo(CombineValuesDoFn)" in names
    assert not any("Precombine" in n or "Merge" in n for n in names), names


def test_combine_values_after_group_by_key_is_wrapped():
    proto = _proto(triggers.RETRACTING, lambda pc: pc | "G" >> beam.GroupByKey() | "C" >> beam.CombineValues(sum))
    new = rewrite_retracting(proto)
    assert _by_name(new, "C").spec.urn == ""
    assert _output_coder(new, "C") == coders.TupleCoder(
        [coders.StrUtf8Coder(), RetractionAwareCoder(coders.FastPrimitivesCoder())]
    )
    assert "C/ParDo(CombineValuesDoFn)" in _sdk_transforms(proto)


def test_unexpected_combine_expansion_is_rejected_naming_it():
    proto = _proto(triggers.RETRACTING, lambda pc: pc | "S" >> beam.CombinePerKey(sum))
    pardo = _by_name(proto, "S/Combine/ParDo(CombineValuesDoFn)")
    payload = beam_runner_api_pb2.ParDoPayload.FromString(pardo.spec.payload)
    info = pickler.loads(payload.do_fn.payload)
    payload.do_fn.payload = pickler.dumps((beam.transforms.core.CallableWrapperDoFn(lambda x: [x]),) + info[1:])
    pardo.spec.payload = payload.SerializeToString()
    with pytest.raises(UnsupportedPipelineError) as e:
        rewrite_retracting(proto)
    assert "S" in str(e.value) and "RETRACTING" in str(e.value) and "map_pane" in str(e.value)


def test_combine_values_dofn_keeps_polarity():
    fn = RetractionAwareCombineValuesDoFn(
        beam.transforms.core.CombineValuesDoFn(None, beam.transforms.core.CombineFn.maybe_from_callable(sum), False)
    )
    fn.setup()
    assert list(fn.process(("k", [1, 2, 3]))) == [("k", 6)]
    assert list(fn.process(("k", Retraction([1, 2, 3])))) == [("k", Retraction(6))]
    fn.teardown()


def _group_wire(values):
    """Runs a RETRACTING GroupByKey's runner-side byte path (GroupCodec) on
    values encoded by the producing stage's coder; decodes the result with the
    consuming stage's coder, as the SDK harness does."""
    p = beam.Pipeline()
    (
        p
        | beam.Create([("k", v) for v, _ in values])
        | beam.WindowInto(window.Sessions(10), accumulation_mode=triggers.RETRACTING, **EARLY)
        | "G" >> beam.GroupByKey()
        | "After" >> beam.Map(lambda kv: kv)
    )
    plan = plan_pipeline(pipeline_proto_of(p))
    group = next(g for g in plan.groups.values() if g.display_name == "G")
    ref = BufferRef(BufferKind.GROUP, group.name)
    write = next(port for s in plan.stages for port in s.outputs if port.buffer == ref)
    read = next(port for s in plan.stages for port in s.inputs if port.buffer == ref)
    sdk_out = context.coder_impl(plan.components, write.coder_id)
    sdk_in = context.coder_impl(plan.components, read.coder_id)
    fn = window.Sessions(10)
    out = create_OutputStream()
    for v, t in values:
        sdk_out.encode_to_stream(WindowedValue(("k", v), t, fn.assign(WindowFn.AssignContext(t, v))), out, True)
    codec = GroupCodec(plan.components, group)
    grouped = {}
    for key, value in codec.shuffle_records(out.get()):
        grouped.setdefault(key, []).append(value)
    result = []
    for block in codec.grouped_blocks(sorted(grouped.items())):
        stream = create_InputStream(block)
        while stream.size() > 0:
            result.append(sdk_in.decode_from_stream(stream, True))
    return result


@pytest.mark.parametrize(
    "values",
    [
        [(1, 1), (2, 5), (3, 30)],  # VarIntCoder: known to the runner
        [(Point(1), 1), (Point(2), 5), (Point(3), 30)],  # FastPrimitivesCoder: opaque to the runner
    ],
    ids=["known", "opaque"],
)
def test_runner_grouping_writes_retractions_the_sdk_decodes(values):
    # Sessions [1, 15) and [30, 40); in batch each fires EARLY, then its
    # EARLY pane is retracted and the ON_TIME pane emitted.
    out = _group_wire(values)
    panes = sorted(
        (
            (
                wv.windows[0].start.micros // 10**6,
                triggers.is_retraction(wv.value[1]),
                sorted(triggers.retractions.unwrap(wv.value[1])[0], key=repr),
            )
            for wv in out
        ),
        key=repr,
    )
    sessions = {1: sorted([v for v, _ in values[:2]], key=repr), 30: [values[2][0]]}
    expected = [(start, retracted, vs) for start, vs in sessions.items() for retracted in (False, True, False)]
    assert panes == sorted(expected, key=repr)


def test_grouping_without_the_rewrite_is_a_clear_error():
    proto = _proto(triggers.RETRACTING, lambda pc: pc | "G" >> beam.GroupByKey() | beam.Map(print))
    context_, stages = phases.create_stages(proto)  # no rewrite_retracting
    plan = plan_lib.build_plan(context_, stages)
    group = next(g for g in plan.groups.values() if g.display_name == "G")
    with pytest.raises(ValueError, match="cannot carry retractions"):
        GroupCodec(plan.components, group)


def test_combine_per_key_with_side_inputs_is_rejected_naming_it():
    # Beam expands it into its own lifted form (pre-combine, group
    # accumulators, merge), whose merge cannot consume retractions.
    p = beam.Pipeline()
    side = p | "Side" >> beam.Create([1])
    (
        p
        | beam.Create([("k", 1)])
        | beam.WindowInto(window.Sessions(10), accumulation_mode=triggers.RETRACTING, **EARLY)
        | "SideSum" >> beam.CombinePerKey(lambda vs, s: sum(vs) + s, beam.pvalue.AsSingleton(side))
    )
    with pytest.raises(UnsupportedPipelineError) as e:
        plan_pipeline(pipeline_proto_of(p))
    assert "SideSum" in str(e.value) and "accumulators" in str(e.value) and "map_pane" in str(e.value)


# --- downstream of RETRACTING output: combines consume, coders carry -----


def _second_stage(combine):
    def build(pcoll):
        (
            pcoll
            | "SessionSum" >> beam.CombinePerKey(sum)
            | "ToDay" >> beam.Map(lambda kv: ("day", kv[1]))
            | "Day" >> beam.WindowInto(window.FixedWindows(86400))
            | "Second" >> combine
            | "Out" >> beam.Map(print)
        )

    return build


def _combine_fn(proto, name):
    from apache_beam.transforms import core

    t = _by_name(proto, name)
    payload = beam_runner_api_pb2.CombinePayload.FromString(t.spec.payload)
    return core.CombineFn.from_runner_api(payload.combine_fn, pipeline_context.PipelineContext(proto.components))


def test_may_hold_retractions_stops_at_the_combine_that_consumes_them():
    from beam_spark_runner.translation.retracting import may_hold_retractions

    proto = _proto(3, _second_stage(beam.CombinePerKey(sum)))
    producers = {
        t.unique_name
        for t in proto.components.transforms.values()
        if set(t.outputs.values()) & may_hold_retractions(proto.components)
    }
    assert {"SessionSum", "ToDay", "Day"} <= producers, producers
    assert not any(n.startswith(("Second", "Out")) for n in producers), producers
    # Nothing downstream of ACCUMULATING output.
    assert not may_hold_retractions(_proto(2, _second_stage(beam.CombinePerKey(sum))).components)


@pytest.mark.parametrize(
    "combine,kind",
    [
        (beam.CombinePerKey(sum), "_InvertibleSum"),
        (beam.combiners.Count.PerKey(), "_InvertibleCount"),
        (beam.combiners.Mean.PerKey(), "_InvertibleMean"),
        (beam.CombinePerKey(max), "_Retaining"),
    ],
)
def test_combines_downstream_of_retracting_output_become_retractable(combine, kind):
    proto = _proto(3, _second_stage(combine))
    rewritten = rewrite_retracting(proto)
    second = next(
        t.unique_name
        for t in proto.components.transforms.values()
        if t.unique_name.startswith("Second") and t.spec.urn == "beam:transform:combine_per_key:v1"
    )
    assert type(_combine_fn(rewritten, second)).__name__ == kind
    # ... in the CombineValues its expansion would run too, and with the new
    # fn's accumulator coder.
    cgv = next(
        t.unique_name
        for t in rewritten.components.transforms.values()
        if t.unique_name.startswith(second + "/") and t.spec.urn == "beam:transform:combine_grouped_values:v1"
    )
    assert type(_combine_fn(rewritten, cgv)).__name__ == kind
    before = beam_runner_api_pb2.CombinePayload.FromString(_by_name(proto, second).spec.payload)
    after = beam_runner_api_pb2.CombinePayload.FromString(_by_name(rewritten, second).spec.payload)
    assert after.accumulator_coder_id != before.accumulator_coder_id
    # The first stage combines fresh input: its panes are combined with sum
    # itself (per pane, keeping their polarity).
    pardo = _by_name(rewritten, "SessionSum/Combine/ParDo(CombineValuesDoFn)")
    dofn = pickler.loads(beam_runner_api_pb2.ParDoPayload.FromString(pardo.spec.payload).do_fn.payload)[0]
    assert isinstance(dofn, RetractionAwareCombineValuesDoFn)
    from apache_beam.transforms import core

    assert isinstance(dofn.combine_values_dofn.combinefn, core.CallableWrapperCombineFn)


def test_typed_coders_downstream_of_retracting_output_carry_them():
    def build(pcoll):
        (pcoll | "Count" >> beam.combiners.Count.PerKey() | "Reshuffle" >> beam.Reshuffle() | "Out" >> beam.Map(print))

    proto = _proto(3, build)
    rewritten = rewrite_retracting(proto)
    python_coders = pipeline_context.PipelineContext(rewritten.components).coders
    out_id = next(iter(_by_name(proto, "Reshuffle").outputs.values()))
    coder = python_coders[rewritten.components.pcollections[out_id].coder_id]
    # KV<str, RetractionAware(int)>: a Retraction(1) round-trips.
    assert coder.decode(coder.encode(("k", Retraction(1)))) == ("k", Retraction(1))
    before = pipeline_context.PipelineContext(proto.components).coders[proto.components.pcollections[out_id].coder_id]
    with pytest.raises(TypeError):
        before.encode(("k", Retraction(1)))


def test_combine_with_side_inputs_over_retractions_is_rejected_naming_it():
    def build(pcoll):
        side = pcoll.pipeline | "Side" >> beam.Create([1])
        (
            pcoll
            | "SessionSum" >> beam.CombinePerKey(sum)
            | "Day" >> beam.WindowInto(window.FixedWindows(86400))
            | "WithSide" >> beam.CombinePerKey(lambda vs, s: sum(vs), beam.pvalue.AsSingleton(side))
        )

    with pytest.raises(UnsupportedPipelineError, match="WithSide"):
        rewrite_retracting(_proto(3, build))
