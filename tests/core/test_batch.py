"""triggers.batch.group_by_window against Beam's own batch trigger driver.

Beam's Python batch driver does not close windows as the model does
(triggers/closing.py): it never marks the on-time pane of a non-global window
``is_last`` and drops the data of a window whose trigger has not finished at
the end of input. So:
 * for merging window fns, ours with Beam's Python closing rules
   (``differential.BEAM_PYTHON``) must equal Beam's output exactly;
 * for the others, ours (the model) must equal ``_model_of``(Beam's output):
   Beam's panes plus what closing the window adds, derived independently
   below from the window's input.
"""

import collections
import itertools
import random

import pytest
from apache_beam.transforms import trigger as T
from apache_beam.transforms import window as W
from apache_beam.transforms.core import Windowing
from apache_beam.utils.windowed_value import WindowedValue

from apache_beam.utils.windowed_value import PaneInfo
from apache_beam.utils.windowed_value import PaneInfoTiming

from tests.core.differential import BEAM_PYTHON
from tests.core.windowfns import BucketMerging
from tests.core.windowfns import ParityWindows
from triggers.batch import group_by_window
from triggers.machines import compile_trigger

WINDOW_FNS = {
    'global': W.GlobalWindows(),
    'fixed': W.FixedWindows(10),
    'fixed_offset': W.FixedWindows(7, 3),
    'sliding': W.SlidingWindows(10, 3),
    'sessions': W.Sessions(4),
    'custom': ParityWindows(),
    'custom_merging': BucketMerging(),
}
COMBINERS = {
    'eow': W.TimestampCombiner.OUTPUT_AT_EOW,
    'earliest': W.TimestampCombiner.OUTPUT_AT_EARLIEST,
    'latest': W.TimestampCombiner.OUTPUT_AT_LATEST,
}
TRIGGERS = {
    'default': T.DefaultTrigger(),
    'count2': T.AfterCount(2),
    'count1': T.AfterCount(1),
    'always': T.Always(),
    'never': T._Never(),
    'early': T.AfterWatermark(early=T.AfterCount(3)),
    'early_late': T.AfterWatermark(early=T.AfterCount(2), late=T.AfterCount(1)),
    'repeat2': T.Repeatedly(T.AfterCount(2)),
    'each': T.AfterEach(T.AfterCount(2), T.AfterWatermark()),
    'or_finally': T.OrFinally(T.Repeatedly(T.AfterCount(2)), T.AfterCount(5)),
    'all': T.AfterAll(T.AfterCount(2), T.AfterWatermark()),
}


def _input(window_fn, seed, n=40):
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        t = rnd.randrange(0, 60)
        out.append(WindowedValue('v%d' % i, t, window_fn.assign(W.WindowFn.AssignContext(t, 'v%d' % i))))
    return out


def _canon(panes):
    rows = []
    for wv in panes:
        key, values = wv.value
        values = list(values)
        rows.append((repr(key), repr(values), wv.timestamp.micros, repr(wv.windows), repr(wv.pane_info)))
    return sorted(rows)


def _beam(windowing, key, wvs):
    driver = T.create_trigger_driver(windowing, is_batch=True)
    return list(driver.process_entire_key(key, wvs))


def _model_of(windowing, key, wvs, beam_panes):
    """The panes the model gives a bounded GroupByKey of a non-merging window
    fn, from Beam's Python batch panes: all input arrives in one bundle before
    the watermark jumps to +infinity and closes every window, so per window
     * if Beam's last pane is last (the trigger finished), nothing changes;
     * if it is the ON_TIME pane (fired as the watermark passed the end of the
       window, in the advance that closes it), it becomes the last pane;
     * otherwise the window closes with its trigger unfinished and emits a
       final ON_TIME pane: all the window's values if it never fired, else
       (one bundle: a firing took everything) nothing new, i.e. no values in
       DISCARDING and all of them in ACCUMULATING mode."""
    values = collections.OrderedDict()
    for wv in wvs:
        for w in wv.windows:
            values.setdefault(w, []).append(wv)
    by_window = collections.defaultdict(list)
    for pane in beam_panes:
        by_window[pane.windows[0]].append(pane)
    discarding = windowing.accumulation_mode == T.AccumulationMode.DISCARDING
    out = []
    for w, elements in values.items():
        panes = by_window.pop(w, [])
        if panes and panes[-1].pane_info.is_last:
            out.extend(panes)
            continue
        if panes and panes[-1].pane_info.timing == PaneInfoTiming.ON_TIME:
            out.extend(panes[:-1])
            out.append(_as_last(panes[-1]))
            continue
        out.extend(panes)
        held = compile_trigger(windowing.triggerfn).has_ontime_pane or not panes
        final_values = [] if panes and discarding else [e.value for e in elements]
        out.append(
            WindowedValue(
                (key, final_values),
                _hold(windowing, w, elements) if held else w.max_timestamp(),
                (w,),
                PaneInfo(not panes, True, PaneInfoTiming.ON_TIME, len(panes), 0),
            )
        )
    assert not by_window, 'Beam emitted panes for windows without input: %s' % by_window
    return out


