"""Stable input (@RequiresStableInput) without Spark: the delay line that
runs a streaming stage one micro-batch behind its input
(streaming/stable_input.py), and how planning marks such stages."""

import pickle

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.transforms import userstate, window
from apache_beam.transforms.periodicsequence import PeriodicImpulse

from beam_spark_runner.errors import UnsupportedPipelineError
from beam_spark_runner.plans import Dest, Operator, OperatorKind
from beam_spark_runner.streaming import rows as R
from beam_spark_runner.streaming import stable_input
from beam_spark_runner.streaming.keyed_state import KEYS, DictStore
from beam_spark_runner.streaming.operators import KeyGroupResult
from beam_spark_runner.streaming.stable_input import HeldBatch, StableInputOperator
from beam_spark_runner.streaming.watermarks import MAX_MICROS, MIN_MICROS
from beam_spark_runner.translation import requirements
from beam_spark_runner.translation.planner import pipeline_proto_of, plan_streaming_pipeline
from tests.stable_input_dofn import StableParDo


def _op(kind=OperatorKind.STATEFUL, summarize=False):
    return Operator(kind, "stage", "Stable", (), stable_input=True, summarize_holds=summarize)


def _row(payload, seq):
    return R.data("materialize:pc", payload, seq, 0)


class _RecordingInner:
    """A keyed operator that records what it ran, emits its rows' payloads
    and holds at the earliest payload it saw (as an int)."""

    def __init__(self, per_key):
        self.calls = []
        self.per_key = per_key

    def run(self, state, data_rows, steps, draining=False):
        self.calls.append(([r.payload for r in data_rows], steps, draining))
        if self.per_key:
            seen = state.get_meta()
            total = (int(seen) if seen else 0) + len(data_rows)
            state.put_meta(str(total).encode())
            state.put_many(KEYS, [(r.payload, b"x") for r in data_rows])
            blob = None
        else:
            total = (pickle.loads(state) if state else 0) + len(data_rows)
            blob = pickle.dumps(total)
        out = [R.data("materialize:out", r.payload, r.seq) for r in data_rows]
        hold = min((int(r.payload) for r in data_rows), default=None)
        return KeyGroupResult(blob, out, hold)


@pytest.mark.parametrize("per_key", [True, False])
def test_each_batch_runs_the_stage_on_the_rows_and_steps_of_the_batch_before(per_key):
    inner = _RecordingInner(per_key)
    op = StableInputOperator(inner, _op(), per_key=per_key, stateless=False)
    store, blob = DictStore(), None

    def run(rows, steps):
        nonlocal blob
        result = op.run(store if per_key else blob, rows, steps)
        if not per_key:
            blob = result.blob
        return result

    first = run([_row(b"5", 1), _row(b"7", 2)], [[3, 10, 100]])
    # Nothing ran yet: the rows wait in the checkpoint, the output
    # watermark waits at the start, and the next batch is asked for now.
    assert inner.calls == [([], None, False)]
    assert [r for r in first.rows if r.kind == R.DATA] == []
    assert first.hold == MIN_MICROS and first.wake == 100
    second = run([_row(b"9", 4)], [[5, 20, 200]])
    assert inner.calls[1] == ([b"5", b"7"], ((3, 10, 100),), False)
    assert [r.payload for r in second.rows] == [b"5", b"7"]
    # Held at what the stage ran to (10) and its own holds (5).
    assert second.hold == 5 and second.wake == 200
    third = run([], [[6, MAX_MICROS, 300]])
    assert inner.calls[2] == ([b"9"], ((5, 20, 200),), False)
    assert third.hold == 9 and third.wake == 300  # the stored batch moves the watermark: one more
    fourth = run([], [[7, MAX_MICROS, 300]])
    assert inner.calls[3] == ([], ((6, MAX_MICROS, 300),), False)
    # The stage ran to the end of time: nothing held, nothing to wake for.
    assert fourth.hold is None and fourth.wake is None
    if per_key:
        # The wrapped operator's meta value and key table stay its own.
        _, inner_meta = stable_input.load_slot(store.meta, "Stable")
        assert inner_meta == b"3" and sorted(store.tables[KEYS]) == [b"5", b"7", b"9"]
    else:
        held, inner_blob = stable_input.load_slot(blob, "Stable")
        assert pickle.loads(inner_blob) == 3 and held.rows == ()


def test_a_replayed_batch_runs_the_stage_on_what_the_batch_before_stored_whatever_it_reads_now():
    inner = _RecordingInner(per_key=False)
    op = StableInputOperator(inner, _op(OperatorKind.STATELESS), per_key=False, stateless=False)
    committed = op.run(None, [_row(b"1", 1), _row(b"2", 1)], [[2, 10, 100]]).blob
    # The batch after it ran, then failed (a killed driver): Spark runs it
    # again from the committed state, and upstream hands it other rows.
    op.run(committed, [_row(b"3", 3)], [[4, 20, 200]])
    op.run(committed, [_row(b"4", 3), _row(b"5", 3)], [[4, 20, 200]])
    assert inner.calls[1][0] == inner.calls[2][0] == [b"1", b"2"]


