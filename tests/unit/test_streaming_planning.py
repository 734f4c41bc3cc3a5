"""Streaming planning without Spark: the operator chain, the watermark graph,
the source planner's offsets and steps, and one key-group of a GroupByKey."""

import json
import pickle
import typing

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.transforms import window
from apache_beam.utils.timestamp import MAX_TIMESTAMP, MIN_TIMESTAMP

from beam_spark_runner.translation.planner import is_streaming, pipeline_proto_of, plan_streaming_pipeline
from beam_spark_runner.streaming import rows as R
from beam_spark_runner.streaming.keyed_state import DictStore, KeyedState
from beam_spark_runner.streaming.operators import GroupOperator
from beam_spark_runner.streaming.script import compile_script
from beam_spark_runner.streaming.source_planner import AFTER_ALL, SourcePlanner, write_holds
from beam_spark_runner.streaming.watermarks import MAX_MICROS, MIN_MICROS
from beam_spark_runner.errors import UnsupportedPipelineError
from beam_spark_runner.plans import Dest, OperatorKind


def test_micros_constants_match_beam():
    assert (MIN_MICROS, MAX_MICROS) == (MIN_TIMESTAMP.micros, MAX_TIMESTAMP.micros)


def _two_gbk_pipeline(allowed_lateness=0):
    p = beam.Pipeline(options=PipelineOptions(["--streaming"]))
    stream = (
        TestStream()
        .add_elements([window.TimestampedValue(("a", 1), 1)])
        .advance_watermark_to(10)
        .add_elements([window.TimestampedValue(("a", 2), 12)])
        .advance_watermark_to_infinity()
    )
    (
        p
        | stream
        | beam.WindowInto(window.FixedWindows(5), allowed_lateness=allowed_lateness)
        | "G1" >> beam.GroupByKey()
        | beam.MapTuple(lambda k, vs: (k, sum(vs)))
        | "G2" >> beam.GroupByKey()
        | beam.Map(print)
    )
    return p


def test_plan_chains_operators_and_keeps_test_stream_out_of_sdk_stages():
    proto = pipeline_proto_of(_two_gbk_pipeline())
    assert is_streaming(proto)
    plan = plan_streaming_pipeline(proto)
    kinds = [op.kind for op in plan.operators]
    assert kinds == [
        OperatorKind.STATELESS,
        OperatorKind.GROUP,
        OperatorKind.STATELESS,
        OperatorKind.GROUP,
        OperatorKind.STATELESS,
    ]
    assert len(plan.sources) == 1 and plan.sources[0].display_name == "TestStream"
    g1, g2 = [op.name for op in plan.operators if op.kind == OperatorKind.GROUP]
    # G2 is fed by G1 through a stateless stage: the graph looks through it.
    assert plan.watermark_graph[g1].sources and not plan.watermark_graph[g1].stages
    assert plan.watermark_graph[g2].stages == (g1,) and not plan.watermark_graph[g2].sources
    assert "transformWithState" in plan.describe()


class _Expand(beam.DoFn):
    def process(self, tick):
        for i in range(3):
            yield int(tick) * 10 + i, i


def test_work_after_a_splittable_dofn_is_its_own_stateless_operator_spread_over_key_groups():
    from apache_beam.transforms.periodicsequence import PeriodicImpulse
    from beam_spark_runner.streaming.operators import RowWriter
    from beam_spark_runner.plans import OperatorKind

    p = beam.Pipeline(options=PipelineOptions(["--streaming"]))
    (
        p
        | "Ticks" >> PeriodicImpulse(start_timestamp=0, stop_timestamp=5, fire_interval=1)
        | "Expand" >> beam.ParDo(_Expand())
        | beam.WindowInto(window.FixedWindows(2))
        | beam.CombinePerKey(sum)
        | beam.Map(print)
    )
    plan = plan_streaming_pipeline(pipeline_proto_of(p))
    sdf = next(op for op in plan.operators if op.kind == OperatorKind.SDF)
    # The SDF operator runs only the splittable DoFn ...
    assert sdf.stage.sdk_transforms == ("Ticks/GenSequence/Process",)
    # ... and what reads its output is a plain-Python stateless operator
    # whose input is re-partitioned by key-group.
    after = next(
        op for op in plan.operators if any(Dest.materialized(p.buffer.name) in op.inputs for p in sdf.stage.outputs)
    )
    assert after.kind == OperatorKind.STATELESS and after.rebalance_input
    assert "Expand" in after.stage.sdk_transforms and after.stage.plain_spec is not None
    assert "after repartition by key-group, plain Python" in plan.describe()
    # Its input rows carry one element each, spread over the key-groups.
    (dest,) = after.inputs
    assert plan.keyed_dests[dest] is None
    writer = RowWriter(plan.keyed_dests, plan.components, 4, plan.element_coders)
    from beam_spark_runner.worker import context

    impl = context.coder_impl(plan.components, plan.element_coders[dest])
    from apache_beam.coders.coder_impl import create_OutputStream
    from apache_beam.utils.windowed_value import WindowedValue

    out = create_OutputStream()
    for t in range(40):
        impl.encode_to_stream(WindowedValue(float(t), t, [window.GlobalWindow()]), out, True)
    rows = writer.rows(dest, out.get(), seq=0)
    assert len(rows) == 40 and len({row[2] for row in rows}) == 4
    # Other operators are not re-partitioned.
    assert not any(op.rebalance_input for op in plan.operators if op is not after)


