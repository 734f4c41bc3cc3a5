"""The pipeline test_sink_faults crashes and restarts: Beam's `WriteToText`
and `fileio.WriteToFiles` on unbounded input, with the driver killed at one
point of a micro-batch's commit. Run as a script:

    python sink_pipeline.py OUT CHECKPOINT START STOP [FAULT MARKER] [-- OPTION ...]

A PeriodicImpulse ticks every 0.25 s from START to STOP (epoch seconds);
tick i becomes the line "k<i % 4>,<i // 4>" (key, sequence number), in
fixed 2-second windows, written by both sinks under OUT/text and
OUT/files, and as rows (key, seq) by `WriteToSpark` as Parquet under
OUT/parquet. FAULT kills the driver (`os._exit`) once, guarded by the MARKER
file, at:

- `before_spark_commit`: the batch's pending record is written, Spark has
  not written its commit log entry;
- `before_publish`: Spark committed the batch, its files are not yet
  published (no finalization callback ran);
- `mid_publish`: the first file of a pane is published, the others not.
"""

import os
import sys
import typing

import apache_beam as beam
from apache_beam.io import fileio
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import window
from apache_beam.transforms.periodicsequence import PeriodicImpulse

INTERVAL = 0.25
KEYS = 4
FAULTS = ("before_spark_commit", "before_publish", "mid_publish")


def _die_once(marker):
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    sys.stderr.write("injected driver crash (%s)\n" % marker)
    sys.stderr.flush()
    os._exit(17)


def install(fault, marker):
    """Patches the driver so that it dies once at `fault`."""
    from beam_spark_runner.execution import streaming_commits
    from beam_spark_runner.streaming.checkpoint_coordinator import CheckpointCoordinator

    if fault == "before_spark_commit":
        original = CheckpointCoordinator.pre_commit

        def pre_commit(self, epoch, done):
            record = original(self, epoch, done)
            if record.side_effects:
                _die_once(marker)
            return record

        CheckpointCoordinator.pre_commit = pre_commit
    elif fault == "before_publish":
        original_release = streaming_commits.release

        def release(effects, context):
            if effects:
                _die_once(marker)
            original_release(effects, context)

        streaming_commits.release = release
    elif fault == "mid_publish":
        original_rename = FileSystems.rename

        def rename(sources, destinations):
            if len(sources) > 1 and not os.path.exists(marker):
                original_rename(sources[:1], destinations[:1])
                _die_once(marker)
            original_rename(sources, destinations)

        FileSystems.rename = staticmethod(rename)
    else:
        raise ValueError("unknown fault %r; one of %s" % (fault, FAULTS))


class Line(typing.NamedTuple):
    key: str
    seq: int


def line_of(start, tick):
    i = int(round((float(tick) - start) / INTERVAL))
    return "k%d,%d" % (i % KEYS, i // KEYS)


def main(out, checkpoint, start, stop, flags=()):
    """`flags`: more pipeline options."""
    options = PipelineOptions(
        ["--runner=beam_spark_runner.SparkRunner", "--streaming", "--checkpoint_dir=%s" % checkpoint, *flags]
    )
    p = beam.Pipeline(options=options)
    lines = (
        p
        | PeriodicImpulse(start_timestamp=start, stop_timestamp=stop, fire_interval=INTERVAL)
        | beam.Map(lambda t, s=start: line_of(s, t))
        | beam.WindowInto(window.FixedWindows(2))
    )
    lines | beam.io.WriteToText(os.path.join(out, "text", "ticks"), num_shards=2)
    lines | fileio.WriteToFiles(os.path.join(out, "files"), shards=2)
    from beam_spark_runner.io import WriteToSpark

    rows = lines | beam.Map(lambda line: Line(line.split(",")[0], int(line.split(",")[1]))).with_output_types(Line)
    rows | WriteToSpark(format="parquet", path=os.path.join(out, "parquet"))
    p.run().wait_until_finish()


if __name__ == "__main__":
    args, flags = sys.argv[1:], []
    if "--" in args:
        args, flags = args[: args.index("--")], args[args.index("--") + 1 :]
    if len(args) > 4:
        install(args[4], args[5])
    main(args[0], args[1], float(args[2]), float(args[3]), flags)
