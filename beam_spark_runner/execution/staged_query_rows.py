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

from beam_spark_runner.execution import checkpoint_files
from beam_spark_runner.execution.sink_rows import query_values

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