def test_streaming_side_inputs_get_their_own_watermarks_and_a_copy_per_key_group():
    from beam_spark_runner.plans import OperatorKind

    p = beam.Pipeline(options=PipelineOptions(["--streaming"]))
    side = p | "Side" >> beam.Create([1])
    (p | TestStream().add_elements([1]) | "UsesSide" >> beam.Map(lambda x, s: x, beam.pvalue.AsList(side)))
    plan = plan_streaming_pipeline(pipeline_proto_of(p))
    (op,) = [o for o in plan.operators if o.kind == OperatorKind.SIDE_INPUTS]
    (side_dest,) = [d for d, _ in op.side_inputs]
    assert side_dest in plan.broadcast_dests and side_dest in op.inputs
    assert plan.side_watermarks[op.name][side_dest].sources == ("impulse",)


def test_a_stateful_dofn_with_side_inputs_is_one_keyed_operator_with_side_watermarks():
    from apache_beam.transforms import userstate
    from beam_spark_runner.plans import OperatorKind

    class Stateful(beam.DoFn):
        S = userstate.BagStateSpec("s", beam.coders.VarIntCoder())

        def process(self, kv, side, s=beam.DoFn.StateParam(S)):
            yield kv

    p = beam.Pipeline(options=PipelineOptions(["--streaming"]))
    # Key-value typed side input too: Beam's construction-time check that a
    # stateful DoFn's input is key-value sometimes looks at the side input.
    side = p | "Side" >> beam.Create([("s", 1)])
    (
        p
        | TestStream().add_elements([("k", 1)]).with_output_types(typing.Tuple[str, int])
        | "StatefulWithSide" >> beam.ParDo(Stateful(), beam.pvalue.AsList(side))
    )
    plan = plan_streaming_pipeline(pipeline_proto_of(p))
    (op,) = [o for o in plan.operators if o.kind == OperatorKind.STATEFUL]
    (side_dest,) = [d for d, _ in op.side_inputs]
    main = [d for d in op.inputs if d != side_dest]
    assert side_dest in plan.broadcast_dests
    assert all(plan.keyed_dests[d] is not None for d in main)  # keyed by the user key
    assert plan.side_watermarks[op.name][side_dest].sources == ("impulse",)


def test_a_side_input_read_by_several_operators_reaches_each_of_them():
    """A splittable DoFn with a side input: the restriction-splitting stage
    and the SDF operator both read it; the first passes its rows on."""
    from beam_spark_runner.plans import OperatorKind
    from tests.splittable_dofns import ScaledPositions

    p = beam.Pipeline(options=PipelineOptions(["--streaming"]))
    side = p | "Side" >> beam.Create([2])
    (p | TestStream().add_elements([("a", 3)]) | beam.ParDo(ScaledPositions(), beam.pvalue.AsSingleton(side)))
    plan = plan_streaming_pipeline(pipeline_proto_of(p))
    (split,) = [o for o in plan.operators if o.kind == OperatorKind.SIDE_INPUTS]
    (sdf,) = [o for o in plan.operators if o.kind == OperatorKind.SDF]
    (side_dest,) = {d for d, _ in sdf.side_inputs}
    assert side_dest in plan.broadcast_dests and side_dest in split.inputs
    assert split.pass_on == (side_dest,) and sdf.pass_on == ()
    assert plan.side_watermarks[sdf.name][side_dest].sources == ("impulse",)


def test_a_main_input_read_by_two_keyed_operators_reaches_both():
    from beam_spark_runner.plans import OperatorKind
    from tests.integration.test_streaming import _RunningSum

    p = beam.Pipeline(options=PipelineOptions(["--streaming"]))
    keyed = p | TestStream().add_elements([("k", 1)]).with_output_types(typing.Tuple[str, int])
    keyed | "First" >> beam.ParDo(_RunningSum())
    keyed | "Second" >> beam.ParDo(_RunningSum())
    plan = plan_streaming_pipeline(pipeline_proto_of(p))
    first, second = [o for o in plan.operators if o.kind == OperatorKind.STATEFUL]
    assert first.pass_on == second.inputs and second.pass_on == ()


