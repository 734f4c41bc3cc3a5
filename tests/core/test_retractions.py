"""RETRACTING: the Dataflow paper's session example and two-stage aggregation."""

import pickle

import pytest
from apache_beam.transforms import combiners
from apache_beam.transforms import core
from apache_beam.transforms import trigger as T
from apache_beam.transforms import window as W
from apache_beam.transforms.window import WindowFn
from apache_beam.utils.windowed_value import WindowedValue

import triggers
from triggers import RETRACTING
from triggers import ReduceSpec
from triggers import Retraction
from triggers import is_retraction
from triggers import map_pane
from triggers import retractable
from triggers.retractions import combine

# (value, event time): the Dataflow paper's session example, scaled to a
# 10-second gap.  8 @ 38 bridges the sessions [30, 40) and [45, 60).
PAPER = [(5, 1), (7, 30), (3, 45), (4, 47), (3, 50), (8, 38)]


def _stage1(mode, data=PAPER):
    """Per-session sums, firing after every element (early) and at the end."""
    fn = W.Sessions(10)
    red = ReduceSpec(fn, T.AfterWatermark(early=T.AfterCount(1)), mode).new_reducer()
    out = []
    for v, t in data:
        wv = WindowedValue(v, t, fn.assign(WindowFn.AssignContext(t, v)))
        out.extend(red.process([wv], -100))
    out.extend(red.advance_watermark(1000))
    return [map_pane(sum, wv.value) for wv in out]


def _stage2(mode, stage1_outputs):
    """Sum of all sessions: a global window that fires per element."""
    red = ReduceSpec(W.GlobalWindows(), T.Repeatedly(T.AfterCount(1)), T.AccumulationMode.ACCUMULATING).new_reducer()
    last = None
    for x in stage1_outputs:
        for wv in red.process([WindowedValue(x, 0, (W.GlobalWindow(),))], -100):
            last = combine(sum, wv.value)
    return last


def test_paper_session_example_retracts_7_and_10_then_emits_25():
    outs = _stage1(RETRACTING)
    assert outs == [
        5,
        7,
        3,
        Retraction(3),
        7,  # 4 @ 47 joins 3 @ 45
        Retraction(7),
        10,  # 3 @ 50
        # 8 @ 38 bridges [30, 40) and [45, 60): retract both, emit the merge.
        Retraction(7),
        Retraction(10),
        25,
        # Watermark passes: on-time panes supersede the early ones.
        Retraction(5),
        5,
        Retraction(25),
        25,
    ]


def test_two_stage_sum_correct_under_retracting_double_counted_under_accumulating():
    total = sum(v for v, _ in PAPER)
    assert _stage2(None, _stage1(RETRACTING)) == total
    accumulated = _stage2(None, _stage1(T.AccumulationMode.ACCUMULATING))
    assert accumulated > total  # every re-fired pane is counted again
    discarded = _stage1(T.AccumulationMode.DISCARDING)
    assert not any(is_retraction(x) for x in discarded)


def test_retractable_invertible_combiners_subtract():
    xs = [1, 2, 3, Retraction(2), 10]
    assert combine(sum, xs) == 14
    assert combine(combiners.CountCombineFn(), xs) == 3
    assert combine(combiners.MeanCombineFn(), xs) == pytest.approx(14 / 3)


def test_retractable_non_invertible_combiners_recompute():
    xs = [1, 9, 3, Retraction(9)]
    assert combine(max, xs) == 3
    assert combine(min, [4, 1, Retraction(1), 2]) == 2
    assert combine(combiners.TopCombineFn(2), [5, 1, 7, Retraction(7)]) == [5, 1]
    with pytest.raises(ValueError):
        combine(max, [1, Retraction(2)])


def test_retractable_merge_accumulators():
    fn = retractable(max)
    a = fn.add_input(fn.add_input(fn.create_accumulator(), 5), 9)
    b = fn.add_input(fn.create_accumulator(), Retraction(9))
    assert fn.extract_output(fn.merge_accumulators([a, b])) == 5
    s = retractable(sum)
    assert isinstance(s, core.CombineFn) and retractable(s) is s


def test_retraction_wrapper_api():
    r = Retraction([1, 2])
    assert is_retraction(r) and not is_retraction([1, 2])
    assert r == Retraction([1, 2]) and r != [1, 2]
    assert hash(r) == hash(Retraction([1, 2]))
    assert pickle.loads(pickle.dumps(r)) == r
    assert map_pane(len, r) == Retraction(2) and map_pane(len, [1]) == 1


def test_named_constant_matches_proto_and_windowing():
    from apache_beam.portability.api import beam_runner_api_pb2

    assert triggers.RETRACTING == beam_runner_api_pb2.AccumulationMode.RETRACTING
    windowing = core.Windowing(W.FixedWindows(10), T.AfterCount(1), accumulation_mode=triggers.RETRACTING)
    assert ReduceSpec.from_windowing(windowing).accumulation_mode == 3


def test_retracting_batch_with_repeated_trigger():
    from triggers.batch import group_by_window

    fn = W.FixedWindows(10)
    windowing = core.Windowing(fn, T.AfterWatermark(late=T.AfterCount(1)), triggers.RETRACTING)
    wvs = [WindowedValue(t, t, fn.assign(WindowFn.AssignContext(t))) for t in [1, 2, 15]]
    out = list(group_by_window(windowing, 'k', wvs))
    # Batch: one on-time pane per window, nothing to retract.
    assert sorted(wv.value[1] for wv in out) == [[1, 2], [15]]
    assert not any(is_retraction(wv.value[1]) for wv in out)
