"""File writes the runner replaces as they are applied
(`transactional_write_for`, called from `SparkRunner.apply`):

- on unbounded input, Beam's `WriteImpl` over a `FileBasedSink` (what
  `WriteToText`, `WriteToAvro`, `WriteToParquet`, ... expand to) and
  `fileio.WriteToFiles` become exactly-once transactional writes
  (worker/transactional_files.py);
- on bounded input with windows or a trigger, `fileio.WriteToFiles` first
  regroups each window's records under the default trigger (Beam's own
  expansion groups its temporary files under the input's trigger).

Beam's own unbounded expansions cannot be made exactly once here: they
rename files inside a DoFn, so a micro-batch replayed after a failure finds
the files it renamed the first time gone, or renames a second set, and
`WriteImpl`'s reads one PCollection as a main and a side input in one step.
The replacements are made of ordinary Beam transforms, so the runner needs
no new primitive:

- the sink's own grouping (`_sink_windowing`): elements keep their windows
  (or get fixed windows of `triggering_frequency`, as Beam's
  `_apply_windowing` does), keyed by their window's encoding (and
  destination), fired every micro-batch that brought a window something;
- WriteImpl: the sink's `convert_fn`, that grouping, then
  `WritePaneShardsFn`: per pane, Beam's shard count and final names
  (worker/file_names.py), output the final file names;
- WriteToFiles: that grouping, then `WriteDestinationPanesFn`: per pane and
  destination at most `shards` files named by `file_naming`, output
  `FileResult`s.

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

from beam_spark_runner.errors import UnsupportedPipelineError
from beam_spark_runner.worker.beam_internals import write_to_files_temp_directory
from beam_spark_runner.worker.file_names import ShardTemplate
from beam_spark_runner.worker.transactional_files import WriteDestinationPanesFn, WritePaneShardsFn, digest
from windowing.existing import ExistingWindows

# The temporary directory fileio.WriteToFiles picks when the user gives none:
# random, so a restarted driver would stage somewhere else.
_FILEIO_RANDOM_TEMP = re.compile(r"^\.temp[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def _sink_windowing(pcoll, frequency):
    """The windowing of a file sink's own GroupByKey. The user's trigger has
    already made the panes upstream; the sink collects what arrived, and
    must neither drop it nor hold it back:

    - without `triggering_frequency`, elements keep their windows
      (`ExistingWindows`: sessions merged upstream stay as they are) and the
      grouping fires every micro-batch that brought a window something
      (`Repeatedly(AfterCount(1))`): one sink pane per such batch;
    - with it (Beam's WriteImpl), fixed windows of that size, fired when the
      watermark passes their end, and again for what arrives later.

    Allowed lateness is the input's: an upstream GroupByKey emits a
    window's panes while its input watermark has not passed the window's
    end plus that lateness, and the sink's watermark never runs ahead of
    its producer's, so what an upstream grouping emits is never late at the
    sink. DISCARDING: each sink pane holds only what arrived since the
    window's previous one."""
    lateness = pcoll.windowing.allowed_lateness
    if frequency is not None and frequency > 0:
        return beam.WindowInto(
            window.FixedWindows(frequency),
            trigger=trigger.AfterWatermark(late=trigger.AfterCount(1)),
            accumulation_mode=trigger.AccumulationMode.DISCARDING,
            allowed_lateness=lateness,
        )
    return beam.WindowInto(
        ExistingWindows(pcoll.windowing.windowfn.get_window_coder()),
        trigger=trigger.Repeatedly(trigger.AfterCount(1)),
        accumulation_mode=trigger.AccumulationMode.DISCARDING,
        allowed_lateness=lateness,
    )


class _KeyByWindow(beam.DoFn):
    """(the window's encoding, element), or ((the window's encoding,
    destination), element): the sink groups each window apart (one window
    per key: windows spread over key-groups, each key's state stays small),
    under a key every process computes alike."""

    def __init__(self, window_coder, destination_fn=None):
        self._window_coder = window_coder
        self._destination_fn = destination_fn

    def process(self, element, w=beam.DoFn.WindowParam):
        encoded = self._window_coder.encode(w)
        if self._destination_fn is None:
            yield encoded, element
        else:
            yield (encoded, self._destination_fn(element)), element


class _TransactionalWriteImpl(beam.PTransform):
    def __init__(self, sink, label):
        super().__init__()
        self.sink = sink
        self.label = label

    def expand(self, pcoll):
        frequency = self.sink.triggering_frequency
        if isinstance(pcoll.windowing.windowfn, window.GlobalWindows) and not (frequency is not None and frequency > 0):
            raise ValueError(
                "%s: to write a GlobalWindow unbounded PCollection, triggering_frequency must be set "
                "and be greater than 0" % self.label
            )
        if self.sink.convert_fn is not None:
            pcoll = pcoll | "Convert" >> beam.ParDo(self.sink.convert_fn)
        windowed = pcoll | "SinkWindows" >> _sink_windowing(pcoll, frequency)
        return (
            windowed
            | "KeyByWindow" >> beam.ParDo(_KeyByWindow(windowed.windowing.windowfn.get_window_coder()))
            | "GroupPanes" >> beam.GroupByKey()
            | "WritePanes" >> beam.ParDo(WritePaneShardsFn(self.sink, self.label)).with_output_types(str)
        )


class _TransactionalWriteToFiles(beam.PTransform):
    def __init__(self, original, temp_dir, label):
        super().__init__()
        self.original = original
        self.temp_dir = temp_dir
        self.label = label

    def expand(self, pcoll):
        o = self.original
        windowed = pcoll | "SinkWindows" >> _sink_windowing(pcoll, None)
        return (
            windowed
            | "KeyByWindowAndDestination"
            >> beam.ParDo(_KeyByWindow(windowed.windowing.windowfn.get_window_coder(), o.destination_fn))
            | "GroupPanes" >> beam.GroupByKey()
            | "WritePanes"
            >> beam.ParDo(
                WriteDestinationPanesFn(o.path.get(), o.file_naming_fn, o.sink_fn, o.shards, self.temp_dir, self.label)
            )
        )


def transactional_write_for(transform, pcoll, options=None):
    """The replacement of `transform` applied to `pcoll`, or None: the
    exactly-once write for Beam's `WriteImpl` over a `FileBasedSink`, or
    `fileio.WriteToFiles`, on an unbounded PCollection; on a bounded one
    with a trigger or windows, `WriteToFiles` after `_sink_windowing`'s
    batch form (Beam's expansion groups its temporary files under the
    input's trigger, so a window's later pane would rename its files onto
    an earlier pane's names, and under RETRACTING hand a retraction to its
    renaming step).

    Called by SparkRunner when the transform is applied (`PipelineRunner.apply`),
    so the replacement is part of the pipeline's graph before anything
    else sees it: Beam's TestPipeline turns the pipeline into a proto and
    back before running it, after which the transforms' objects are gone."""
    if not isinstance(pcoll, beam.pvalue.PCollection):
        return None
    if pcoll.is_bounded:
        if isinstance(transform, fileio.WriteToFiles) and not pcoll.windowing.is_default():
            return _WindowedWriteToFiles(transform)
        return None
    if type(transform) is iobase.WriteImpl and isinstance(transform.sink, filebasedsink.FileBasedSink):
        prefix = transform.sink.file_path_prefix
        label = "file write to %s" % (prefix.get() if prefix.is_accessible() else prefix)
        if not ShardTemplate(transform.sink.shard_name_template).names_windows:
            raise UnsupportedPipelineError(
                "%s: its shard_name_template %r names neither the window (W or V) nor a UUID (U): on unbounded "
                "input every window would write the same file names and replace the files of earlier windows. "
                "Use a template with the window, such as %r (the default for unbounded writes)"
                % (label, transform.sink.shard_name_template, filebasedsink.DEFAULT_WINDOW_SHARD_NAME_TEMPLATE)
            )
        return _TransactionalWriteImpl(transform.sink, label)
    if isinstance(transform, fileio.WriteToFiles):
        label = "WriteToFiles to %s" % transform.path.get()
        temp_location = options.view_as(GoogleCloudOptions).temp_location if options is not None else None
        return _TransactionalWriteToFiles(transform, _write_to_files_temp_dir(transform, temp_location), label)
    return None


class _WindowedWriteToFiles(beam.PTransform):
    """Bounded `fileio.WriteToFiles` on windowed or triggered input: each
    window's records once, under the default trigger (the user's trigger
    already made the panes upstream), then Beam's own expansion."""

    def __init__(self, original):
        super().__init__()
        self.original = original

    def expand(self, pcoll):
        windowed = pcoll | "SinkWindows" >> beam.WindowInto(
            ExistingWindows(pcoll.windowing.windowfn.get_window_coder()),
            accumulation_mode=trigger.AccumulationMode.DISCARDING,
            allowed_lateness=pcoll.windowing.allowed_lateness,
        )
        return self.original.expand(windowed)


def _write_to_files_temp_dir(transform, temp_location):
    """The user's `temp_directory`, or one named after the output path (Beam
    picks a random one, which a restarted driver would not find)."""
    # Its expand (not yet called here) fills a random name in otherwise.
    chosen = write_to_files_temp_directory(transform)
    chosen = chosen.get() if chosen is not None and hasattr(chosen, "get") else chosen
    if chosen and not _FILEIO_RANDOM_TEMP.match(FileSystems.split(chosen)[1]):
        return chosen
    base = temp_location or transform.path.get()
    return FileSystems.join(base, ".temp-beam-spark-%s" % digest(transform.path.get()))
