"""Idle costs nothing (issue #23): a streaming run with no input and
nothing due runs no micro-batches; a processing-time timer still fires on
time. One PeriodicImpulse tick sets a timer IDLE_S ahead; until it fires
the pipeline has nothing to do. The CPU the whole run uses meanwhile (this
process, the Spark JVM, its Python workers: every process under this one,
from /proc) must stay under 5% of one core; before the planner idled, the
query ran empty batches back to back and used one to two cores.
benchmarks/idle.py measures the same over 60 s."""

import os
import time

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import userstate
from apache_beam.transforms.periodicsequence import PeriodicImpulse
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.utils.timestamp import Timestamp

from beam_spark_runner import SparkRunner
from benchmarks.procstat import CpuMeter

IDLE_S = 15


class FiresLater(beam.DoFn):
    """Sets a processing-time timer `delay_s` ahead of the wall clock (as
    users do, with `time.time()`: the timer is due `delay_s` after the
    element was processed, however long the first batch took); writes
    `set-<due micros>` and, when the timer fires, `fired-<wall micros>`."""

    TIMER = userstate.TimerSpec("later", TimeDomain.REAL_TIME)

    def __init__(self, directory, delay_s):
        self.directory, self.delay_s = directory, delay_s

    def process(self, kv, timer=beam.DoFn.TimerParam(TIMER)):
        due = Timestamp.of(time.time() + self.delay_s)
        timer.set(due)
        open(os.path.join(self.directory, "set-%d" % due.micros), "w").close()

    @userstate.on_timer(TIMER)
    def later(self):
        open(os.path.join(self.directory, "fired-%d" % int(time.time() * 1e6)), "w").close()
        yield "fired"


def _first(directory, prefix, timeout_s):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        names = [n for n in os.listdir(directory) if n.startswith(prefix + "-")]
        if names:
            return int(names[0].split("-")[1])
        time.sleep(0.05)
    raise AssertionError("no %s file within %d s" % (prefix, timeout_s))


def test_an_idle_run_uses_almost_no_cpu_and_a_processing_time_timer_fires_on_time(tmp_path):
    out = str(tmp_path)
    p = beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(["--streaming"]))
    start = time.time()
    _ = (
        p
        | PeriodicImpulse(start_timestamp=start, stop_timestamp=start + 0.5, fire_interval=1.0)  # one tick
        | beam.Map(lambda _: ("k", 1))
        | beam.ParDo(FiresLater(out, IDLE_S))
    )
    result = p.run()
    try:
        due = _first(out, "set", 120)
        # Idle once the two batches that follow the tick's (the watermark
        # reaching the timer's stage, then its hold) are over, and no other
        # came for 2 s.
        batches, since = len(result.streaming_progress()), time.time()
        while batches < 3 or time.time() - since < 2:
            assert time.time() < due / 1e6 - 6, (
                "micro-batches kept coming (%d so far) while nothing was due, or the first ones took too long" % batches
            )
            time.sleep(0.1)
            if len(result.streaming_progress()) != batches:
                batches, since = len(result.streaming_progress()), time.time()
        meter = CpuMeter().start()  # every process under this one: the JVM, its Python workers
        time.sleep(max(0.0, due / 1e6 - 1 - time.time()))
        used = meter.stop()
        idle_batches = len(result.streaming_progress()) - batches
        fired = _first(out, "fired", IDLE_S + 60)
        result.wait_until_finish(duration=60_000)
        records = result.streaming_progress()
    finally:
        result.cancel()
    # The batch after the idle wait: its duration counts from when it was
    # planned, not from the batch before the wait.
    woken = records[batches]
    assert woken.duration_ms < used["wall_s"] * 1000, (woken.duration_ms, used["wall_s"])
    share = used["own_cpu_s"] / used["wall_s"]
    print(
        "idle for %.1f s: %.1f%% of one core; the timer fired %.2f s after its time"
        % (used["wall_s"], 100 * share, (fired - due) / 1e6)
    )
    assert idle_batches == 0, "%d micro-batches ran while nothing was due" % idle_batches
    assert share < 0.05, "an idle run used %.1f%% of one core" % (100 * share)
    # On time: at or after its time, and within a batch's start-up of it.
    assert 0 <= fired - due < 5_000_000, (fired - due) / 1e6