def test_readers_needing_different_placements_of_one_pcollection_are_rejected_at_submission():
    from tests.integration.test_streaming import _RunningSum

    p = beam.Pipeline(options=PipelineOptions(["--streaming"]))
    keyed = p | TestStream().add_elements([("k", 1)]).with_output_types(typing.Tuple[str, int])
    keyed | "KeyedReader" >> beam.ParDo(_RunningSum())
    p | "Other" >> beam.Create([1]) | "SideReader" >> beam.Map(lambda x, s: x, beam.pvalue.AsList(keyed))
    with pytest.raises(UnsupportedPipelineError, match="read the same PCollection.*broadcast vs key.*Reshuffle"):
        plan_streaming_pipeline(pipeline_proto_of(p))


def test_a_copy_of_its_own_lets_readers_needing_different_placements_run():
    """What the rejection above tells the user to do plans."""
    from tests.integration.test_streaming import _RunningSum

    p = beam.Pipeline(options=PipelineOptions(["--streaming"]))
    keyed = p | TestStream().add_elements([("k", 1)]).with_output_types(typing.Tuple[str, int])
    keyed | "KeyedReader" >> beam.ParDo(_RunningSum())
    copy = keyed | "Copy" >> beam.Map(lambda x: x)
    p | "Other" >> beam.Create([1]) | "SideReader" >> beam.Map(lambda x, s: x, beam.pvalue.AsList(copy))
    assert plan_streaming_pipeline(pipeline_proto_of(p)).operators


def _planner(tmp_path, allowed_lateness=0):
    plan = plan_streaming_pipeline(pipeline_proto_of(_two_gbk_pipeline(allowed_lateness)))
    return plan, SourcePlanner(compile_script(plan, key_groups=2), str(tmp_path))


def test_source_planner_steps_follow_the_events_and_lag_one_batch_per_stage(tmp_path):
    # With allowed lateness G1 is not a same-batch stage.
    plan, planner = _planner(tmp_path, allowed_lateness=1)
    g1, g2 = [op.name for op in plan.operators if op.kind == OperatorKind.GROUP]
    start = planner.initial_offset()
    first = planner.next_offset(start)
    # G1, fed by the TestStream: a step at each watermark event (seq 1 and 3,
    # advance_watermark_to_infinity) and one after all data.
    assert first["steps"][g1] == [[1, 10_000_000, 0], [3, MAX_MICROS, 0], [AFTER_ALL, MAX_MICROS, 0]]
    # G2 still sees G1's output watermark of before this batch.
    assert first["steps"][g2] == [[AFTER_ALL, MIN_MICROS, 0]]
    rows = planner.batch_rows(start, first)
    data = [r for r in rows if r[0] == R.DATA]
    assert sorted(r[5] for r in data) == [0, 2]  # one row per element event, by seq
    controls = [r for r in rows if r[0] == R.CONTROL]
    assert len(controls) == 2 * 2  # two keyed operators x two key-groups
    # Batch 2 waits for batch 1's hold report; G1 holds nothing any more.
    write_holds(str(tmp_path), 1, {g1: {"0": None, "1": None}, g2: {"0": None, "1": None}})
    second = planner.next_offset(first)
    assert second["steps"][g2] == [[AFTER_ALL, MAX_MICROS, 0]]
    assert not second["done"]
    write_holds(str(tmp_path), 2, {})
    third = planner.next_offset(second)
    assert third["done"] and planner.next_offset(third) is third


def test_source_planner_steps_after_a_same_batch_stage_take_its_new_watermark(tmp_path):
    plan, planner = _planner(tmp_path)
    g1, g2 = [op.name for op in plan.operators if op.kind == OperatorKind.GROUP]
    assert plan.same_batch_stages == {g1, g2}
    first = planner.next_offset(planner.initial_offset())
    assert first["steps"][g1] == [[1, 10_000_000, 0], [3, MAX_MICROS, 0], [AFTER_ALL, MAX_MICROS, 0]]
    # G2 steps after all of the batch's data, G1's panes among them, to the
    # watermark G1 reached in this batch.
    assert first["steps"][g2] == [[AFTER_ALL, MAX_MICROS, 0]]
    write_holds(str(tmp_path), 1, {g1: {"0": None, "1": None}, g2: {"0": None, "1": None}})
    second = planner.next_offset(first)
    assert second["done"]


def test_processing_time_holds_stop_counting_once_the_test_stream_is_exhausted(tmp_path):
    """A processing-time timer pending at the end of a TestStream can never
    fire (its clock does not move any more): its hold must not keep the
    watermark, and the run, from reaching the end (Beam's DirectRunner ends
    with such timers unfired)."""
    plan, planner = _planner(tmp_path)
    g1, g2 = [op.name for op in plan.operators if op.kind == OperatorKind.GROUP]
    first = planner.next_offset(planner.initial_offset())
    # Batch 1 exhausted the stream; G1 reports [hold, hold without
    # processing-time timers]: only a processing-time timer holds at 5 s.
    write_holds(str(tmp_path), 1, {g1: {"0": [5_000_000, None]}, g2: {}})
    second = planner.next_offset(first)
    assert second["steps"][g2] == [[AFTER_ALL, MAX_MICROS, 0]]
    write_holds(str(tmp_path), 2, {g1: {"0": [5_000_000, None]}})
    assert planner.next_offset(second)["done"]


