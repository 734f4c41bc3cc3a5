"""Exactly-once file writes for streaming pipelines: each pane is written to
staged files in a worker, and published (renamed to its final names) on the
driver only after the micro-batch that fired it is a completed checkpoint.

How it is exactly once (translation/file_sink_overrides.py builds the
transforms; docs/reliability.md states the guarantee):

- a pane is fired by a GroupByKey whose state lives in Spark's state store,
  so each pane is fired by exactly one committed micro-batch;
- the DoFns here write the pane's files to *staged* paths that depend only
  on the pane (its window, index and shard), never on the attempt: a task
  retry or a replayed micro-batch overwrites what a failed attempt staged;
- the rename is a `Publication`, registered as a bundle finalization
  callback. The runner runs those on the driver after the batch's
  checkpoint completed (streaming/checkpoint_coordinator.py), keeps them in
  the pending record until they ran, and runs them again after a restart
  that interrupted them. A Publication is idempotent: a staged file already
  renamed is skipped. Unlike other finalization callbacks, a failing
  Publication fails the run (its record stays, so the next run publishes).

Each pane stages in its own directory (`<window's staging prefix>-p<pane
index>`), written only by that pane's attempts: its publication deletes it
whole, with what aborted attempts left there, and the directories of
earlier panes of the same window that aborted attempts left behind (a
replay that fired fewer panes). Nothing else writes those directories while
a publication runs: a pane index is fired by one committed batch.
"""

import dataclasses
import hashlib
import logging
import os
from typing import Optional, Tuple

import apache_beam as beam
from apache_beam.io import fileio
from apache_beam.io.filesystem import BeamIOError
from apache_beam.io.filesystems import FileSystems

from beam_spark_runner.worker.sink_commits import SinkCommit
from beam_spark_runner.worker.file_names import FileBasedSinkNames, destination_file_name
from triggers.retractions import is_retraction

_LOG = logging.getLogger(__name__)
_PANE_DIR = "-p"


class PublicationError(RuntimeError):
    """A pane's staged file and its final file are both missing: published
    output would be incomplete. The message names both."""


def digest(*parts) -> str:
    return hashlib.sha1("\x00".join(str(p) for p in parts).encode()).hexdigest()[:16]


def staged_name(shard) -> str:
    """The staged file of one shard of a pane, in the pane's own directory:
    named by the pane, never by the attempt, so a retry overwrites a failed
    attempt's file."""
    return "shard-%d" % shard


def pane_dir(window_prefix, pane_index) -> str:
    """The staging directory of one pane of the window staged under `window_prefix`."""
    return "%s%s%d" % (window_prefix, _PANE_DIR, pane_index)


def _pane_of_dir(path, window_prefix) -> Optional[int]:
    head = window_prefix + _PANE_DIR
    path = path.rstrip("/")
    if not path.startswith(head):
        return None
    index = path[len(head) :]
    return int(index) if index.isdigit() else None


@dataclasses.dataclass(frozen=True)
class Move:
    staged: str
    final: str


