"""The pipeline test_driver_faults kills and restarts: run as a script, in
its own process group (the test SIGKILLs the group: this driver and its
Spark JVM).

    python killed_driver_pipeline.py OUT CHECKPOINT START STOP [SINKS] [--PIPELINE_OPTION ...]

START may be `auto:FILE`: the first run starts its SparkSession, then picks
START (2 s ahead) and writes it to FILE; later runs read it from there. STOP
may be `+SECONDS` after START. So the ticks begin once the driver is up,
however long that took on a loaded machine.

A PeriodicImpulse ticks every 0.5 s from START to STOP (epoch seconds);
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
from apache_beam.transforms.periodicsequence import PeriodicImpulse

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


def resolve_times(options, start, stop):
    """(start, stop) in epoch seconds from the START and STOP arguments."""
    if start.startswith("auto:"):
        path = start[len("auto:") :]
        if os.path.exists(path):
            with open(path) as f:
                start = f.read()
        else:
            from beam_spark_runner.options import SparkRunnerOptions
            from beam_spark_runner.session import get_or_create_session

            get_or_create_session(options.view_as(SparkRunnerOptions))  # the runner reuses it
            start = str(int(time.time()) + 2)
            with open(path + ".tmp", "w") as f:
                f.write(start)
            os.replace(path + ".tmp", path)
    start = float(start)
    stop = start + float(stop[1:]) if stop.startswith("+") else float(stop)
    return start, stop


def main(out, checkpoint, start, stop, sinks=None, flags=()):
    options = PipelineOptions(
        ["--runner=beam_spark_runner.SparkRunner", "--streaming", "--checkpoint_dir=%s" % checkpoint, *flags]
    )
    start, stop = resolve_times(options, start, stop)
    p = beam.Pipeline(options=options)
    elements = (
        p
        | PeriodicImpulse(start_timestamp=start, stop_timestamp=stop, fire_interval=INTERVAL)
        | beam.Map(lambda t, s=start: ticks_to_elements(s, t))
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
