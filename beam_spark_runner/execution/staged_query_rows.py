"""A streaming sink's rows of one micro-batch, staged under the checkpoint
as the query produced them, for the sink's commit to publish once the
batch is a completed checkpoint (worker/sink_commits.py).

One directory per sink and batch (the sink's `relative` path); a replay
of the batch replaces what an earlier run of it staged. Two writers:

- `stage_frame`: Spark's Parquet writer, from the batch's DataFrame of
  the sink's DATA and KEYED query rows (no Python runs in that job;
  Spark's commit protocol publishes one attempt of each task);
- `stage_collected`: the driver, which already collected the rows (an
  Arrow table), as one Arrow IPC file.

Every staged row has the columns (format, part, kind, payload): `format`
is `RAW_FORMAT` (a file whose rows say another format is another
writer's, which `staged_tables` lets its reader name), `part` the task
that made the row. `staged_values` reads them back in task order, each
task's rows in the order it made them, so a key's later rows come after
its earlier ones.
"""

from typing import Iterator, Tuple

import pyarrow as pa
import pyarrow.parquet as pq

from beam_spark_runner.execution import checkpoint_files, runner_io_glue
from beam_spark_runner.execution.sink_rows import query_values
from beam_spark_runner.worker.transactional_files import digest

# The format of the rows `stage_frame` and `stage_collected` write: the
# sink's query rows as the batch produced them.
RAW_FORMAT = 2
# A staged file the driver wrote: Arrow's IPC file format (Spark's writer
# writes Parquet files).
ARROW_SUFFIX = ".arrow"


def stage_frame(files, relative: str, selected) -> None:
    """Stages `selected` (a DataFrame of the sink's DATA and KEYED query
    rows) under `relative` with Spark's Parquet writer."""
    rows = selected.selectExpr("%d AS format" % RAW_FORMAT, "spark_partition_id() AS part", "kind", "payload")
    # "overwrite": a replay of the batch (after a restart) replaces whatever
    # an earlier run of it staged.
    rows.write.mode("overwrite").parquet(files.uri(relative))


def stage_collected(files, relative: str, rows) -> None:
    """Stages `rows` (an Arrow table of the sink's query rows collected on
    the driver: `kind`, `payload` and the `part` that made each row, in
    collect order) under `relative` as one Arrow IPC file, which is written
    and read without encoding the payloads again."""
    table = pa.table(
        {
            "format": pa.array([RAW_FORMAT] * rows.num_rows, pa.int32()),
            "part": rows.column("part").cast(pa.int32()),
            "kind": rows.column("kind").cast(pa.int32()),
            "payload": rows.column("payload"),
        }
    )
    out = pa.BufferOutputStream()
    with pa.ipc.new_file(out, table.schema) as writer:
        writer.write_table(table)
    files.delete(relative)  # what an earlier run of the batch staged
    files.write(checkpoint_files.join(relative, "part-00000" + ARROW_SUFFIX), out.getvalue())


def staged_tables(files, relative: str, label: str) -> Iterator[Tuple[int, int, "pa.Table"]]:
    """(first part, format, Arrow table) of each non-empty file staged under
    `relative`, in part order; a file whose rows mix formats, or that
    vanished while listed, raises naming the sink (`label`) and the file."""
    tables = []
    for name in files.list(relative):
        if not name.startswith("part-"):
            continue  # Spark's _SUCCESS marker
        path = checkpoint_files.join(relative, name)
        data = files.read(path)
        if data is None:
            raise OSError("%s: staged file %s vanished" % (label, files.uri(path)))
        if name.endswith(ARROW_SUFFIX):
            table = pa.ipc.open_file(pa.BufferReader(data)).read_all()
        else:
            table = pq.read_table(pa.BufferReader(data))
        if table.num_rows == 0:
            continue
        formats = set(table.column("format").to_pylist())
        if len(formats) != 1:
            raise ValueError("%s: staged file %s mixes formats %s" % (label, files.uri(path), sorted(formats)))
        tables.append((min(table.column("part").to_pylist()), formats.pop(), table))
    return iter(sorted(tables, key=lambda t: t[0]))


def raw_values(table, impl):
    """The values of a RAW_FORMAT staged table, decoded with the sink's
    element coder `impl`, in the table's order."""
    for batch in table.select(["kind", "payload"]).to_batches():
        yield from query_values(batch, impl)


def staged_values(files, relative: str, label: str, coder):
    """Every value staged under `relative` (RAW_FORMAT only: another format
    raises naming the sink and the file), in task order."""
    impl = coder.get_impl()
    for _, fmt, table in staged_tables(files, relative, label):
        if fmt != RAW_FORMAT:
            raise ValueError(
                "%s: staged rows under %s have format %d; this sink reads format %d"
                % (label, files.uri(relative), fmt, RAW_FORMAT)
            )
        yield from raw_values(table, impl)


def staged_epoch_dir(staged_dir: str, sink_id: str, batch_id: int) -> str:
    """Where a streaming sink stages a batch's rows, relative to the
    checkpoint: one directory per sink and batch under `staged_dir`."""
    return checkpoint_files.join(staged_dir, sink_id, "batch-%08d" % batch_id)


class CheckpointStaging(runner_io_glue.DriverCollectedStaging):
    """The sinks of one URN in a streaming query, each batch's rows staged
    under the checkpoint's `STAGED_DIR` (a subclass's) by `stage` (Spark's
    writer) or `stage_collected` (the driver). A subclass gives the commit
    (`publication`) and may look at the batch's values first (`check`: a
    value the sink cannot take fails the batch, never its commit)."""

    STAGED_DIR = None

    @classmethod
    def of_query(cls, context: runner_io_glue.StagingContext):
        return cls(context.run_id, context.components, context.files)

    def __init__(self, run, components, files):
        self._run = run  # the checkpoint's run id: the same for every restart of it
        self._components = components
        self._files = files

    def check(self, sink, table) -> None:
        """Before a batch is staged: `table()` gives its rows (an Arrow table
        of `kind` and `payload`)."""

    def publication(self, sink, sink_id: str, batch_id: int, relative: str):
        raise NotImplementedError

    def stage(self, selected, sink, batch_id):
        """Stages the sink's rows of the batch (`selected`: its DATA and
        KEYED query rows) and returns the publication."""
        self.check(sink, lambda: selected.select("kind", "payload").toArrow())
        sink_id, relative = self._where(sink, batch_id)
        # The query rows as they are, in the task's order: no Python runs in
        # the staging job; the commit decodes them.
        stage_frame(self._files, relative, selected)
        return self.publication(sink, sink_id, batch_id, relative)

    def stage_collected(self, rows, sink, batch_id):
        """`stage` for the sink's rows collected on the driver (an Arrow
        table with `kind`, `payload` and the `part` that made each row, in
        collect order), written as one staged file."""
        self.check(sink, lambda: rows)
        sink_id, relative = self._where(sink, batch_id)
        stage_collected(self._files, relative, rows)
        return self.publication(sink, sink_id, batch_id, relative)

    def _where(self, sink, batch_id):
        """(the sink's id in this checkpoint, the batch's staging directory)."""
        sink_id = "%s-%s" % (self._run, digest(sink.name)[:8])
        return sink_id, staged_epoch_dir(self.STAGED_DIR, sink_id, batch_id)