@dataclasses.dataclass(frozen=True)
class Publication(SinkCommit):
    """Publishes one pane: renames its staged files to their final names.

    Idempotent: a staged file that is gone while its final file exists was
    published by an earlier call. `stale_glob` (Beam's WriteImpl): final
    files of the same window left by an earlier run are deleted first, as
    Beam's `pre_finalize_windowed` does; files this pane publishes are
    never among them. Then the pane's staging directory is deleted, and
    those of earlier panes of the window (left by aborted attempts)."""

    transform: str  # the user's transform, for messages
    window_prefix: str  # the window's staging directories are <window_prefix>-p<pane index>
    pane_index: int
    moves: Tuple[Move, ...]
    stale_glob: Optional[str] = None

    @property
    def staging_dir(self):
        return pane_dir(self.window_prefix, self.pane_index)

    def commit(self, context):
        pending = [m for m in self.moves if FileSystems.exists(m.staged)]
        lost = [m for m in self.moves if m not in pending and not FileSystems.exists(m.final)]
        if lost:
            raise PublicationError(
                "%s: cannot publish pane %d: neither the staged nor the final file exists for %s"
                % (self.transform, self.pane_index, ", ".join("%s -> %s" % (m.staged, m.final) for m in lost))
            )
        if pending:
            if self.stale_glob:
                ours = {m.final for m in self.moves}
                stale = [f.path for r in FileSystems.match([self.stale_glob]) for f in r.metadata_list]
                stale = [path for path in stale if path not in ours]
                if stale:
                    _LOG.warning(
                        "%s: deleting %d earlier files matching %s", self.transform, len(stale), self.stale_glob
                    )
                    FileSystems.delete(stale)
            for directory in sorted({os.path.dirname(m.final) for m in pending}):
                _mkdirs(directory)
            # A final file that exists while its staged file does too is from
            # an earlier run of the pipeline: replaced, as Beam's rename does.
            existing = [m.final for m in pending if FileSystems.exists(m.final)]
            if existing:
                FileSystems.delete(existing)
            FileSystems.rename([m.staged for m in pending], [m.final for m in pending])
        self._tidy()

    def _tidy(self):
        try:
            # Pane directories are found through the files in them (Beam's
            # match lists files, not directories); this pane's own is
            # deleted even when empty.
            staged = FileSystems.match([self.window_prefix + _PANE_DIR + "*/*"])[0].metadata_list
            dirs = {os.path.dirname(f.path.rstrip("/")) for f in staged}
            dirs = {d for d in dirs if (_pane_of_dir(d, self.window_prefix) or 0) <= self.pane_index}
            if FileSystems.exists(self.staging_dir):
                dirs.add(self.staging_dir)
            if dirs:
                FileSystems.delete(sorted(dirs))
        except (BeamIOError, OSError) as e:
            # Published output is complete; only tidying failed.
            _LOG.warning("%s: could not delete staged files under %s: %s", self.transform, self.window_prefix, e)


def _mkdirs(directory):
    if directory and not FileSystems.exists(directory):
        try:
            FileSystems.mkdirs(directory)
        except (BeamIOError, OSError):
            if not FileSystems.exists(directory):
                raise


def _balanced_chunks(values, n):
    """`values` cut into `n` contiguous chunks whose sizes differ by at most one."""
    size, extra = divmod(len(values), n)
    chunks, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        chunks.append(values[start:end])
        start = end
    return chunks