def test_processing_time_holds_count_while_the_test_stream_has_events(tmp_path):
    plan, planner = _planner(tmp_path)
    g1, g2 = [op.name for op in plan.operators if op.kind == OperatorKind.GROUP]
    start = planner.initial_offset()
    write_holds(str(tmp_path), 0, {})
    # The stream is not exhausted at the start: a processing-time hold counts.
    assert not planner._processing_time_frozen(start)
    first = planner.next_offset(start)
    assert planner._processing_time_frozen(first)


def test_a_restarted_planner_continues_from_the_offset_it_is_given(tmp_path):
    plan, planner = _planner(tmp_path)
    first = planner.next_offset(planner.initial_offset())
    write_holds(str(tmp_path), 1, {})
    expected = planner.next_offset(first)
    _, restarted = _planner(tmp_path)
    assert restarted.next_offset(json.loads(json.dumps(first))) == expected


def test_group_operator_fires_on_the_watermark_step_and_reports_its_hold(tmp_path):
    plan, planner = _planner(tmp_path)
    group_op = [op for op in plan.operators if op.kind == OperatorKind.GROUP][0]
    operator = GroupOperator(group_op, plan, 2)
    codec = operator._codec
    from apache_beam.utils.windowed_value import WindowedValue

    w = window.IntervalWindow(0, 5)
    # The runner sees the GroupByKey's safe coders: user keys and values
    # the runner does not know are length-prefixed bytes.
    element = codec.pre_impl.encode_nested(WindowedValue((b"a", b"1"), 1, (w,)))
    key = codec.key_impl.encode_nested(b"a")
    row = R.data("gbk:" + group_op.name, element, 0, R.key_group(key, 2), key)
    # Element, no step yet: buffered, held at the end of its window.
    store = DictStore()
    buffered = operator.run(store, [row], [[AFTER_ALL, MIN_MICROS, 0]])
    data_rows = lambda result: [r for r in result.rows if r[0] == R.DATA]
    assert data_rows(buffered) == [] and buffered.hold == w.max_timestamp().micros
    # The watermark passes the window: one on-time pane, nothing held.
    fired = operator.run(store, [], [[AFTER_ALL, 10_000_000, 0]])
    assert fired.hold is None and store.meta is not None  # the watermark is kept
    (out,) = data_rows(fired)
    decoded = operator._codec.post_impl.decode_nested(out[4])
    assert decoded.value == (b"a", [b"1"]) and decoded.windows == (w,)
    assert KeyedState(store, MIN_MICROS, MIN_MICROS).key_count == 0


def test_group_operator_cuts_the_panes_of_a_large_backlog_into_bounded_rows(tmp_path, monkeypatch):
    """Spark moves a row as one value: the panes one watermark step fires
    for a backlog leave in rows of about DATA_ROW_BYTES, every pane once."""
    monkeypatch.setattr(R, "DATA_ROW_BYTES", 4096)
    plan, _ = _planner(tmp_path)
    group_op = [op for op in plan.operators if op.kind == OperatorKind.GROUP][0]
    operator = GroupOperator(group_op, plan, 2)
    codec = operator._codec
    from apache_beam.utils.windowed_value import WindowedValue

    w = window.IntervalWindow(0, 5)
    value = b"v" * 100
    rows = []
    for i in range(500):
        key = codec.key_impl.encode_nested(b"k%03d" % i)
        element = codec.pre_impl.encode_nested(WindowedValue((b"k%03d" % i, value), 1, (w,)))
        rows.append(R.data("gbk:" + group_op.name, element, 0, 0, key))
    store = DictStore()
    operator.run(store, rows, [[AFTER_ALL, MIN_MICROS, 0]])
    fired = operator.run(store, [], [[AFTER_ALL, 10_000_000, 0]])
    out = [r for r in fired.rows if r[0] == R.DATA]
    pane_bytes = len(codec.post_impl.encode_nested(WindowedValue((b"k000", [value]), 1, (w,))))
    assert len(out) > 10 and all(len(r[4]) < 4096 + pane_bytes for r in out)
    from beam_spark_runner.worker.grouping import decode_values

    keys = sorted(kv[0] for r in out for kv in decode_values(r[4], codec.post_impl))
    assert keys == [b"k%03d" % i for i in range(500)]


