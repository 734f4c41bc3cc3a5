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

Usage: python -m benchmarks.trigger_driver [--elements N] [--repeat R]
"""
import argparse
import random
import sys
import time

from apache_beam.transforms import trigger as T
from apache_beam.transforms import window as W
from apache_beam.transforms.core import Windowing
from apache_beam.transforms.window import WindowFn
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

from triggers import ReduceSpec
from triggers.batch import group_by_window


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
    b = wvs[i:i + bundle]
    hi = max([hi] + [wv.timestamp for wv in b])
    out.append((b, hi - delay))
  return out


def run_beam_stream(windowing, script):
  driver = T.GeneralTriggerDriver(windowing, _Clock())
  state = T.InMemoryUnmergedState()
  n = 0
  wm = MIN_TIMESTAMP
  for bundle, new_wm in script:
    n += sum(1 for _ in driver.process_elements(state, bundle, wm, wm))
    wm = new_wm
    fired = state.get_and_clear_timers(wm)
    while fired:
      for w, (name, dom, ts, _) in fired:
        n += sum(1 for _ in driver.process_timer(w, name, dom, ts, state))
      fired = state.get_and_clear_timers(wm)
  return n


def run_ours_stream(windowing, script):
  red = ReduceSpec.from_windowing(windowing).new_reducer()
  n = 0
  wm = MIN_TIMESTAMP
  for bundle, new_wm in script:
    n += len(red.process(bundle, wm))
    wm = new_wm
    n += len(red.advance_watermark(wm))
  return n


def run_beam_batch(windowing, wvs):
  driver = T.create_trigger_driver(windowing, is_batch=True)
  return sum(1 for _ in driver.process_entire_key('k', wvs))


def run_ours_batch(windowing, wvs):
  return sum(1 for _ in group_by_window(windowing, 'k', wvs))


def _time(fn, arg, n_elements, repeat):
  best = None
  panes = None
  for _ in range(repeat):
    t0 = time.perf_counter()
    panes = fn(arg[0], arg[1])
    dt = time.perf_counter() - t0
    best = dt if best is None else min(best, dt)
  return n_elements / best, panes


def scenarios(n):
  fixed = Windowing(W.FixedWindows(60))
  sessions = Windowing(W.Sessions(30),
                       T.AfterWatermark(early=T.AfterCount(5), late=T.AfterCount(1)),
                       T.AccumulationMode.ACCUMULATING, allowed_lateness=600)
  fixed_in = make_input(fixed.windowfn, n)
  sess_in = make_input(sessions.windowfn, n, seed=1)
  return [
      ('fixed_default_batch', fixed, fixed_in, run_beam_batch, run_ours_batch,
       lambda wvs: wvs),
      ('fixed_default_stream', fixed, fixed_in, run_beam_stream, run_ours_stream,
       bundles_and_watermarks),
      ('sessions_early_late_stream', sessions, sess_in, run_beam_stream,
       run_ours_stream, bundles_and_watermarks),
  ]


def main(argv=None):
  ap = argparse.ArgumentParser()
  ap.add_argument('--elements', type=int, default=50000)
  ap.add_argument('--repeat', type=int, default=3)
  args = ap.parse_args(argv)
  print('%-28s %14s %14s %8s %s' % ('scenario', 'beam elem/s', 'ours elem/s',
                                     'ratio', 'panes (beam/ours)'))
  ratios = {}
  for name, windowing, wvs, beam_fn, ours_fn, prep in scenarios(args.elements):
    arg = (windowing, prep(wvs))
    beam_rate, beam_panes = _time(beam_fn, arg, len(wvs), args.repeat)
    ours_rate, ours_panes = _time(ours_fn, arg, len(wvs), args.repeat)
    ratios[name] = ours_rate / beam_rate
    print('%-28s %14.0f %14.0f %7.2fx %d/%d' % (
        name, beam_rate, ours_rate, ratios[name], beam_panes, ours_panes))
  sys.stdout.flush()
  return ratios


if __name__ == '__main__':
  main()
