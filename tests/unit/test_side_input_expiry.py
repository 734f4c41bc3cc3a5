"""Side windows expire in streaming stages that read side inputs. First
(side_input_wait.WaitingForSides with collect=True), without Spark and
without a harness: the side input's rows, windows and main elements are
stand-ins whose window ends are given. Then stateful and splittable stages,
through the plan's own operators and Beam's SDK harness, without Spark."""

import apache_beam as beam

from beam_spark_runner.streaming.keyed_state import DictStore, KeyedState
from beam_spark_runner.streaming import rows as R, side_input_wait
from beam_spark_runner.streaming.side_input_wait import SideInputs, WaitingForSides
from tests.splittable_dofns import ScaledPositions

SIDE = "side"


class _Sides:
    """SideInputs' interface over stand-in rows: a side row's payload is its
    window end; a main row's payload is (earliest, latest) side window end."""

    dests = frozenset([SIDE])
    expiry = {SIDE: 5}  # the main input's allowed lateness
    advance = staticmethod(SideInputs.advance)
    split_ready = staticmethod(SideInputs.split_ready)

    @staticmethod
    def window_end(dest, row):
        return row

    @staticmethod
    def pending(row, seq):
        earliest, latest = row.payload
        return (row.dest, row.payload, seq, earliest, {SIDE: latest}, {SIDE: earliest})

    @staticmethod
    def state_entries(side):
        return sorted(end for rows in side.values() for end in rows)


class _Harness:
    def __init__(self):
        self.installed = []

    def install_side_inputs(self, entries):
        self.installed.append(entries)


def _side_row(end):
    return R.data(SIDE, end, 0)


def _main_row(earliest, latest):
    return R.data("main", (earliest, latest), 0)


def _step(wm, side_wm):
    return (wm, 0, {SIDE: side_wm})


def test_side_windows_go_once_the_watermark_passes_them_plus_lateness_unless_an_element_waits_for_them():
    harness = _Harness()
    waiting = WaitingForSides(_Sides(), {}, harness, collect=True)
    waiting.take([_side_row(10), _side_row(20), _side_row(40)], seq=0)
    waiting.take([_main_row(10, 20)], seq=0)  # sliding windows: needs sides ending at 10 and 20
    waiting.advance(_step(40, side_wm=15))  # 40 - 5 lateness = 35, but the element needs 10
    assert [end for end, _ in waiting.side[SIDE]] == [10, 20, 40]
    assert waiting.ready_bundles({"main": 0}) == []  # still waits: side watermark 15 < 20
    waiting.advance(_step(40, side_wm=25))
    assert waiting.ready_bundles({"main": 0}) == [(0, [(0, (10, 20))])]
    assert harness.installed[-1] == [10, 20, 40]  # the element ran with every window it needs
    waiting.advance(_step(40, side_wm=25))  # nothing waits now: windows ending before 35 go
    assert [end for end, _ in waiting.side[SIDE]] == [40]
    assert waiting.saved()["side_collected"] == {SIDE: 35}


def test_an_element_needing_an_expired_side_window_is_dropped_and_counted():
    waiting = WaitingForSides(_Sides(), {}, _Harness(), collect=True)
    waiting.take([_side_row(10), _side_row(30)], seq=0)
    waiting.advance(_step(20, side_wm=50))  # the side window ending at 10 goes (before 15)
    waiting.take([_main_row(10, 30), _main_row(30, 30)], seq=1)
    assert waiting.ready_bundles({"main": 0}) == [(1, [(0, (30, 30))])]
    assert waiting.dropped == 1


def test_without_collect_and_for_state_saved_before_expiry_side_rows_stay():
    """Without `collect` (splittable stages: residuals read side data later;
    a stateful stage collects itself, after its timers) the watermark drops
    nothing; rows saved without a window end never expire."""
    waiting = WaitingForSides(_Sides(), {}, _Harness(), collect=False)
    waiting.take([_side_row(10)], seq=0)
    waiting.advance(_step(1000, side_wm=1000))
    assert waiting.side[SIDE] == [(10, 10)]
    restored = WaitingForSides(_Sides(), {"side": {SIDE: [b"old row"]}}, _Harness(), collect=True)
    restored.advance(_step(1000, side_wm=1000))
    assert restored.side[SIDE] == [(None, b"old row")]


