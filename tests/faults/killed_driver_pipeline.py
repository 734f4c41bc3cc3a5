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
the runner makes exactly once: each line in one published file.
"""

import os
import sys
import time

import apache_beam as beam
from apache_beam.io import fileio
from apache_beam.transforms import window
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import userstate
from apache_beam.transforms.periodicsequence import ImpulseSeqGenDoFn

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
    p.run().wait_until_finish()


if __name__ == "__main__":
    # Arguments starting with "--" are further pipeline options.
    positional = [a for a in sys.argv[1:] if not a.startswith("--")]
    main(*positional, flags=[a for a in sys.argv[1:] if a.startswith("--")])
