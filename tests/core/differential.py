"""Runs the same event script through Beam's GeneralTriggerDriver and ours."""

from apache_beam.transforms import trigger as T
from apache_beam.transforms.core import Windowing
from apache_beam.transforms.window import WindowFn
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

from tests.core.transcript_harness import pane_description
from triggers import ReduceSpec
from triggers.closing import ClosingRules


class BeamPythonClosing(ClosingRules):
    """Closing rules that reproduce Beam's Python trigger driver, which does not
    follow the model there: a window whose trigger has not finished is dropped
    at expiry without a final pane, no pane is marked ``is_last`` for that
    reason, and empty panes are emitted like any other. Only for comparing the
    rest of the driver (firing, merging, pane counters, timestamps) with Beam's
    Python driver; triggers.closing has the model's rules."""

    __slots__ = ()
    closes_windows = False

    def should_emit(self, is_empty, is_final, timing):
        return True


BEAM_PYTHON = BeamPythonClosing()


class _FrozenClock(object):
    def time(self):
        return 0


def _bundle(window_fn, ts_list):
    return [WindowedValue(t, t, window_fn.assign(WindowFn.AssignContext(t, t))) for t in ts_list]


def _key(d):
    return tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in d.items() if k != 'retraction'))


def run_beam(window_fn, trigger_fn, mode, combiner, lateness, script):
    driver = T.GeneralTriggerDriver(Windowing(window_fn, trigger_fn, mode, combiner, lateness), _FrozenClock())
    state = T.InMemoryUnmergedState()
    wm = MIN_TIMESTAMP
    steps = []
    for action, arg in script:
        out = []
        if action == 'input':
            out.extend(driver.process_elements(state, _bundle(window_fn, arg), wm, wm))
        else:
            wm = arg
        fired = state.get_and_clear_timers(wm)
        while fired:
            for w, (name, dom, ts, _) in fired:
                out.extend(driver.process_timer(w, name, dom, ts, state))
            fired = state.get_and_clear_timers(wm)
        steps.append(sorted(_key(pane_description(wv)) for wv in out))
    return steps


def run_ours(window_fn, trigger_fn, mode, combiner, lateness, script):
    reducer = ReduceSpec(window_fn, trigger_fn, mode, combiner, lateness, closing=BEAM_PYTHON).new_reducer()
    wm = MIN_TIMESTAMP
    steps = []
    for action, arg in script:
        out = []
        if action == 'input':
            out.extend(reducer.process(_bundle(window_fn, arg), wm))
        else:
            wm = arg
        out.extend(reducer.advance_watermark(wm))
        steps.append(sorted(_key(pane_description(wv)) for wv in out))
    return steps
