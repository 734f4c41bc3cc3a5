"""Differential property test: our reduce driver vs Beam's GeneralTriggerDriver.

Random window fns (fixed, sliding, sessions), trigger trees, lateness,
timestamp combiners and DISCARDING/ACCUMULATING, driven by a random script of
bundles and watermark moves; every step must produce the same panes.

Our driver runs with ``differential.BEAM_PYTHON`` closing rules here: Beam's
Python driver does not close windows as the model does (no final pane at
expiry, no ``is_last`` for it, empty panes always emitted); the model's
closing is checked by the transcripts (tests/core/data/closing.yaml).
Other known, deliberate divergences (each written down with the correct
answer in tests/core/data/beam_divergences.yaml) are kept out of the
comparison:
 * watermarks are half-integers while timestamps are integers, so the
   watermark never sits exactly on ``window.end + allowed_lateness``, where
   Beam's Python driver still accepts data and we (like the Java SDK) do not;
 * Beam's Python driver never garbage-collects windows, so a late element can
   merge into a session that expired long ago.  We compare every step up to
   the first bundle in which an element's window overlaps a window our driver
   has already garbage-collected.
"""

from apache_beam.transforms import trigger as T
from apache_beam.transforms import window as W
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from tests.core.differential import BEAM_PYTHON
from tests.core.differential import _bundle
from tests.core.differential import run_beam
from tests.core.differential import run_ours
from triggers import ReduceSpec
from apache_beam.utils.timestamp import MIN_TIMESTAMP

leaf = st.one_of(
    st.just(T.DefaultTrigger()),
    st.integers(1, 3).map(T.AfterCount),
    st.just(T.AfterWatermark()),
    st.just(T.Always()),
    st.just(T._Never()),
)


def _extend(children):
    return st.one_of(
        children.map(T.Repeatedly),
        st.tuples(st.one_of(st.none(), children), st.one_of(st.none(), children)).map(
            lambda el: T.AfterWatermark(early=el[0], late=el[1])
        ),
        st.tuples(children, children).map(lambda c: T.AfterAny(*c)),
        st.tuples(children, children).map(lambda c: T.AfterAll(*c)),
        st.tuples(children, children).map(lambda c: T.AfterEach(*c)),
        st.tuples(children, children).map(lambda c: T.OrFinally(*c)),
    )


triggers = st.recursive(leaf, _extend, max_leaves=4)

window_fns = st.one_of(
    st.integers(2, 10).map(W.FixedWindows),
    st.tuples(st.integers(4, 10), st.integers(1, 3)).map(lambda sp: W.SlidingWindows(*sp)),
    st.integers(1, 8).map(W.Sessions),
)

combiners = st.sampled_from(
    [W.TimestampCombiner.OUTPUT_AT_EOW, W.TimestampCombiner.OUTPUT_AT_EARLIEST, W.TimestampCombiner.OUTPUT_AT_LATEST]
)

events = st.lists(
    st.one_of(
        st.tuples(st.just('input'), st.lists(st.integers(0, 40), min_size=1, max_size=4)),
        st.tuples(st.just('advance'), st.integers(0, 12)),
    ),
    min_size=1,
    max_size=8,
)


def _script(evts):
    wm = -5
    out = []
    for kind, arg in evts:
        if kind == 'input':
            out.append(('input', arg))
        else:
            wm += arg
            out.append(('watermark', wm + 0.5))
    return out


def _windows(reducer):
    return {st.window for st in reducer.state.windows.values()}


def _comparable_prefix(window_fn, trigger_fn, mode, combiner, lateness, script):
    """Number of leading steps unaffected by Beam never collecting windows."""
    if not window_fn.is_merging():
        return len(script)
    reducer = ReduceSpec(window_fn, trigger_fn, mode, combiner, lateness, closing=BEAM_PYTHON).new_reducer()
    collected = []
    wm = MIN_TIMESTAMP
    for i, (action, arg) in enumerate(script):
        before = _windows(reducer)
        if action == 'input':
            bundle = _bundle(window_fn, arg)
            if any(w.start < g.end and g.start < w.end for wv in bundle for w in wv.windows for g in collected):
                return i
            reducer.process(bundle, wm)
        else:
            wm = arg
        before |= _windows(reducer)
        reducer.advance_watermark(wm)
        collected.extend(before - _windows(reducer))
    return len(script)


@settings(max_examples=1500, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(window_fns, triggers, st.sampled_from([1, 2]), combiners, st.sampled_from([0, 3, 10]), events)
def test_same_panes_as_beams_python_driver(window_fn, trigger_fn, mode, combiner, lateness, evts):
    script = _script(evts)
    n = _comparable_prefix(window_fn, trigger_fn, mode, combiner, lateness, script)
    script = script[:n]
    beam = run_beam(window_fn, trigger_fn, mode, combiner, lateness, script)
    ours = run_ours(window_fn, trigger_fn, mode, combiner, lateness, script)
    assert ours == beam, (window_fn, trigger_fn, mode, combiner, lateness, script)


def _run_raw(window_fn, trigger_fn, mode, combiner, lateness, script):
    reducer = ReduceSpec(window_fn, trigger_fn, mode, combiner, lateness).new_reducer()
    wm = MIN_TIMESTAMP
    out = []
    for action, arg in script:
        if action == 'input':
            out.extend(reducer.process(_bundle(window_fn, arg), wm))
        else:
            wm = arg
        out.extend(reducer.advance_watermark(wm))
    return out


@settings(max_examples=500, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(window_fns, triggers, combiners, st.sampled_from([0, 3, 10]), events)
def test_retracting_is_accumulating_plus_exact_retractions(window_fn, trigger_fn, combiner, lateness, evts):
    from triggers.retractions import unwrap

    script = _script(evts)
    acc = _run_raw(window_fn, trigger_fn, 2, combiner, lateness, script)
    ret = _run_raw(window_fn, trigger_fn, 3, combiner, lateness, script)
    additions = [wv for wv in ret if not unwrap(wv.value)[1]]
    # The additions are exactly the ACCUMULATING panes.
    assert [(wv.value, wv.timestamp, wv.windows, wv.pane_info) for wv in additions] == [
        (wv.value, wv.timestamp, wv.windows, wv.pane_info) for wv in acc
    ]
    # Every retraction undoes an earlier, not yet retracted addition, and what
    # survives is the last pane of each window that is still live downstream.
    live = []
    for wv in ret:
        values, is_ret = unwrap(wv.value)
        item = (sorted(values), wv.timestamp, wv.windows, wv.pane_info)
        if is_ret:
            assert item in live
            live.remove(item)
        else:
            live.append(item)
    assert len({w for _, _, w, _ in live}) == len(live)