def test_group_operator_touches_only_keys_with_data_or_a_due_wake_up(tmp_path, monkeypatch):
    plan, _ = _planner(tmp_path)
    group_op = [op for op in plan.operators if op.kind == OperatorKind.GROUP][0]
    operator = GroupOperator(group_op, plan, 2)
    codec = operator._codec
    from apache_beam.utils.windowed_value import WindowedValue

    def row(key, ts):
        w = window.IntervalWindow(ts - ts % 5, ts - ts % 5 + 5)
        element = codec.pre_impl.encode_nested(WindowedValue((key, b"1"), ts, (w,)))
        encoded_key = codec.key_impl.encode_nested(key)
        return R.data("gbk:" + group_op.name, element, 0, 0, encoded_key)

    # 50 keys with a window ending at 5 s, one key with a window ending at 100 s.
    state = DictStore()
    operator.run(state, [row(b"k%d" % i, 1) for i in range(50)] + [row(b"late", 97)], [[AFTER_ALL, MIN_MICROS, 0]])
    restored = []
    original = operator._spec.restore
    monkeypatch.setattr(operator._spec, "restore", lambda snap, clock=None: restored.append(1) or original(snap, clock))
    # A batch without data whose watermark passes nothing: no key restored.
    quiet = operator.run(state, [], [[AFTER_ALL, 2_000_000, 0]])
    assert restored == [] and quiet.hold == 4_999_999
    # The watermark passes 5 s: exactly the 50 keys whose window ends there.
    fired = operator.run(state, [], [[AFTER_ALL, 10_000_000, 0]])
    assert len(restored) == 50
    assert len([r for r in fired.rows if r[0] == R.DATA]) == 1  # one block, 50 panes
    assert fired.hold == 99_999_999


def test_beam_spark_plan_prints_the_streaming_chain_for_a_test_stream_pipeline(tmp_path, capsys):
    from beam_spark_runner.cli import plan_main

    path = tmp_path / "pipeline.pb"
    path.write_bytes(pipeline_proto_of(_two_gbk_pipeline()).SerializeToString())
    assert plan_main([str(path)]) == 0
    printed = capsys.readouterr().out
    assert "Source TestStream" in printed and "GroupByKey as transformWithState" in printed


def test_only_local_checkpoint_directories_get_the_file_system_checkpoint_manager():
    from beam_spark_runner.execution.streaming_query import _is_local_path

    assert _is_local_path("/tmp/run") and _is_local_path("file:///tmp/run") and _is_local_path("relative/dir")
    assert not _is_local_path("hdfs://nn:8020/run") and not _is_local_path("s3a://bucket/run")


def test_source_partitions_keep_a_key_groups_rows_together_and_in_order():
    """One key's elements of one TestStream event reach its keyed operator in
    the event's order only if they are not dealt over several input
    partitions (Spark's shuffle may fetch those in any order)."""
    kg_a, kg_b = R.key_group_labels(2)
    keyed = [R.data("keyed", b"%d" % i, 7, kg_a if i % 3 else kg_b, b"k%d" % (i % 3)) for i in range(9)]
    blocks = [R.data("plain", b"block%d" % i, 7) for i in range(4)]
    rows = blocks[:2] + keyed + blocks[2:] + [R.status(1, b"{}")]
    parts = R.input_partitions(rows, 2)
    assert sorted(r for part in parts for r in part) == sorted(rows)
    for kg in (kg_a, kg_b):
        (holder,) = [p for p in parts if any(r[2] == kg and r[3] is not None for r in p)]
        assert [r for r in holder if r[3] is not None and r[2] == kg] == [r for r in keyed if r[2] == kg]
    # Unkeyed rows still spread over both partitions.
    assert all(any(r[3] is None for r in p) for p in parts)


def _side_input_pipeline(side_windowing):
    from apache_beam.transforms import trigger

    p = beam.Pipeline(options=PipelineOptions(["--streaming"]))
    stream = (
        TestStream()
        .add_elements(["m"], tag="main")
        .add_elements([window.TimestampedValue("model-1", 1)], tag="side")
        .advance_watermark_to_infinity(tag="main")
        .advance_watermark_to_infinity(tag="side")
    )
    streams = p | stream
    side = streams["side"] | "SideWindow" >> side_windowing(window, trigger)
    streams["main"] | "Use" >> beam.Map(lambda m, s: (m, s), beam.pvalue.AsSingleton(side))
    return p


def test_an_unbounded_triggered_side_input_in_the_global_window_is_viewed_at_its_latest_firing():
    """Beam's "slowly updating side input" (TestStream outputs are unbounded
    PCollections): planned, and the reading operator knows to show the side
    input's latest firing rather than wait for its end."""
    from beam_spark_runner.streaming.side_input_wait import triggered_side_inputs

    p = _side_input_pipeline(
        lambda window, trigger: beam.WindowInto(
            window.GlobalWindows(),
            trigger=trigger.Repeatedly(trigger.AfterProcessingTime(1)),
            accumulation_mode=trigger.AccumulationMode.DISCARDING,
        )
    )
    plan = plan_streaming_pipeline(pipeline_proto_of(p))
    (reader,) = [op for op in plan.operators if op.side_inputs]
    ((dest, _),) = reader.side_inputs
    assert set(triggered_side_inputs(reader.side_inputs, plan.components)) == {R.dest_text(dest)}


