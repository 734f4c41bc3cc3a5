"""The Beam pipeline of benchmarks/streaming.py, the user code its runs ship
to Spark's workers: GenerateEvents (events from PeriodicImpulse ticks), the
count per key (Beam's Count.PerKey, or CountWithProbes when latency probes
ride along), the re-keying GroupByKey stages of the three-GroupByKey run,
RecordPanes (each pane's output times, written to files) and build_beam,
which assembles them."""

import os
import time
import uuid

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.transforms import trigger, window
from apache_beam.transforms.periodicsequence import PeriodicImpulse, RebaseMode
from apache_beam.utils.timestamp import Timestamp

from streaming_config import ALLOWED_LATENESS_S, KEYS, LATE_EVERY, LATE_LAG_S, NAMESPACE, WINDOW_S


# -- the Beam pipeline ------------------------------------------------------------------


class GenerateEvents(beam.DoFn):
    """N events per PeriodicImpulse tick: (key, probe) with an event time.

    Event number s = tick index * N + i (tick index = tick time / interval,
    consecutive for consecutive ticks); key = s % 10000 as the native
    query's value % 10000; every 20th event lags 15 s (late); every
    probe_every-th carries (s, generation time) to measure latency
    (probe_every 0: none, every event is (key, None))."""

    def __init__(self, per_tick, interval, probe_every):
        self.per_tick, self.interval, self.probe_every = per_tick, interval, probe_every
        self.events = Metrics.counter(NAMESPACE, "events")
        self.ticks = Metrics.distribution(NAMESPACE, "tick_ms")

    def process(self, tick):
        gen = float(tick)
        self.ticks.update(int(gen * 1000))
        base = int(round(gen / self.interval)) * self.per_tick
        n, probe_every = self.per_tick, self.probe_every
        # Every event of a tick shares one of two event times: build each
        # Timestamp once, not once per event from a float.
        on_time, late = Timestamp.of(gen), Timestamp.of(gen - LATE_LAG_S)
        TV = window.TimestampedValue
        if probe_every:
            for s in range(base, base + n):
                probe = (s, gen) if s % probe_every == 0 else None
                yield TV((s % KEYS, probe), late if s % LATE_EVERY == 0 else on_time)
        else:
            for s in range(base, base + n):
                yield TV((s % KEYS, None), late if s % LATE_EVERY == 0 else on_time)
        self.events.inc(n)


class CountWithProbes(beam.CombineFn):
    """Count per key; the accumulator also carries the sampled events it holds."""

    def create_accumulator(self):
        return (0, ())

    def add_input(self, acc, probe):
        return (acc[0] + 1, acc[1] + (probe,)) if probe is not None else (acc[0] + 1, acc[1])

    def merge_accumulators(self, accs):
        count, probes = 0, []
        for c, p in accs:
            count += c
            probes.extend(p)
        return (count, tuple(probes))

    def extract_output(self, acc):
        return acc


def _rekey(kv, modulus):
    return kv[0] % modulus, kv[1]


def _merge_panes(kv):
    """After a downstream GroupByKey: the panes' counts summed (upstream
    panes accumulate, so this is not an event count) and their sampled events."""
    count, probes = 0, set()
    for c, p in map(_count_and_probes, kv[1]):
        count += c
        probes.update(p)
    return kv[0], (count, tuple(sorted(probes)))


def _count_and_probes(value):
    """A pane's (count, sampled events): Count.PerKey's panes carry none."""
    return value if isinstance(value, tuple) else (value, ())


class RecordPanes(beam.DoFn):
    """The last step: per pane, writes (to one file per bundle) the output
    time of every sampled event it holds, the on-time pane's output time, and
    the count of on-time/late panes (the last pane of a key and window)."""

    TIMING = {0: "early", 1: "on_time", 2: "late", 3: "unknown"}

    def __init__(self, out_dir, record_counts):
        self.out_dir, self.record_counts = out_dir, record_counts
        self.panes = {t: Metrics.counter(NAMESPACE, "panes_%s" % t) for t in self.TIMING.values()}

    def start_bundle(self):
        self.lines = []

    def process(self, kv, w=beam.DoFn.WindowParam, pane=beam.DoFn.PaneInfoParam):
        now = time.time()
        key, (count, probes) = kv[0], _count_and_probes(kv[1])
        timing = self.TIMING.get(pane.timing, "unknown")
        self.panes[timing].inc()
        lines = self.lines
        for s, gen in probes:
            lines.append("P %d %.6f %.6f\n" % (s, gen, now))
        if timing == "on_time":
            lines.append("W %d %.6f\n" % (w.end.micros, now))
        if self.record_counts and timing in ("on_time", "late"):
            lines.append("C %d %d %d %d\n" % (key, w.end.micros, pane.index, count))

    def finish_bundle(self):
        if self.lines:
            path = os.path.join(self.out_dir, "%d-%s.txt" % (os.getpid(), uuid.uuid4().hex))
            with open(path + ".tmp", "w") as f:
                f.writelines(self.lines)
            os.replace(path + ".tmp", path)
        self.lines = []


def _early_trigger(early_s):
    """Early panes every `early_s` s of processing time; 0: AfterCount(1),
    which this runner fires once per key and window per micro-batch that
    brings it data (the cadence of Spark's update output mode)."""
    return trigger.AfterProcessingTime(early_s) if early_s else trigger.AfterCount(1)


def build_beam(p, rate, seconds, interval, probe_every, out_dir, group_stages, early_s=0):
    per_tick = max(1, int(round(rate * interval)))
    ticks = p | "Ticks" >> PeriodicImpulse(
        start_timestamp=time.time(),
        stop_timestamp=time.time() + seconds,
        fire_interval=interval,
        rebase=RebaseMode.REBASE_ALL,
    )  # the clock starts when the query runs its first batch
    counts = (
        ticks
        | "Events" >> beam.ParDo(GenerateEvents(per_tick, interval, probe_every))
        | "Window"
        >> beam.WindowInto(
            window.FixedWindows(WINDOW_S),
            trigger=trigger.AfterWatermark(early=_early_trigger(early_s), late=trigger.AfterCount(1)),
            accumulation_mode=trigger.AccumulationMode.ACCUMULATING,
            allowed_lateness=ALLOWED_LATENESS_S,
        )
        # Without probes, Beam's own count: the query the native one runs.
        | "CountPerKey" >> (beam.CombinePerKey(CountWithProbes()) if probe_every else beam.combiners.Count.PerKey())
    )
    for i, modulus in zip(range(1, group_stages), (1000, 100, 10)):
        counts = (
            counts
            | "Rekey%d" % i >> beam.Map(_rekey, modulus)
            | "Group%d" % i >> beam.GroupByKey()
            | "Merge%d" % i >> beam.Map(_merge_panes)
        )
    counts | "Record" >> beam.ParDo(RecordPanes(out_dir, record_counts=group_stages == 1))
    return per_tick * (1.0 / interval)
