"""The plain-Python WindowInto assigns fixed windows in integer
microseconds: the same windows Beam's FixedWindows.assign gives, for any
size, offset and timestamp (negative ones and window boundaries too)."""

import random

from apache_beam.transforms import window
from apache_beam.utils.timestamp import Timestamp

from beam_spark_runner.worker.plain_steps import FixedWindowAssigner


def test_it_assigns_what_beams_fixed_windows_assign():
    rng = random.Random(7)
    for _ in range(200):
        size = rng.choice([1, 7, 60, 3600]) * 10**6 + rng.choice([0, 1, 999])
        offset = rng.randrange(0, size)
        fn = window.FixedWindows(Timestamp(micros=size).micros / 1e6, Timestamp(micros=offset).micros / 1e6)
        ours = FixedWindowAssigner(fn)
        for micros in [rng.randrange(-(10**15), 10**15) for _ in range(20)] + [offset, offset - 1, offset + size]:
            context = window.WindowFn.AssignContext(Timestamp(micros=micros))
            assert ours(context) == fn.assign(context), (size, offset, micros)


def test_elements_of_one_window_share_its_window_object():
    ours = FixedWindowAssigner(window.FixedWindows(10))
    first = ours(window.WindowFn.AssignContext(Timestamp(micros=1)))
    second = ours(window.WindowFn.AssignContext(Timestamp(micros=9_999_999)))
    assert first == second and first[0] is second[0] and first is not second
