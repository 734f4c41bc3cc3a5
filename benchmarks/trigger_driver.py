"""Elements per second through our reduce driver vs Beam's Python trigger driver.

Same input, same run.  Scenarios:
 * fixed_default_batch: FixedWindows(60), default trigger, one key, bounded
   (our triggers.batch.group_by_window vs Beam's
   create_trigger_driver(is_batch=True).process_entire_key);
 * fixed_default_stream: same windowing, bundles of 100 with watermark moves
   (our KeyReducer vs Beam's GeneralTriggerDriver + InMemoryUnmergedState);
 * sessions_early_late_stream: Sessions(30),
   AfterWatermark(early=AfterCount(5), late=AfterCount(1)), accumulating,
   allowed lateness 600, out-of-order input with late elements.

Before a scenario's rates are printed, its panes are checked on one more,
untimed run of each driver on the same input: Beam's and ours must give every
window the same panes (check_equal_panes says exactly what may differ: only
how ours closes windows as Beam's model defines it), as many as in the timed
runs; if not, the script says which scenario and window differ and exits 1.

Usage: python -m benchmarks.trigger_driver [--elements N] [--repeat R]
"""

import argparse
import collections
import random
import os
import sys
import time

from apache_beam.transforms import trigger as T
from apache_beam.transforms import window as W
from apache_beam.transforms.core import Windowing
from apache_beam.transforms.window import WindowFn
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import PaneInfoTiming
from apache_beam.utils.windowed_value import WindowedValue

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.headline import headline  # noqa: E402
from triggers import ReduceSpec  # noqa: E402
from triggers.batch import group_by_window  # noqa: E402


class _Clock(object):
    def time(self):
        return 0


def make_input(window_fn, n, seed=0, disorder=20, late_fraction=0.02):
    rnd = random.Random(seed)
    out = []
    t = 0.0
    for i in range(n):
        t += rnd.expovariate(1 / 2.0)  # ~ one element every 2 s, gaps for sessions
        ts = t - rnd.uniform(0, disorder)
        if rnd.random() < late_fraction:
            ts -= rnd.uniform(60, 400)
        ts = round(ts, 3)
        out.append(WindowedValue(i, ts, window_fn.assign(WindowFn.AssignContext(ts, i))))
    return out


def bundles_and_watermarks(wvs, bundle=100, delay=30):
    out = []
    hi = MIN_TIMESTAMP
    for i in range(0, len(wvs), bundle):
        b = wvs[i : i + bundle]
        hi = max([hi] + [wv.timestamp for wv in b])
        out.append((b, hi - delay))
    return out


# Each run_* returns the number of panes it produced and, given a list `out`,
# appends the panes (WindowedValues) to it. The timed runs only count, as
# before the check existed: keeping every pane alive slowed ours down (by some
# 20% in the sessions scenario, measured), so the panes are checked on a
# separate, untimed run (check_scenario).


def _emit(panes, out):
    """How many panes `panes` (a list or an iterator) holds; also appends them
    to `out` unless it is None."""
    if out is not None:
        before = len(out)
        out.extend(panes)
        return len(out) - before
    return len(panes) if type(panes) is list else sum(1 for _ in panes)


def run_beam_stream(windowing, script, out=None):
    driver = T.GeneralTriggerDriver(windowing, _Clock())
    state = T.InMemoryUnmergedState()
    n = 0
    wm = MIN_TIMESTAMP
    for bundle, new_wm in script:
        n += _emit(driver.process_elements(state, bundle, wm, wm), out)
        wm = new_wm
        fired = state.get_and_clear_timers(wm)
        while fired:
            for w, (name, dom, ts, _) in fired:
                n += _emit(driver.process_timer(w, name, dom, ts, state), out)
            fired = state.get_and_clear_timers(wm)
    return n


def run_ours_stream(windowing, script, out=None):
    red = ReduceSpec.from_windowing(windowing).new_reducer()
    n = 0
    wm = MIN_TIMESTAMP
    for bundle, new_wm in script:
        n += _emit(red.process(bundle, wm), out)
        wm = new_wm
        n += _emit(red.advance_watermark(wm), out)
    return n


def run_beam_batch(windowing, wvs, out=None):
    driver = T.create_trigger_driver(windowing, is_batch=True)
    return _emit(driver.process_entire_key('k', wvs), out)


def run_ours_batch(windowing, wvs, out=None):
    return _emit(group_by_window(windowing, 'k', wvs), out)


def _time(fn, arg, n_elements, repeat):
    """(elements per second of the fastest of `repeat` runs, the last run's pane count)."""
    best = None
    panes = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        panes = fn(arg[0], arg[1])
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    return n_elements / best, panes


# -- the panes check ---------------------------------------------------------


class PanesDiffer(AssertionError):
    """Our driver's panes are not Beam's for a scenario."""


def check_scenario(scenario, beam_fn, ours_fn, arg, beam_count, ours_count):
    """Runs both drivers once more on the timed input, keeping their panes;
    raises PanesDiffer unless each gives as many panes as in its timed runs
    and the panes are equal (check_equal_panes)."""
    beam_panes, ours_panes = [], []
    beam_fn(arg[0], arg[1], beam_panes)
    ours_fn(arg[0], arg[1], ours_panes)
    if (len(beam_panes), len(ours_panes)) != (beam_count, ours_count):
        raise PanesDiffer(
            '%s: the timed runs gave %d/%d panes (beam/ours), the checked run %d/%d'
            % (scenario, beam_count, ours_count, len(beam_panes), len(ours_panes))
        )
    check_equal_panes(scenario, beam_panes, ours_panes)