@pytest.mark.parametrize(
    "side_windowing",
    [
        lambda window, trigger: beam.WindowInto(window.GlobalWindows()),
        lambda window, trigger: beam.WindowInto(
            window.FixedWindows(60),
            trigger=trigger.AfterWatermark(early=trigger.AfterCount(1)),
            accumulation_mode=trigger.AccumulationMode.DISCARDING,
        ),
    ],
    ids=["global-default-trigger", "fixed-early-firings"],
)
def test_side_inputs_that_complete_are_planned(side_windowing):
    from beam_spark_runner.streaming.side_input_wait import triggered_side_inputs

    plan = plan_streaming_pipeline(pipeline_proto_of(_side_input_pipeline(side_windowing)))
    (reader,) = [op for op in plan.operators if op.side_inputs]
    assert triggered_side_inputs(reader.side_inputs, plan.components) == {}


def test_a_bounded_triggered_side_input_in_the_global_window_is_planned():
    """It completes when its input ends (Beam's RunInference tests expect
    AsSingleton over such a Create of two elements to fail as a singleton)."""
    from apache_beam.transforms import trigger

    p = beam.Pipeline(options=PipelineOptions(["--streaming"]))
    side = (
        p
        | "Side" >> beam.Create(["model-1"])
        | beam.WindowInto(
            window.GlobalWindows(),
            trigger=trigger.Repeatedly(trigger.AfterProcessingTime(1)),
            accumulation_mode=trigger.AccumulationMode.DISCARDING,
        )
    )
    (
        p
        | TestStream().add_elements(["m"]).advance_watermark_to_infinity()
        | "Use" >> beam.Map(lambda m, s: (m, s), beam.pvalue.AsSingleton(side))
    )
    from beam_spark_runner.streaming.side_input_wait import triggered_side_inputs

    plan = plan_streaming_pipeline(pipeline_proto_of(p))
    (reader,) = [op for op in plan.operators if op.side_inputs]
    assert triggered_side_inputs(reader.side_inputs, plan.components) == {}


def _two_streams_side_input_pipeline():
    """Main and side TestStreams; the main one has an element after its
    watermark reached 100 s; the side-input Map follows a WindowInto."""
    tv = window.TimestampedValue
    p = beam.Pipeline(options=PipelineOptions(["--streaming"]))
    side = (
        p
        | "Side" >> TestStream().add_elements([tv(10, 5)]).advance_watermark_to_infinity()
        | "SideWindows" >> beam.WindowInto(window.FixedWindows(10))
    )
    (
        p
        | "Main"
        >> TestStream()
        .add_elements([tv("a", 6)])
        .advance_watermark_to(100)
        .add_elements([tv("late", 7)])
        .advance_watermark_to_infinity()
        | "MainWindows" >> beam.WindowInto(window.FixedWindows(10))
        | "UsesSide" >> beam.Map(lambda x, f: (x, f), beam.pvalue.AsSingleton(side))
    )
    return p


@pytest.mark.parametrize("reverse", [False, True])
def test_several_test_streams_move_in_lockstep(tmp_path, reverse):
    """An operator's input watermark at seq k is each stream's after its
    events up to k, whichever stream the planner reads first: the side
    stream ending at seq 1 does not carry the main stream's last event (seq
    3, to +infinity) to before the main stream's element at seq 2."""
    from beam_spark_runner.plans import OperatorKind

    plan = plan_streaming_pipeline(pipeline_proto_of(_two_streams_side_input_pipeline()))
    planner = SourcePlanner(compile_script(plan, key_groups=2), str(tmp_path))
    if reverse:
        planner._streams = tuple(reversed(planner._streams))
    (op,) = [o.name for o in plan.operators if o.kind == OperatorKind.SIDE_INPUTS]
    steps = planner.next_offset(planner.initial_offset())["steps"][op]
    wm_by_seq = {}
    for seq, wm, _, _ in steps:
        wm_by_seq[seq] = max(wm_by_seq.get(seq, MIN_MICROS), wm)
    assert wm_by_seq[1] == 100_000_000 and wm_by_seq[3] == MAX_MICROS
    assert all(wm < MAX_MICROS for seq, wm in wm_by_seq.items() if seq <= 2)


