"""Idle costs nothing: CPU of a streaming run with no input, and
how late processing-time timers fire.

One PeriodicImpulse tick reaches a stateful DoFn that sets two
processing-time timers, `--soon` and `--late` seconds ahead of the wall
clock. After the first timer fired (and the batches it caused, then 5 s of
the JVM's JIT compilation) the run has no input and nothing due until the
second: the CPU that every process of the run uses in that window (this
driver, the Spark JVM, its Python workers: all processes under this one,
read from /proc) is divided by its length: the share of one core. Each
timer's lateness (the wall clock in its callback minus its time) is
printed against the trigger interval.

    python benchmarks/idle.py [--soon 30 --late 100 --trigger_interval '1 second']

`--soon 0` sets the second timer only (tests/integration/test_streaming_idle.py
runs it so, in a fresh process). The line before the headline is the
measurements as JSON. Headline: `idle_cpu ratio=<share of one core>
target<=0.05 PASS|MISS`.
"""

import argparse
import json
import os
import sys
import tempfile
import time

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import userstate
from apache_beam.transforms.periodicsequence import PeriodicImpulse
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.utils.timestamp import Timestamp

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from beam_spark_runner import SparkRunner  # noqa: E402
from benchmarks.procstat import CpuMeter  # noqa: E402

TARGET = 0.05


class TwoTimers(beam.DoFn):
    """Sets processing-time timers `soon_s` (unless 0) and `late_s` ahead;
    files `<name>-due-<micros>` and `<name>-fired-<wall micros>` record them."""

    SOON = userstate.TimerSpec("soon", TimeDomain.REAL_TIME)
    LATE = userstate.TimerSpec("late", TimeDomain.REAL_TIME)

    def __init__(self, directory, soon_s, late_s):
        self.directory, self.soon_s, self.late_s = directory, soon_s, late_s

    def _mark(self, name):
        open(os.path.join(self.directory, name), "w").close()

    def process(self, kv, soon=beam.DoFn.TimerParam(SOON), late=beam.DoFn.TimerParam(LATE)):
        now = time.time()
        for timer, name, delay in ((soon, "soon", self.soon_s), (late, "late", self.late_s)):
            if not delay:
                continue
            due = Timestamp.of(now + delay)
            timer.set(due)
            self._mark("%s-due-%d" % (name, due.micros))

    @userstate.on_timer(SOON)
    def on_soon(self):
        self._mark("soon-fired-%d" % int(time.time() * 1e6))
        yield "soon"

    @userstate.on_timer(LATE)
    def on_late(self):
        self._mark("late-fired-%d" % int(time.time() * 1e6))
        yield "late"


def marked(directory, prefix, timeout_s):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        names = [n for n in os.listdir(directory) if n.startswith(prefix + "-")]
        if names:
            return int(names[0].rsplit("-", 1)[1])
        time.sleep(0.05)
    raise SystemExit("no %s within %d s" % (prefix, timeout_s))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--soon", type=float, default=30.0, help="seconds to the first timer")
    parser.add_argument("--late", type=float, default=100.0, help="seconds to the second timer (ends the window)")
    parser.add_argument("--trigger_interval", default="1 second")
    parser.add_argument(
        "--settle", type=float, default=5.0, help="seconds between the last batch and the window (JIT compilation)"
    )
    args = parser.parse_args(argv)
    out = tempfile.mkdtemp(prefix="beam-spark-idle-")
    p = beam.Pipeline(
        runner=SparkRunner(),
        options=PipelineOptions(["--streaming", "--trigger_interval=%s" % args.trigger_interval]),
    )
    start = time.time()
    _ = (
        p
        | PeriodicImpulse(start_timestamp=start, stop_timestamp=start + 0.5, fire_interval=1.0)
        | beam.Map(lambda _: ("k", 1))
        | beam.ParDo(TwoTimers(out, args.soon, args.late))
    )
    result = p.run()
    timers = ["soon", "late"] if args.soon else ["late"]
    try:
        due = {name: marked(out, name + "-due", 300) for name in timers}
        # The batches after the tick's (watermarks reaching the timers'
        # stage) end, and those of the first timer if there is one; the
        # window opens once none came for 2 s.
        if args.soon:
            marked(out, "soon-fired", args.soon + 60)
        batches, since = len(result.streaming_progress()), time.time()
        while batches < 3 or time.time() - since < 2:
            time.sleep(0.1)
            if len(result.streaming_progress()) != batches:
                batches, since = len(result.streaming_progress()), time.time()
        time.sleep(args.settle)  # the JVM's JIT compilers finish what the first batches started
        meter = CpuMeter(interval_s=5.0).start()  # its own /proc reads count too: seldom
        time.sleep(max(0.0, due["late"] / 1e6 - 0.5 - time.time()))
        used = meter.stop()
        in_window = len(result.streaming_progress()) - batches
        fired = {name: marked(out, name + "-fired", 60) for name in timers}
        result.wait_until_finish(duration=120_000)
        records = result.streaming_progress()
    finally:
        result.cancel()
    share = used["own_cpu_s"] / used["wall_s"]
    interval_s = float(args.trigger_interval.split()[0])
    print(
        "idle window: %.1f s, %d micro-batches in it; CPU: this run %.2f s, other processes %.2f s"
        % (used["wall_s"], in_window, used["own_cpu_s"], used["other_cpu_s"])
    )
    for name in timers:
        print(
            "timer %s (%.0f s ahead) fired %.2f s after its time (trigger interval %g s)"
            % (name, getattr(args, name), (fired[name] - due[name]) / 1e6, interval_s)
        )
    # The batch that ended the window counts its time from when it was planned.
    woken_ms = records[batches + in_window].duration_ms if len(records) > batches + in_window else None
    measured = {
        "window_s": used["wall_s"],
        "batches_in_window": in_window,
        "cpu_share": share,
        "late_by_s": {name: (fired[name] - due[name]) / 1e6 for name in timers},
        "woken_batch_ms": woken_ms,
    }
    print("measured: %s" % json.dumps(measured))
    print("idle_cpu ratio=%.3f target<=%g %s" % (share, TARGET, "PASS" if share <= TARGET else "MISS"))


if __name__ == "__main__":
    main()