def test_only_beams_default_window_mapping_lets_side_windows_expire():
    from apache_beam.transforms import sideinputs, window

    assert side_input_wait._maps_via_end(sideinputs.default_window_mapping_fn(window.FixedWindows(10)))
    assert not side_input_wait._maps_via_end(sideinputs.default_window_mapping_fn(window.GlobalWindows()))
    assert not side_input_wait._maps_via_end(lambda w: w)


class _RunningSum(beam.DoFn):
    """A stateful DoFn reading a side input: per key, the running sum times it."""

    SUM = beam.transforms.userstate.CombiningValueStateSpec("sum", sum)

    def process(self, kv, factor, total=beam.DoFn.StateParam(SUM)):
        total.add(kv[1])
        yield kv[0], total.read() * factor


def test_a_stateful_stage_drops_side_windows_its_live_windows_can_no_longer_read():
    """A stateful DoFn reading a fixed-window side input (lateness 0): once
    the watermark passes a side window's end, after the step's timers fired
    and the expired windows went, the side window's rows go too (they were
    kept for the whole run before); a live window still sees its value."""
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.testing.test_stream import TestStream
    from apache_beam.transforms import window
    from apache_beam.utils.windowed_value import WindowedValue
    from beam_spark_runner.translation.planner import pipeline_proto_of, plan_streaming_pipeline
    from beam_spark_runner.streaming import operator_factory, rows as R
    from beam_spark_runner.plans import OperatorKind
    from beam_spark_runner.worker import context

    p = beam.Pipeline(options=PipelineOptions(["--streaming"]))
    streams = p | (
        TestStream()
        .add_elements([("a", 1)], tag="main")
        .add_elements([5], tag="side")
        .advance_watermark_to_infinity(tag="main")
        .advance_watermark_to_infinity(tag="side")
    )
    factor = streams["side"] | "SideWindows" >> beam.WindowInto(window.FixedWindows(10))
    _ = (
        streams["main"]
        | "MainWindows" >> beam.WindowInto(window.FixedWindows(10))
        | beam.ParDo(_RunningSum(), beam.pvalue.AsSingleton(factor))
        | beam.GroupByKey()
        | beam.Map(print)
    )
    plan = plan_streaming_pipeline(pipeline_proto_of(p))
    (op,) = [o for o in plan.operators if o.kind == OperatorKind.STATEFUL]
    operator = operator_factory.build(op, plan, 2)
    ((side, side_plan),) = op.side_inputs
    (main,) = [d for d in op.inputs if d != side]
    side_dest, main_dest = R.dest_text(side), R.dest_text(main)  # as rows name them
    side_impl = context.coder_impl(plan.components, side_plan.coder_id)
    main_coder = context.components_context(plan.components).coders[plan.keyed_dests[main]]
    key_impl = main_coder.wrapped_value_coder.key_coder().get_impl()
    main_impl = main_coder.get_impl()

    def side_row(value, start):
        # The runner holds side input elements through its safe coder: the
        # value is the SDK coder's (FastPrimitivesCoder's) encoding.
        w = window.IntervalWindow(start, start + 10)
        encoded = beam.coders.FastPrimitivesCoder().encode(value)
        return R.data(side_dest, side_impl.encode_nested(WindowedValue(encoded, start, (w,))), 0)

    def main_row(key, value, ts):
        w = window.IntervalWindow(ts - ts % 10, ts - ts % 10 + 10)
        element = main_impl.encode_nested(WindowedValue((key, value), ts, (w,)))
        return R.data(main_dest, element, 0, 0, key_impl.encode_nested(key))

    def step(wm_s, side_wm_s):
        return [[1, wm_s * 1_000_000, 0, {side_dest: side_wm_s * 1_000_000}]]

    def outputs(result):
        return _output_values(result, op, plan)

    store = DictStore()

    def side_windows():
        return len(KeyedState(store, 0, 0).extra["side"][side_dest])

    first = operator.run(store, [side_row(2, 0), side_row(3, 10), side_row(4, 20), main_row("a", 1, 5)], step(5, 30))
    assert outputs(first) == [("a", 2)] and side_windows() == 3
    # The watermark passes 10: side window [0, 10) goes; [10, 20) still serves.
    second = operator.run(store, [main_row("a", 2, 15)], step(12, 30))
    assert outputs(second) == [("a", 6)] and side_windows() == 2
    third = operator.run(store, [main_row("a", 10, 25)], step(21, 30))
    assert outputs(third) == [("a", 40)] and side_windows() == 1


