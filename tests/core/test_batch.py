"""triggers.batch.group_by_window against Beam's own batch trigger driver."""
import itertools
import random

import pytest
from apache_beam.transforms import trigger as T
from apache_beam.transforms import window as W
from apache_beam.transforms.core import Windowing
from apache_beam.utils.windowed_value import WindowedValue

from tests.core.windowfns import BucketMerging
from tests.core.windowfns import ParityWindows
from triggers.batch import group_by_window

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
    out.append(WindowedValue('v%d' % i, t,
                             window_fn.assign(W.WindowFn.AssignContext(t, 'v%d' % i))))
  return out


def _canon(panes):
  rows = []
  for wv in panes:
    key, values = wv.value
    values = list(values)
    rows.append((repr(key), repr(values), wv.timestamp.micros,
                 repr(wv.windows), repr(wv.pane_info)))
  return sorted(rows)


def _beam(windowing, key, wvs):
  driver = T.create_trigger_driver(windowing, is_batch=True)
  return list(driver.process_entire_key(key, wvs))


def _check(windowing, seed):
  wvs = _input(windowing.windowfn, seed)
  ours = list(group_by_window(windowing, 'k', list(wvs)))
  beam = _beam(windowing, 'k', list(wvs))
  assert _canon(ours) == _canon(beam)
  for wv in ours:
    assert isinstance(wv.value[1], list)
  return ours


@pytest.mark.parametrize('wfn,comb', list(itertools.product(WINDOW_FNS, COMBINERS)))
def test_default_trigger_matches_beam(wfn, comb):
  for mode in (T.AccumulationMode.DISCARDING, T.AccumulationMode.ACCUMULATING):
    for lateness in (0, 5):
      w = Windowing(WINDOW_FNS[wfn], T.DefaultTrigger(), mode, COMBINERS[comb],
                    lateness)
      for seed in range(3):
        _check(w, seed)


@pytest.mark.parametrize('wfn,trig', list(itertools.product(
    ['global', 'fixed', 'sliding', 'sessions', 'custom', 'custom_merging'],
    [t for t in TRIGGERS if t != 'default'])))
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
  w = Windowing(CustomTimestampingFixedWindowsWindowFn(10), T.DefaultTrigger(),
                T.AccumulationMode.DISCARDING,
                W.TimestampCombiner.OUTPUT_AT_EARLIEST_TRANSFORMED)
  out = _check(w, 3)
  assert all(int(wv.timestamp) >= 100 for wv in out)


def test_values_keep_input_order_per_window():
  w = Windowing(W.FixedWindows(10))
  wvs = [WindowedValue(i, t, (W.IntervalWindow(0, 10),))
         for i, t in enumerate([5, 1, 3])]
  (out,) = list(group_by_window(w, 'k', wvs))
  assert out.value == ('k', [0, 1, 2])


def test_retracting_default_trigger_batch_is_one_pane():
  w = Windowing(W.Sessions(4), T.DefaultTrigger(), 3)
  out = list(group_by_window(w, 'k', _input(w.windowfn, 2)))
  beam = _beam(Windowing(W.Sessions(4), T.DefaultTrigger(), 2), 'k',
               _input(w.windowfn, 2))
  assert _canon(out) == _canon(beam)
