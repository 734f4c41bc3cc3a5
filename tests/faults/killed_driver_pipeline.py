"""The pipeline test_driver_faults kills and restarts: run as a script, in
its own process group (the test SIGKILLs the group: this driver and its
Spark JVM).

    python killed_driver_pipeline.py OUT CHECKPOINT START STOP [SINKS] [--PIPELINE_OPTION ...]

START may be `auto:FILE`: the first bundle that runs the ticks' source
picks START (1 s ahead) and writes it to FILE; every later bundle and run
reads it from there. STOP may be `+SECONDS` after START. So the ticks begin
once the streaming query runs its first batch, however long the driver and
the query took to start on a loaded machine: the first batch holds a
batch's worth of ticks, not every tick that fell due while it started.

Beam's PeriodicImpulse generator (`ImpulseSeqGenDoFn`) ticks every 0.5 s
from START to STOP (epoch seconds);
tick i is sequence number i // 4 of key "k<i % 4>". A stateful DoFn counts
each key's elements; each element becomes one file OUT/<key>-<seq>.txt
holding the count its key had reached, written by rename (an idempotent
sink: a replayed batch rewrites its files). With state exactly once, a
key's files hold 1..n, each once. With SINKS, the ticks' lines
"k<key>,<seq>" in fixed 2-second windows are also written by Beam's
`WriteToText` (SINKS/text) and `fileio.WriteToFiles` (SINKS/files), which
the runner makes exactly once: each line in one published file. Each tick
also gets a random draw, and a DoFn that requires stable input writes a
new file SINKS/draws/<key>-<seq>-<uuid>.txt with the draw each time it
processes the tick: a replayed batch draws again, but the stable DoFn
must see the draw it saw the first time, so every file of a tick holds
the same number. With the variable SELF_KILL_ENV set, that DoFn kills the
driver once, in the middle of its micro-batch (driver_cycles.SELF_KILL).
"""

import os
import random
import signal
import sys
import time
import uuid

import apache_beam as beam
from apache_beam.io import fileio
from apache_beam.transforms import window
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import userstate
from apache_beam.transforms.periodicsequence import ImpulseSeqGenDoFn

from tests.stable_input_dofn import StableParDo

INTERVAL = 0.5
KEYS = 4


class _CountAndWrite(beam.DoFn):
    COUNT = userstate.ReadModifyWriteStateSpec("count", beam.coders.VarIntCoder())

    def __init__(self, out):
        self.out = out

    def process(self, kv, count=beam.DoFn.StateParam(COUNT)):
        key, seq = kv
        n = (count.read() or 0) + 1
        count.write(n)
        path = os.path.join(self.out, "%s-%d.txt" % (key, seq))
        with open(path + ".tmp", "w") as f:
            f.write(str(n))
        os.replace(path + ".tmp", path)


# With this variable set to a marker path, the stable-input DoFn SIGKILLs
# the driver's process group (the driver, its Spark JVM, this worker) once,
# right after recording its SELF_KILL_AFTER_DRAWS-th draw.
SELF_KILL_ENV = "BEAM_SPARK_TEST_SELF_KILL"
SELF_KILL_AFTER_DRAWS = 6


class _RecordDraw(beam.DoFn):
    """Requires stable input (StableParDo): writes each (key, seq, draw) it
    processes to a file of its own."""

    def __init__(self, out, driver_pid, kill_marker):
        self.out = out
        self.driver_pid = driver_pid
        self.kill_marker = kill_marker

    def process(self, element):
        key, seq, draw = element
        os.makedirs(self.out, exist_ok=True)
        path = os.path.join(self.out, "%s-%d-%s.txt" % (key, seq, uuid.uuid4().hex))
        with open(path + ".tmp", "w") as f:
            f.write(repr(draw))
        os.replace(path + ".tmp", path)
        if self.kill_marker and len(os.listdir(self.out)) >= SELF_KILL_AFTER_DRAWS:
            try:
                fd = os.open(self.kill_marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return
            os.close(fd)
            os.killpg(os.getpgid(self.driver_pid), signal.SIGKILL)


def ticks_to_elements(start, tick):
    i = int(round((float(tick) - start) / INTERVAL))
    return "k%d" % (i % KEYS), i // KEYS


class _Times:
    """(start, stop, interval) of the ticks, START resolved where it is
    first needed (see the module docstring)."""

    def __init__(self, start, stop):
        self.start, self.stop = start, stop
        self._resolved = None  # per worker: each reads FILE once

    def resolve_start(self):
        if self._resolved is None:
            self._resolved = self._read_or_pick()
        return self._resolved

    def _read_or_pick(self):
        if not self.start.startswith("auto:"):
            return float(self.start)
        path = self.start[len("auto:") :]
        if not os.path.exists(path):  # a replayed first batch keeps the START it wrote
            with open(path + ".tmp", "w") as f:
                f.write(str(int(time.time()) + 1))
            os.replace(path + ".tmp", path)
        with open(path) as f:
            return float(f.read())

    def bounds(self, _):
        start = self.resolve_start()
        stop = start + float(self.stop[1:]) if self.stop.startswith("+") else float(self.stop)
        return [start, stop, INTERVAL]


def main(out, checkpoint, start, stop, sinks=None, flags=()):
    options = PipelineOptions(
        ["--runner=beam_spark_runner.SparkRunner", "--streaming", "--checkpoint_dir=%s" % checkpoint, *flags]
    )
    times = _Times(start, stop)
    p = beam.Pipeline(options=options)
    elements = (
        p
        | beam.Impulse()
        | "Bounds" >> beam.Map(times.bounds)
        | "Ticks" >> beam.ParDo(ImpulseSeqGenDoFn())
        | beam.Map(lambda t: ticks_to_elements(times.resolve_start(), t))
    )
    elements | beam.ParDo(_CountAndWrite(out))
    if sinks:
        lines = (
            elements | beam.MapTuple(lambda key, seq: "%s,%d" % (key, seq)) | beam.WindowInto(window.FixedWindows(2))
        )
        lines | beam.io.WriteToText(os.path.join(sinks, "text", "ticks"), num_shards=2)
        lines | fileio.WriteToFiles(os.path.join(sinks, "files"), shards=2)
        _ = (
            elements
            | "Draw" >> beam.MapTuple(lambda key, seq: (key, seq, random.random()))
            | "RecordDraw"
            >> StableParDo(_RecordDraw(os.path.join(sinks, "draws"), os.getpid(), os.environ.get(SELF_KILL_ENV)))
        )
    p.run().wait_until_finish()


if __name__ == "__main__":
    # Arguments starting with "--" are further pipeline options.
    positional = [a for a in sys.argv[1:] if not a.startswith("--")]
    main(*positional, flags=[a for a in sys.argv[1:] if a.startswith("--")])