def test_a_stateless_stage_gets_the_held_rows_alone():
    class Stateless:
        def __init__(self):
            self.runs = []

        def run(self, rows):
            self.runs.append([r.payload for r in rows])
            return [R.data("materialize:out", r.payload, r.seq) for r in rows]

    inner = Stateless()
    op = StableInputOperator(inner, _op(OperatorKind.STATELESS), per_key=False, stateless=True)
    blob = op.run(None, [_row(b"1", 1)], [[2, 10, 100]]).blob
    result = op.run(blob, [], [[3, 20, 200]])
    assert inner.runs == [[b"1"]] and [r.payload for r in result.rows] == [b"1"]
    assert result.hold == 10 and result.wake == 200
    # Nothing held any more and the stage ran to the end: no state.
    result = op.run(result.blob, [], [[4, MAX_MICROS, 300]])
    result = op.run(result.blob, [], [[5, MAX_MICROS, 300]])
    assert result.hold is None and result.wake is None


def test_holds_are_summarized_with_the_watermark_the_stage_ran_to():
    inner = _RecordingInner(per_key=False)
    op = StableInputOperator(inner, _op(OperatorKind.STATELESS, summarize=True), per_key=False, stateless=False)
    blob = op.run(None, [], [[1, 10, 100]]).blob
    result = op.run(blob, [], [[2, 20, 200]])
    assert result.hold == 10 and result.hold_summary is not None


def test_a_slot_of_another_format_version_is_refused_naming_the_operator():
    with pytest.raises(ValueError, match="Stable: .*format version 7; this runner reads version 1"):
        stable_input.load_slot(pickle.dumps({"v": 7}), "Stable")
    assert stable_input.load_slot(None, "Stable") == (HeldBatch(), None)


class _Emit(beam.DoFn):
    def process(self, element):
        yield element


class _Count(beam.DoFn):
    COUNT = userstate.ReadModifyWriteStateSpec("count", beam.coders.VarIntCoder())

    def process(self, element, count=beam.DoFn.StateParam(COUNT)):
        count.write((count.read() or 0) + 1)
        yield element


def _stream_pipeline(stable):
    p = beam.Pipeline(options=PipelineOptions(["--streaming"]))
    keyed = (
        p
        | TestStream().add_elements([("a", 1)]).advance_watermark_to_infinity()
        | beam.WindowInto(window.FixedWindows(5))
        | beam.GroupByKey()
    )
    _ = keyed | "Effect" >> stable(_Emit())
    _ = keyed | "Keyed" >> beam.Map(lambda kv: (kv[0], 1)) | "Counted" >> stable(_Count())
    return p


def test_planning_keys_a_stateless_stage_that_requires_stable_input_and_marks_a_stateful_one():
    plan = plan_streaming_pipeline(pipeline_proto_of(_stream_pipeline(StableParDo)))
    effect = next(op for op in plan.operators if op.stage is not None and "Effect" in op.stage.sdk_transforms)
    assert effect.kind == OperatorKind.STATELESS and effect.stable_input and effect.is_keyed
    # The DoFn starts its stage: its input is what is held, nothing
    # computed after it.
    assert effect.stage.stable_input == ("Effect",) and effect.stage.sdk_transforms[0] == "Effect"
    # It reads one element per row, spread over the key-groups that hold it.
    (dest,) = effect.inputs
    assert dest == Dest.materialized(dest.name) and plan.keyed_dests[dest] is None
    assert "Operator 3: Effect  [transformWithState by key-group, plain Python, input held" in plan.describe()
    assert effect.name in plan.watermark_graph
    counted = next(op for op in plan.operators if op.stage is not None and "Counted" in op.stage.sdk_transforms)
    assert counted.kind == OperatorKind.STATEFUL and counted.stable_input
    assert "input held one micro-batch in the checkpoint (stable input)" in plan.describe()
    # Without the requirement neither is delayed.
    plain = plan_streaming_pipeline(pipeline_proto_of(_stream_pipeline(beam.ParDo)))
    assert not any(op.stable_input for op in plain.operators)
    assert not any(op.is_keyed and op.kind == OperatorKind.STATELESS for op in plain.operators)


def test_the_stable_input_requirement_is_accepted_at_submission():
    proto = pipeline_proto_of(_stream_pipeline(StableParDo))
    assert "beam:requirement:pardo:stable_input:v1" in proto.requirements
    assert requirements.check_requirements(proto) == []


class _Split(beam.DoFn):
    def process(self, element, side):
        yield element


def test_stable_input_in_a_stage_reading_side_inputs_is_refused_naming_the_transform():
    p = beam.Pipeline(options=PipelineOptions(["--streaming"]))
    side = p | "Side" >> beam.Create([1])
    _ = (
        p
        | PeriodicImpulse(start_timestamp=0, stop_timestamp=2, fire_interval=1)
        | "Uses" >> StableParDo(_Split(), beam.pvalue.AsList(side))
    )
    with pytest.raises(UnsupportedPipelineError, match="Uses: requires stable input .* reads side inputs"):
        plan_streaming_pipeline(pipeline_proto_of(p))