class WritePaneShardsFn(beam.DoFn):
    """Beam's unbounded `WriteImpl` over a FileBasedSink, one pane at a time.

    Input: (encoded window, values) panes of the sink's GroupByKey by window.
    Writes the pane's values through the sink's writers into staged files:
    `num_shards` contiguous chunks (empty ones too unless the sink skips
    empty output), or with `num_shards=0` one; each chunk to one file, or
    more when a writer is at capacity (`max_records_per_shard`,
    `max_bytes_per_shard`), as Beam's writers roll over. Outputs the final
    file names (file_names.FileBasedSinkNames: Beam's, with the pane marker
    on a window's later panes), which hold the data once the batch's
    checkpoint completed. An empty pane writes and publishes nothing."""

    def __init__(self, sink, label):
        self.sink = sink
        self.label = label
        self._names = None

    def setup(self):
        self._names = FileBasedSinkNames(self.sink)

    def _window_prefix(self, encoded_window):
        prefix = self.sink.file_path_prefix.get()
        base, last = FileSystems.split(prefix)
        return FileSystems.join(base, "beam-temp-%s-%s" % (last, digest(prefix, encoded_window.hex())))

    def process(
        self,
        element,
        w=beam.DoFn.WindowParam,
        pane=beam.DoFn.PaneInfoParam,
        finalizer=beam.DoFn.BundleFinalizerParam,
    ):
        encoded_window, values = element
        values = list(values)
        if not values:
            return
        window_prefix = self._window_prefix(encoded_window)
        staging = pane_dir(window_prefix, pane.index)
        _mkdirs(staging)
        if self.sink.num_shards > 0:
            chunks = _balanced_chunks(values, self.sink.num_shards)
        else:
            chunks = [values]
        staged = []
        for chunk in chunks:
            staged.extend(self._write_chunk(staging, chunk, len(staged)))
        names = self._names
        moves = tuple(
            Move(path, names.final_name(shard, len(staged), w, pane.index)) for shard, path in enumerate(staged)
        )
        finalizer.register(
            Publication(self.label, window_prefix, pane.index, moves, names.glob(len(staged), w, pane.index))
        )
        for move in moves:
            yield move.final

    def _write_chunk(self, staging, chunk, first_shard):
        """Writes `chunk` to one staged file, or several when a writer is at
        capacity (`max_records_per_shard`, `max_bytes_per_shard`), as Beam's
        writers roll over; returns their paths."""
        paths, writer = [], None
        for value in chunk:
            if writer is None:
                writer = self.sink.open_writer(staging, staged_name(first_shard + len(paths)))
            _write(writer, value, self.label)
            if writer.at_capacity():
                paths.append(writer.close())
                writer = None
        if writer is None and not paths:  # an empty shard
            writer = self.sink.open_writer(staging, staged_name(first_shard))
        if writer is not None:
            paths.append(writer.close())
        return paths


def _write(writer, value, label):
    try:
        writer.write(value)
    except Exception as e:
        if is_retraction(value):
            raise TypeError(
                "%s: cannot write %r: this sink's records cannot represent a retraction (its input comes "
                "from RETRACTING panes). Map the retractions to records the sink can write "
                "(triggers.map_pane, is_retraction), or use DISCARDING or ACCUMULATING panes" % (label, value)
            ) from e
        raise


class WriteDestinationPanesFn(beam.DoFn):
    """`fileio.WriteToFiles` on unbounded input, one pane of one destination
    at a time. Input: ((encoded window, destination), records) panes of a
    GroupByKey by window and destination. Writes at most `shards` files per
    pane (contiguous chunks; no empty files), named by the transform's
    `file_naming` under `path` (with the pane marker where that naming
    would give a window's later pane the names of an earlier one:
    file_names.destination_file_name), and outputs a `fileio.FileResult`
    per file, as WriteToFiles does."""

    def __init__(self, path, file_naming, sink_fn, shards, temp_dir, label):
        self.path = path
        self.file_naming = file_naming
        self.sink_fn = sink_fn
        self.shards = shards
        self.temp_dir = temp_dir
        self.label = label

    def process(
        self,
        element,
        w=beam.DoFn.WindowParam,
        pane=beam.DoFn.PaneInfoParam,
        finalizer=beam.DoFn.BundleFinalizerParam,
    ):
        (encoded_window, destination), records = element
        records = list(records)
        if not records:
            return
        window_prefix = FileSystems.join(self.temp_dir, digest(destination, encoded_window.hex()))
        staging = pane_dir(window_prefix, pane.index)
        _mkdirs(staging)
        chunks = _balanced_chunks(records, min(self.shards, len(records)))
        moves, results = [], []
        for shard, chunk in enumerate(chunks):
            path = FileSystems.join(staging, staged_name(shard))
            sink = self.sink_fn(destination)
            handle = FileSystems.create(path, **sink.create_metadata(destination, path)._asdict())
            sink.open(handle)
            for record in chunk:
                _write(sink, record, self.label)
            sink.flush()
            handle.close()
            name = destination_file_name(self.file_naming, w, pane, shard, len(chunks), destination)
            moves.append(Move(path, FileSystems.join(self.path, name)))
            results.append(fileio.FileResult(name, shard, len(chunks), w, pane, destination))
        finalizer.register(Publication(self.label, window_prefix, pane.index, tuple(moves)))
        yield from results