def test_a_splittable_stage_drops_side_windows_once_no_residual_reads_them():
    """A splittable DoFn (one position per bundle, then a self-checkpoint)
    reading a fixed-window side input, lateness 0, run through the plan's own
    operators (the restriction stage feeds the splittable one): while a
    residual of an element in [0, 10) is left, side window [0, 10) stays
    although the watermark passed it (the residual reads it); once the
    residual is done it goes, and later windows go as the watermark passes
    them (they were kept for the whole run before)."""
    import pickle
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.testing.test_stream import TestStream
    from apache_beam.transforms import window
    from apache_beam.utils.windowed_value import WindowedValue
    from beam_spark_runner.translation.planner import pipeline_proto_of, plan_streaming_pipeline
    from beam_spark_runner.streaming import operator_factory, rows as R
    from beam_spark_runner.plans import OperatorKind
    from beam_spark_runner.worker import context

    p = beam.Pipeline(options=PipelineOptions(["--streaming"]))
    streams = p | (
        TestStream()
        .add_elements([("a", 1)], tag="main")
        .add_elements([5], tag="side")
        .advance_watermark_to_infinity(tag="main")
        .advance_watermark_to_infinity(tag="side")
    )
    factor = streams["side"] | "SideWindows" >> beam.WindowInto(window.FixedWindows(10))
    _ = (
        streams["main"]
        | "MainWindows" >> beam.WindowInto(window.FixedWindows(10))
        | beam.ParDo(ScaledPositions(), beam.pvalue.AsSingleton(factor))
        | beam.Map(print)
    )
    plan = plan_streaming_pipeline(pipeline_proto_of(p))
    (restrictions,) = [o for o in plan.operators if o.kind == OperatorKind.SIDE_INPUTS]
    (sdf,) = [o for o in plan.operators if o.kind == OperatorKind.SDF]
    ((side, side_plan),) = sdf.side_inputs
    side_dest = R.dest_text(side)  # as rows name it
    (main,) = [d for d in restrictions.inputs if d != side]
    main_dest = R.dest_text(main)
    side_impl = context.coder_impl(plan.components, side_plan.coder_id)
    main_impl = context.coder_impl(plan.components, plan.element_coders[main])

    def side_row(value, start):
        w = window.IntervalWindow(start, start + 10)
        encoded = beam.coders.FastPrimitivesCoder().encode(value)
        return R.data(side_dest, side_impl.encode_nested(WindowedValue(encoded, start, (w,))), 0)

    def step(wm_s, pt_s):
        return [[1, wm_s * 1_000_000, pt_s * 1_000_000, {side_dest: 30 * 1_000_000}]]

    def outputs(result):
        return _output_values(result, sdf, plan)

    def side_windows_and_residuals(blob):
        saved = pickle.loads(blob)
        return len(saved["side"][side_dest]), len(saved["residuals"])

    sides = [side_row(2, 0), side_row(3, 10), side_row(4, 20)]
    w = window.IntervalWindow(0, 10)
    main = R.data(main_dest, main_impl.encode_nested(WindowedValue(("a", 3), 5, (w,))), 0)
    paired = operator_factory.build(restrictions, plan, 2).run(None, sides + [main], step(5, 1))
    split_rows = [r for r in paired.rows if r.kind == R.DATA]
    operator = operator_factory.build(sdf, plan, 2)
    first = operator.run(None, sides + split_rows, step(5, 1))
    assert outputs(first) == [("a", 0)] and side_windows_and_residuals(first.blob) == (3, 1)
    # The watermark passes 10; the residual (window [0, 10)) still reads it.
    second = operator.run(first.blob, [], step(12, 2))
    assert outputs(second) == [("a", 2)] and side_windows_and_residuals(second.blob) == (3, 1)
    third = operator.run(second.blob, [], step(12, 3))
    assert outputs(third) == [("a", 4)] and side_windows_and_residuals(third.blob) == (2, 0)
    fourth = operator.run(third.blob, [], step(21, 4))
    assert outputs(fourth) == [] and side_windows_and_residuals(fourth.blob) == (1, 0)


def _output_values(result, op, plan):
    """The values of an operator's DATA rows (its one output)."""
    from apache_beam.coders.coder_impl import create_InputStream
    from beam_spark_runner.streaming import rows as R
    from beam_spark_runner.worker import context

    (out_port,) = op.stage.outputs
    impl = context.coder_impl(plan.components, out_port.coder_id)
    values = []
    for r in R.unpacked(result.rows):
        if r.kind == R.DATA:
            stream = create_InputStream(r.payload)
            while stream.size():
                values.append(impl.decode_from_stream(stream, True).value)
    return values