def test_a_side_input_reader_starts_its_stage_after_a_window_into():
    """The side windows a main element waits for follow from its windows at
    the reader: fused after the WindowInto, an element would wait with its
    stage-input window (global: the side input's end)."""
    from beam_spark_runner.plans import OperatorKind

    plan = plan_streaming_pipeline(pipeline_proto_of(_two_streams_side_input_pipeline()))
    (op,) = [o for o in plan.operators if o.kind == OperatorKind.SIDE_INPUTS]
    assert op.stage.sdk_transforms == ("UsesSide",)
    assert any(
        "MainWindows" in o.stage.sdk_transforms
        for o in plan.operators
        if o.kind == OperatorKind.STATELESS and o.stage is not None
    )


class _IntSum(beam.CombineFn):
    """A sum whose accumulator is the int itself."""

    def create_accumulator(self):
        return 0

    def add_input(self, acc, value):
        return acc + value

    def merge_accumulators(self, accs):
        return sum(accs)

    def extract_output(self, acc):
        return acc


def _lifted_pipeline(mode=2):
    """Sum lifted (Beam lifts a trigger counting single elements) beside a
    plain GroupByKey; `mode`: the accumulation mode's proto value."""
    from apache_beam.transforms import trigger

    p = beam.Pipeline(options=PipelineOptions(["--streaming"]))
    stream = TestStream().add_elements([window.TimestampedValue(("a", 1), 1)]).advance_watermark_to_infinity()
    windowed = (
        p
        | stream
        | beam.WindowInto(
            window.FixedWindows(10),
            trigger=trigger.AfterWatermark(early=trigger.AfterCount(1), late=trigger.AfterCount(1)),
            accumulation_mode=mode,
        )
    )
    windowed | "Sum" >> beam.CombinePerKey(_IntSum()) | "PrintSums" >> beam.Map(print)
    windowed | "Group" >> beam.GroupByKey() | "PrintGroups" >> beam.Map(print)
    return p


def _groups_by_name(plan):
    return {op.display_name: op.group for op in plan.operators if op.kind == OperatorKind.GROUP}


def test_a_group_by_key_between_a_lifted_combiners_phases_knows_its_combine_fn():
    groups = _groups_by_name(plan_streaming_pipeline(pipeline_proto_of(_lifted_pipeline())))
    (lifted,) = [g for name, g in groups.items() if name.startswith("Sum/")]
    (plain,) = [g for name, g in groups.items() if name.startswith("Group")]
    assert lifted.combine is not None and plain.combine is None
    from apache_beam.portability.api import beam_runner_api_pb2
    from apache_beam.transforms import core
    from beam_spark_runner.worker import context

    fn = core.CombineFn.from_runner_api(
        beam_runner_api_pb2.FunctionSpec.FromString(lifted.combine.combine_fn),
        context.components_context(plan_streaming_pipeline(pipeline_proto_of(_lifted_pipeline())).components),
    )
    # Streaming: a partial sum carries how many records it holds.
    assert fn.merge_accumulators([(1, 2), (2, 3)]) == (3, 5)


def test_a_retracting_combine_is_not_lifted_so_its_group_by_key_merges_nothing():
    import triggers

    plan = plan_streaming_pipeline(pipeline_proto_of(_lifted_pipeline(triggers.RETRACTING)))
    assert all(g.combine is None for g in _groups_by_name(plan).values())


def test_a_lifted_group_by_key_merges_the_accumulators_it_buffers(tmp_path):
    """Two producers each send a partial sum per micro-batch: the window
    keeps one merged accumulator, and every early pane carries exactly one,
    with the running total and record count (before, it kept and re-emitted
    all of them)."""
    plan = plan_streaming_pipeline(pipeline_proto_of(_lifted_pipeline()))
    (group_op,) = [op for op in plan.operators if op.kind == OperatorKind.GROUP and op.group.combine is not None]
    operator = GroupOperator(group_op, plan, 2)
    codec = operator._codec
    from apache_beam.utils.windowed_value import WindowedValue
    from beam_spark_runner.worker import context

    ctx = context.components_context(plan.components)
    sdk_value = ctx.coders[group_op.group.combine.data_input_coder_id].wrapped_value_coder.value_coder().get_impl()
    runner_value = codec.value_impl
    w = window.IntervalWindow(0, 10)
    empty = runner_value.decode_nested(sdk_value.encode_nested((0, 0)))
    key = codec.key_impl.encode_nested(
        codec.pre_impl.decode_nested(codec.pre_impl.encode_nested(WindowedValue((b"\x01a", empty), 1, (w,)))).value[0]
    )

    def partial_sum(acc):
        value = runner_value.decode_nested(sdk_value.encode_nested(acc))
        element = codec.pre_impl.encode_nested(WindowedValue((b"\x01a", value), w.max_timestamp(), (w,)))
        return R.data("gbk:" + group_op.name, element, 0, R.key_group(key, 2), key)

    def panes(result):
        out = []
        for r in result.rows:
            if r[0] == R.DATA:
                stream = __import__("apache_beam.coders.coder_impl", fromlist=["x"]).create_InputStream(r[4])
                while stream.size():
                    wv = codec.post_impl.decode_from_stream(stream, True)
                    out.append([sdk_value.decode_nested(runner_value.encode_nested(v)) for v in wv.value[1]])
        return out

    store, totals = DictStore(), []
    for batch in range(1, 6):
        rows = [partial_sum((1, batch)), partial_sum((2, 10 * batch))]
        result = operator.run(store, rows, [[AFTER_ALL, MIN_MICROS, batch]])
        totals.append(panes(result))
    assert totals == [[[(3 * b, 11 * sum(range(1, b + 1)))]] for b in range(1, 6)]
    (key,) = [r[3] for r in [partial_sum((1, 1))]]
    snapshot = KeyedState(store, MIN_MICROS, MIN_MICROS).load(key)
    (window_state,) = pickle.loads(snapshot)[0]
    assert len(window_state[1]) == 1  # one buffered accumulator
    on_time = operator.run(store, [], [[AFTER_ALL, 20_000_000, 6]])
    assert panes(on_time) == [[(15, 165)]]


