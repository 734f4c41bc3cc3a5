"""Streaming file writes made exactly once: Beam's `WriteImpl` over a
`FileBasedSink` (what `WriteToText`, `WriteToAvro`, `WriteToParquet`, ...
expand to) and `fileio.WriteToFiles`, on unbounded input, are replaced by
transactional writes (worker/transactional_files.py) when they are applied
(`transactional_write_for`, called from `SparkRunner.apply`).

Beam's own unbounded expansions cannot be made exactly once here: they
rename files inside a DoFn, so a micro-batch replayed after a failure finds
the files it renamed the first time gone, or renames a second set, and
`WriteImpl`'s reads one PCollection as a main and a side input in one step.
The replacements are made of ordinary Beam transforms, so the runner needs
no new primitive:

- WriteImpl: the sink's windowing (fixed windows of `triggering_frequency`
  where the sink sets one, as Beam's `_apply_windowing` does; otherwise the
  input's), the sink's `convert_fn`, a GroupByKey of each window's values
  under one key, then `WritePaneShardsFn`: per pane, Beam's shard count
  and final names (shard template with the window), output the final file
  names;
- WriteToFiles: a GroupByKey by destination, then `WriteDestinationPanesFn`:
  per pane and destination at most `shards` files named by `file_naming`,
  output `FileResult`s.

The files of a pane are published when the micro-batch that fired the pane
is a completed checkpoint; downstream transforms see the names before that.
One task writes a window's pane (for WriteImpl: all of its shards).
"""

import re

import apache_beam as beam
from apache_beam.io import fileio, filebasedsink, iobase
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import GoogleCloudOptions
from apache_beam.transforms import trigger, window
from apache_beam.utils.timestamp import Duration

from beam_spark_runner.worker.transactional_files import WriteDestinationPanesFn, WritePaneShardsFn, digest

# The temporary directory fileio.WriteToFiles picks when the user gives none:
# random, so a restarted driver would stage somewhere else.
_FILEIO_RANDOM_TEMP = re.compile(r"^\.temp[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


class _TransactionalWriteImpl(beam.PTransform):
    def __init__(self, sink, label):
        super().__init__()
        self.sink = sink
        self.label = label

    def expand(self, pcoll):
        windowed = self._windowing(pcoll)
        if self.sink.convert_fn is not None:
            windowed = windowed | "Convert" >> beam.ParDo(self.sink.convert_fn)
        return (
            windowed
            | "KeyByWindow" >> beam.Map(lambda value: (None, value))
            | "GroupPanes" >> beam.GroupByKey()
            | "WritePanes" >> beam.ParDo(WritePaneShardsFn(self.sink, self.label)).with_output_types(str)
        )

    def _windowing(self, pcoll):
        """Beam's WriteImpl windowing of unbounded input: fixed windows of the
        sink's `triggering_frequency` if it sets one (required in the global
        window), else the input's windowing."""
        frequency = self.sink.triggering_frequency
        if frequency is not None and frequency > 0:
            return pcoll | "ApplyFixedWindows" >> beam.WindowInto(
                window.FixedWindows(frequency),
                trigger=trigger.AfterWatermark(),
                accumulation_mode=trigger.AccumulationMode.DISCARDING,
                allowed_lateness=Duration(seconds=0),
            )
        if isinstance(pcoll.windowing.windowfn, window.GlobalWindows):
            raise ValueError(
                "%s: to write a GlobalWindow unbounded PCollection, triggering_frequency must be set "
                "and be greater than 0" % self.label
            )
        return pcoll


class _TransactionalWriteToFiles(beam.PTransform):
    def __init__(self, original, temp_dir, label):
        super().__init__()
        self.original = original
        self.temp_dir = temp_dir
        self.label = label

    def expand(self, pcoll):
        o = self.original
        return (
            pcoll
            | "KeyByDestination" >> beam.Map(lambda record, fn: (fn(record), record), o.destination_fn)
            | "GroupPanes" >> beam.GroupByKey()
            | "WritePanes"
            >> beam.ParDo(
                WriteDestinationPanesFn(o.path.get(), o.file_naming_fn, o.sink_fn, o.shards, self.temp_dir, self.label)
            )
        )


def transactional_write_for(transform, pcoll, options=None):
    """The exactly-once replacement of `transform` applied to `pcoll`, or
    None: Beam's `WriteImpl` over a `FileBasedSink`, or
    `fileio.WriteToFiles`, on an unbounded PCollection.

    Called by SparkRunner when the transform is applied (`PipelineRunner.apply`),
    so the replacement is part of the pipeline's graph before anything
    else sees it: Beam's TestPipeline turns the pipeline into a proto and
    back before running it, after which the transforms' objects are gone."""
    if not isinstance(pcoll, beam.pvalue.PCollection) or pcoll.is_bounded:
        return None
    if type(transform) is iobase.WriteImpl and isinstance(transform.sink, filebasedsink.FileBasedSink):
        prefix = transform.sink.file_path_prefix
        return _TransactionalWriteImpl(
            transform.sink, "file write to %s" % (prefix.get() if prefix.is_accessible() else prefix)
        )
    if isinstance(transform, fileio.WriteToFiles):
        label = "WriteToFiles to %s" % transform.path.get()
        temp_location = options.view_as(GoogleCloudOptions).temp_location if options is not None else None
        return _TransactionalWriteToFiles(transform, _write_to_files_temp_dir(transform, temp_location), label)
    return None


def _write_to_files_temp_dir(transform, temp_location):
    """The user's `temp_directory`, or one named after the output path (Beam
    picks a random one, which a restarted driver would not find)."""
    # WriteToFiles keeps the directory only in a private field (filled with
    # a random name by its expand; not yet called here).
    chosen = transform._temp_directory  # pylint: disable=protected-access
    chosen = chosen.get() if chosen is not None and hasattr(chosen, "get") else chosen
    if chosen and not _FILEIO_RANDOM_TEMP.match(FileSystems.split(chosen)[1]):
        return chosen
    base = temp_location or transform.path.get()
    return FileSystems.join(base, ".temp-beam-spark-%s" % digest(transform.path.get()))
