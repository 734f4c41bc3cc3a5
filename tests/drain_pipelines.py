"""Unbounded pipelines a test drains (SparkRunner in process, and through
the job service), and what to check once they are drained. Outputs are
files, one per element, in a directory the test gives."""

import os
import time

import apache_beam as beam
from apache_beam.transforms import userstate, window
from apache_beam.transforms.periodicsequence import PeriodicImpulse
from apache_beam.transforms.timeutil import TimeDomain

from tests.splittable_dofns import TailPositions


class WriteFile(beam.DoFn):
    """One empty file per element, named `<prefix>-<element fields>`."""

    def __init__(self, directory, prefix):
        self.directory, self.prefix = directory, prefix

    def process(self, element, pane=beam.DoFn.PaneInfoParam):
        fields = element if isinstance(element, tuple) else (element,)
        name = "-".join([self.prefix, *map(str, fields)] + ([str(pane.timing)] if self.prefix == "sum" else []))
        open(os.path.join(self.directory, name), "w").close()


class WaitsForAnHour(beam.DoFn):
    """Keeps a processing-time timer an hour ahead: without a drain, its
    hold keeps the watermark back for the whole test."""

    TIMER = userstate.TimerSpec("later", TimeDomain.REAL_TIME)

    def process(self, kv, timer=beam.DoFn.TimerParam(TIMER)):
        timer.set(time.time() + 3600)

    @userstate.on_timer(TIMER)
    def later(self):
        yield "fired"


def ticks(p, directory):
    """PeriodicImpulse without an end: each tick as a file, their count per
    one-hour window as a file once the window fires, and a stateful DoFn
    holding a processing-time timer."""
    t = p | PeriodicImpulse(start_timestamp=time.time(), fire_interval=0.5)
    _ = t | "Tick" >> beam.ParDo(WriteFile(directory, "tick"))
    _ = (
        t
        | "One" >> beam.Map(lambda _: ("k", 1))
        | beam.WindowInto(window.FixedWindows(3600))
        | beam.CombinePerKey(sum)
        | "Sum" >> beam.ParDo(WriteFile(directory, "sum"))
    )
    _ = t | "Key" >> beam.Map(lambda tick: ("k", tick)) | beam.ParDo(WaitsForAnHour())


def tail(p, directory):
    """An SDF whose truncate keeps three more positions of a thousand."""
    _ = p | beam.Create([("log", 1000)]) | beam.ParDo(TailPositions()) | beam.ParDo(WriteFile(directory, "pos"))


def count(directory, prefix):
    return sum(1 for name in os.listdir(directory) if name.startswith(prefix + "-"))


def wait_for(directory, prefix, at_least, timeout=180):
    deadline = time.time() + timeout
    while count(directory, prefix) < at_least:
        assert time.time() < deadline, "fewer than %d %s outputs after %d s" % (at_least, prefix, timeout)
        time.sleep(0.2)


def assert_ticks_drained(directory):
    """Every tick counted in a window pane fired on time, none lost or doubled."""
    ticks_seen = count(directory, "tick")
    sums = [name.split("-") for name in os.listdir(directory) if name.startswith("sum-")]
    assert sums, "no window fired"
    assert all(timing == "1" for _, _, _, timing in sums), sums  # PaneInfoTiming.ON_TIME
    assert sum(int(total) for _, _, total, _ in sums) == ticks_seen


def assert_tail_truncated(directory):
    """Positions 0..n-1 each once; the last three ran under the truncated
    restriction (stop n), every earlier one under the full one."""
    runs = sorted(tuple(map(int, name.split("-")[1:])) for name in os.listdir(directory) if name.startswith("pos-"))
    positions = [p for p, _ in runs]
    n = len(positions)
    assert positions == list(range(n)) and 3 < n < 1000, positions
    assert [stop for _, stop in runs] == [1000] * (n - 3) + [n] * 3, runs