def _spark_io_pipeline(read_written=False):
    """A Spark source -> windowed sum -> Spark sink, built from the runner's
    primitives (ReadFromSpark would ask a SparkSession for the schema)."""
    from beam_spark_runner.io.spark.planning import SparkRead, SparkReadConfig, SparkWrite, SparkWriteConfig
    from beam_spark_runner.worker import spark_rows

    schema = {
        "type": "struct",
        "fields": [
            {"name": "user", "type": "string", "nullable": True, "metadata": {}},
            {"name": "score", "type": "long", "nullable": True, "metadata": {}},
        ],
    }
    row_type = spark_rows.row_type(schema)
    read = SparkReadConfig(
        "json",
        "/in",
        None,
        (),
        schema,
        label="ReadFromSpark(in)",
        streaming=True,
        out_of_orderness_us=3_000_000,
        idle_timeout_us=9_000_000,
    )
    write = SparkWriteConfig("parquet", "/out", None, "append", (), (), schema, label="WriteToSpark(out)")
    p = beam.Pipeline(options=PipelineOptions(["--streaming"]))
    written = (
        p
        | "Read" >> SparkRead(read, row_type, bounded=False)
        | beam.WindowInto(window.FixedWindows(10))
        | beam.Map(lambda r: (r.user, r.score))
        | beam.CombinePerKey(sum)
        | beam.Map(lambda kv: row_type(kv[0], kv[1])).with_output_types(row_type)
        | "Write" >> SparkWrite(write)
    )
    if read_written:
        _ = written | beam.Map(print)
    return p


def test_spark_sources_and_sinks_are_planned_around_the_operators():
    plan = plan_streaming_pipeline(pipeline_proto_of(_spark_io_pipeline()))
    (source,) = plan.spark_sources
    (sink,) = plan.spark_sinks
    assert source.name == "Read" and source.out_of_orderness_us == 3_000_000 and source.idle_timeout_us == 9_000_000
    assert sink.name == "Write"
    readers = [op for op in plan.operators if source.dest in op.inputs]
    assert readers, "an operator reads the source's rows"
    (group,) = [op for op in plan.operators if op.kind == OperatorKind.GROUP]
    assert plan.watermark_graph[group.name].sources == ("Read",)
    assert any(sink.dest in op.output_dests() for op in plan.operators)
    text = plan.describe()
    assert "Source ReadFromSpark(in) (Spark readStream)" in text and "Sink WriteToSpark(out)" in text
    script = compile_script(plan, key_groups=2)
    assert script.spark_sources["Read"].out_of_orderness_us == 3_000_000


def test_reading_a_streaming_writes_output_is_refused_naming_the_write():
    with pytest.raises(UnsupportedPipelineError, match=r"WriteToSpark\(out\).*cannot be read"):
        plan_streaming_pipeline(pipeline_proto_of(_spark_io_pipeline(read_written=True)))


def test_a_spark_source_read_by_one_plain_stateless_stage_runs_that_stage_in_its_own_task():
    plan = plan_streaming_pipeline(pipeline_proto_of(_spark_io_pipeline()))
    (source,) = plan.spark_sources
    (reader,) = [op for op in plan.operators if source.dest in op.inputs]
    assert source.fused_operator == reader.name and reader.kind == OperatorKind.STATELESS
    assert "in the same task" in plan.describe()


def test_a_spark_source_with_two_readers_is_not_fused():
    from beam_spark_runner.io.spark.planning import SparkRead

    p = _spark_io_pipeline()
    (read,) = [t for t in p.transforms_stack[0].parts if isinstance(t.transform, SparkRead)]
    _ = read.outputs[None] | "SecondReader" >> beam.Map(print)
    plan = plan_streaming_pipeline(pipeline_proto_of(p))
    (source,) = plan.spark_sources
    assert source.fused_operator is None