def _pane_row(wv):
    """(values sorted, timestamp micros, is_first, timing, index,
    nonspeculative index) of a pane; its key, if any, must be 'k'."""
    value = wv.value
    if isinstance(value, tuple):  # batch drivers output (key, values)
        key, value = value
        if key != 'k':
            raise PanesDiffer('pane of key %r, expected only key \'k\': %r' % (key, wv))
    p = wv.pane_info
    return (sorted(value), wv.timestamp.micros, p.is_first, p.timing, p.index, p.nonspeculative_index)


def _by_window(panes):
    """{window: its panes in index order}; every pane has exactly one window."""
    out = collections.defaultdict(list)
    for wv in panes:
        if len(wv.windows) != 1:
            raise PanesDiffer('pane in %d windows, expected one: %r' % (len(wv.windows), wv))
        out[wv.windows[0]].append(wv)
    return {w: sorted(ps, key=lambda wv: wv.pane_info.index) for w, ps in out.items()}


def _window_difference(beam, ours):
    """Why `ours` (a window's panes) is not `beam`, or None if equal.

    Equal: the same panes in index order, with equal values (as multisets),
    timestamp and pane info, except where our driver closes the window as
    Beam's model does (triggers/closing.py) and Beam's Python driver does not:
    ours may mark the window's last pane is_last where Beam's does not, and may
    add one final pane (is_last, not early) after Beam's last one when the
    window expires before its trigger finished. Not before Beam's first pane:
    every scenario's trigger fires when the watermark passes the end of the
    window, so Beam's drivers give every window at least that pane."""
    extra = len(ours) - len(beam)
    if extra not in (0, 1):
        return '%d panes from Beam, %d from ours' % (len(beam), len(ours))
    if extra:
        final = ours[-1].pane_info
        if not (
            beam
            and not beam[-1].pane_info.is_last
            and final.is_last
            and final.index == len(beam)
            and final.timing != PaneInfoTiming.EARLY
        ):
            return 'ours adds a pane that is not the final pane after Beam\'s: %r' % (ours[-1],)
    for i, (b, o) in enumerate(zip(beam, ours)):
        if _pane_row(b) != _pane_row(o):
            return 'pane %d: Beam %r, ours %r' % (i, b, o)
        b_last, o_last = b.pane_info.is_last, o.pane_info.is_last
        if b_last != o_last and not (o_last and i == len(ours) - 1):
            return 'pane %d: is_last %s in Beam, %s in ours' % (i, b_last, o_last)
    return None


def check_equal_panes(scenario, beam_panes, ours_panes):
    """Raises PanesDiffer, naming the scenario and up to 3 windows, unless
    every window has equal panes from both drivers (_window_difference)."""
    beam, ours = _by_window(beam_panes), _by_window(ours_panes)
    problems = []
    for w in sorted(set(beam) | set(ours), key=lambda w: (w.start, w.end)):
        why = _window_difference(beam.get(w, []), ours.get(w, []))
        if why:
            problems.append('window %s: %s' % (w, why))
    if problems:
        raise PanesDiffer(
            '%s: our panes differ from Beam\'s in %d of %d windows: %s'
            % (scenario, len(problems), len(set(beam) | set(ours)), '; '.join(problems[:3]))
        )


def scenarios(n):
    fixed = Windowing(W.FixedWindows(60))
    sessions = Windowing(
        W.Sessions(30),
        T.AfterWatermark(early=T.AfterCount(5), late=T.AfterCount(1)),
        T.AccumulationMode.ACCUMULATING,
        allowed_lateness=600,
    )
    fixed_in = make_input(fixed.windowfn, n)
    sess_in = make_input(sessions.windowfn, n, seed=1)
    return [
        ('fixed_default_batch', fixed, fixed_in, run_beam_batch, run_ours_batch, lambda wvs: wvs),
        ('fixed_default_stream', fixed, fixed_in, run_beam_stream, run_ours_stream, bundles_and_watermarks),
        ('sessions_early_late_stream', sessions, sess_in, run_beam_stream, run_ours_stream, bundles_and_watermarks),
    ]


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument('--elements', type=int, default=50000)
    ap.add_argument('--repeat', type=int, default=3)
    args = ap.parse_args(argv)
    print('%-28s %14s %14s %8s %s' % ('scenario', 'beam elem/s', 'ours elem/s', 'ratio', 'panes (beam/ours)'))
    ratios = {}
    for name, windowing, wvs, beam_fn, ours_fn, prep in scenarios(args.elements):
        arg = (windowing, prep(wvs))
        beam_rate, beam_panes = _time(beam_fn, arg, len(wvs), args.repeat)
        ours_rate, ours_panes = _time(ours_fn, arg, len(wvs), args.repeat)
        check_scenario(name, beam_fn, ours_fn, arg, beam_panes, ours_panes)
        ratios[name] = ours_rate / beam_rate
        print('%-28s %14.0f %14.0f %7.2fx %d/%d' % (name, beam_rate, ours_rate, ratios[name], beam_panes, ours_panes))
    sys.stdout.flush()
    # The headline: the slowest scenario, ours over Beam's, at least as fast.
    headline('trigger_driver', min(ratios.values()) if ratios else None, 1.0, at_most=False)
    return ratios


if __name__ == '__main__':
    try:
        main()
    except PanesDiffer as e:
        sys.stdout.flush()
        print('trigger_driver FAILED: %s' % e, file=sys.stderr)
        sys.exit(1)