def _hold(windowing, window, elements):
    combiner = windowing.timestamp_combiner
    if combiner == W.TimestampCombiner.OUTPUT_AT_EARLIEST:
        return min(e.timestamp for e in elements)
    if combiner == W.TimestampCombiner.OUTPUT_AT_LATEST:
        return max(e.timestamp for e in elements)
    return window.max_timestamp()


def _as_last(pane, timing=None):
    p = pane.pane_info
    return WindowedValue(
        pane.value,
        pane.timestamp,
        pane.windows,
        PaneInfo(
            p.is_first, True, p.timing if timing is None else timing, p.index, 0 if timing else p.nonspeculative_index
        ),
    )


def _check(windowing, seed):
    wvs = _input(windowing.windowfn, seed)
    beam = _beam(windowing, 'k', list(wvs))
    if isinstance(windowing.triggerfn, T._Never):
        # Beam's batch driver runs Never as Always, whose one firing per window
        # (everything arrives in one bundle) is an EARLY pane with all the
        # window's values. Under the model Never never fires and the window's
        # closing emits those values: the same pane, ON_TIME and last.
        # (In the global window Beam's Always takes its batch fast path, which
        # stamps MIN_TIMESTAMP; the model stamps by the timestamp combiner.)
        expected = [_as_last(p, PaneInfoTiming.ON_TIME) for p in beam]
        if isinstance(windowing.windowfn, W.GlobalWindows):
            ts = _hold(windowing, W.GlobalWindow(), wvs)
            expected = [WindowedValue(p.value, ts, p.windows, p.pane_info) for p in expected]
        ours = list(group_by_window(windowing, 'k', list(wvs)))
        assert _canon(ours) == _canon(expected)
    elif windowing.windowfn.is_merging():
        ours = list(group_by_window(windowing, 'k', list(wvs), BEAM_PYTHON))
        assert _canon(ours) == _canon(beam)
        ours = list(group_by_window(windowing, 'k', list(wvs)))
    else:
        ours = list(group_by_window(windowing, 'k', list(wvs)))
        assert _canon(ours) == _canon(_model_of(windowing, 'k', wvs, beam))
    for wv in ours:
        assert isinstance(wv.value[1], list)
    return ours


@pytest.mark.parametrize('wfn,comb', list(itertools.product(WINDOW_FNS, COMBINERS)))
def test_default_trigger_matches_beam(wfn, comb):
    for mode in (T.AccumulationMode.DISCARDING, T.AccumulationMode.ACCUMULATING):
        for lateness in (0, 5):
            w = Windowing(WINDOW_FNS[wfn], T.DefaultTrigger(), mode, COMBINERS[comb], lateness)
            for seed in range(3):
                _check(w, seed)


@pytest.mark.parametrize(
    'wfn,trig',
    list(
        itertools.product(
            ['global', 'fixed', 'sliding', 'sessions', 'custom', 'custom_merging'],
            [t for t in TRIGGERS if t != 'default'],
        )
    ),
)
def test_triggers_in_batch_match_beam(wfn, trig):
    for mode in (T.AccumulationMode.DISCARDING, T.AccumulationMode.ACCUMULATING):
        for comb in COMBINERS.values():
            w = Windowing(WINDOW_FNS[wfn], TRIGGERS[trig], mode, comb, 3)
            _check(w, 7)


def test_default_windowing_fast_path_shape():
    w = Windowing(W.GlobalWindows())
    assert w.is_default()
    out = _check(w, 1)
    assert len(out) == 1 and len(out[0].value[1]) == 40


def test_transformed_timestamp_combiner_matches_beam():
    from tests.core.transcript_harness import CustomTimestampingFixedWindowsWindowFn

    w = Windowing(
        CustomTimestampingFixedWindowsWindowFn(10),
        T.DefaultTrigger(),
        T.AccumulationMode.DISCARDING,
        W.TimestampCombiner.OUTPUT_AT_EARLIEST_TRANSFORMED,
    )
    out = _check(w, 3)
    assert all(int(wv.timestamp) >= 100 for wv in out)


def test_values_keep_input_order_per_window():
    w = Windowing(W.FixedWindows(10))
    wvs = [WindowedValue(i, t, (W.IntervalWindow(0, 10),)) for i, t in enumerate([5, 1, 3])]
    (out,) = list(group_by_window(w, 'k', wvs))
    assert out.value == ('k', [0, 1, 2])


def test_retracting_default_trigger_batch_is_one_pane():
    w = Windowing(W.Sessions(4), T.DefaultTrigger(), 3)
    out = list(group_by_window(w, 'k', _input(w.windowfn, 2)))
    beam = _beam(Windowing(W.Sessions(4), T.DefaultTrigger(), 2), 'k', _input(w.windowfn, 2))
    # Each session's one ON_TIME pane is its last: the watermark passes the
    # end of the session and closes it in one advance.
    assert _canon(out) == _canon([_as_last(p) for p in beam])
