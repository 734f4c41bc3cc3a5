"""Spark glue of WriteToDatabase (io/database/sink_protocol.py has the
protocol): the tasks holding the rows stage them, the driver publishes.

- Batch (`write_database_rdd`): one Spark job stages every partition of the
  input, each task attempt in one transaction; then the driver runs the
  publication, which moves one attempt per partition into the table in one
  transaction: a retried or speculative task never writes twice, and a
  failed job leaves the table as it was.
- Streaming (`MicroBatchStaging`, from the query's foreachBatch sink,
  execution/query_sinks.py): the sink's query rows of the batch
  are staged as they are (encoded elements, or PostgreSQL COPY blocks) in
  a directory under the checkpoint named by the sink and the batch
  (`staged_epoch_dir`; a replay of the batch overwrites it): written by
  the driver, which collected them with the batch's other rows, when the
  query's sinks are all database sinks; else by Spark's Parquet writer
  (no Python runs in that job; Spark's commit protocol keeps one attempt
  per task). The
  FINALIZE row handed back carries a `StagedEpochPublication`, which the
  checkpoint coordinator runs once the batch is a completed checkpoint (and
  again after a restart that interrupted it): it reads the staged rows
  (`StagedRows`), one transaction writes the marker row and the rows into
  the table (`EpochCommit`), then the directory is removed. So each row
  is written into the database once, and a row staged for a completed
  checkpoint survives a database or driver restart in the checkpoint's
  own storage.
"""

import dataclasses
import functools
import itertools
import logging
import pickle
import uuid
from typing import Any

import pyarrow as pa
from apache_beam.transforms import window
from apache_beam.utils.timestamp import MAX_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

from beam_spark_runner.io.database.sink_protocol import (
    DatabasePublication,
    DatabaseWriteConfig,
    check_table,
    EpochCommit,
    RowEncoding,
    db_rows,
    prepare_tables,
    stage_rows,
)
from beam_spark_runner.execution import checkpoint_files, runner_io_glue, staged_query_rows, untyped_writes
from beam_spark_runner.execution.naming import spark_call_site
from beam_spark_runner.execution.sink_rows import query_values
from beam_spark_runner.execution.staged_query_rows import ARROW_SUFFIX, RAW_FORMAT  # noqa: F401 -- its staged formats
from beam_spark_runner.io.database.planning import WRITE_DATABASE_URN, decode_payload
from beam_spark_runner.worker import context
from beam_spark_runner.worker.runs import RunCodec
from beam_spark_runner.worker.untyped_columns import ColumnTypeError
from beam_spark_runner.io.database.sql_dialects import UnmappableColumn, dialect_of
from beam_spark_runner.worker.sink_commits import SinkCommit
from beam_spark_runner.worker.transactional_files import digest

_STAGED_SCHEMA = "part int, rows long"
# Staged blocks of PICKLED_FORMAT: `rows` (retract, row tuple) pairs,
# pickled, as block `block` of task `part`.
_BLOCKS_ARROW = pa.schema(
    [("format", pa.int32()), ("part", pa.int32()), ("block", pa.int32()), ("rows", pa.int64()), ("data", pa.binary())]
)
# Formats of a streaming sink's staged files (column `format`, the same in
# every row of a file): PICKLED_FORMAT, blocks of pickled (retract, row
# tuple) pairs (`_BLOCKS_ARROW`), which earlier versions staged; RAW_FORMAT,
# what the runner stages (execution/staged_query_rows.py).
PICKLED_FORMAT = 1
BLOCK_ROWS = 10_000
STAGED_DIR = checkpoint_files.join(checkpoint_files.BEAM_DIR, "database_staging")
_LOG = logging.getLogger(__name__)


def _task():
    """(partition, attempt id) of the running Spark task."""
    from pyspark import TaskContext

    task = TaskContext.get()
    return task.partitionId(), task.taskAttemptId()


# --- batch --------------------------------------------------------------------


def write_database_rdd(execution, stage):
    config = decode_payload(stage.native.payload)
    sc = execution.sc
    (port,) = stage.inputs
    inputs = execution.input_rdd(stage)
    if config.untyped:
        config = resolve_database_write(
            config,
            lambda columns: untyped_writes.batch_input_types(execution, inputs, port.coder_id, columns, config.label),
        )
    prepare_tables(config)
    writer = uuid.uuid4().hex[:16]
    sink = "batch-%s-%s" % (writer, digest(stage.name)[:8])
    body = functools.partial(_stage_blocks, config, sink, writer, execution.plan.components, port.coder_id)
    execution.check_not_cancelled()
    sc.setJobDescription("Beam: %s" % stage.display_name)
    with spark_call_site(sc, stage.display_name), untyped_writes.raising_column_errors():
        inputs.mapPartitions(body).collect()
    execution.after_spark_job()
    DatabasePublication(config, sink, 0, writer)()
    final = WindowedValue(None, MAX_TIMESTAMP, (window.GlobalWindow(),))
    ctx = context.components_context(execution.plan.components)
    blocks = [
        (i, RunCodec(ctx.coders[p.coder_id]).encode([(final, [config.table])])) for i, p in enumerate(stage.outputs)
    ]
    return sc.parallelize(blocks, 1)


def _stage_blocks(config, sink, writer, components, coder_id, pairs):
    codec = RunCodec(context.components_context(components).coders[coder_id])
    values = (value for _, block in pairs for _, run in codec.decode(block) for value in run)
    part, attempt = _task()
    yield stage_rows(config, sink, writer, 0, part, attempt, values)


runner_io_glue.register_batch_stage(WRITE_DATABASE_URN, write_database_rdd)


# --- fields Beam types Any ----------------------------------------------------


def database_target_types(config):
    """{column: (Spark type, nullable)} of a WriteToDatabase's existing
    table, or None when it does not exist yet; a column of a type no row
    field holds has None as its type."""
    dialect = dialect_of(config.url)
    with dialect.connect() as conn:
        return dialect.table_spark_types(conn.cursor(), config.table)


def resolve_database_write(config, infer):
    """A WriteToDatabase's `config` with its untyped fields typed: the
    existing table's column types (its columns checked first), else the
    data's (`infer(columns)`), which the table created for them must have."""
    target = database_target_types(config)
    if target is not None:
        check_table(config)
    schema, _ = untyped_writes.resolve(config, config.untyped, target, infer, config.describe())
    if target is None:
        dialect = dialect_of(config.url)
        for f in schema["fields"]:
            if f["name"] in config.untyped:
                try:
                    dialect.column_type(f["type"], f["name"], in_key=f["name"] in config.key_columns)
                except UnmappableColumn as e:
                    raise ColumnTypeError("%s: %s (its type inferred from the data)" % (config.label, e)) from None
    return dataclasses.replace(config, schema=schema)


# --- streaming ----------------------------------------------------------------


def staged_epoch_dir(sink_id: str, batch_id: int) -> str:
    """Where a streaming sink stages a batch's rows, relative to the
    checkpoint: one directory per sink and batch."""
    return staged_query_rows.staged_epoch_dir(STAGED_DIR, sink_id, batch_id)


class MicroBatchStaging(staged_query_rows.CheckpointStaging):
    """A streaming query's database sinks: `prepare()` at the query's start,
    then each batch staged (staged_query_rows.CheckpointStaging) with its
    `StagedEpochPublication`. `files`: the checkpoint's files
    (execution/checkpoint_files.py)."""

    STAGED_DIR = STAGED_DIR

    def __init__(self, run, components, files):
        super().__init__(run, components, files)
        self._configs = {}  # sink name -> its config, with its untyped fields typed

    def prepare(self, sinks):
        """Creates what each sink's table needs. A sink with fields Beam
        types Any takes their types from its table, or, when the table does
        not exist yet, from its first micro-batch's rows (`_typed`)."""
        for sink in sinks:
            config = decode_payload(sink.payload)
            if config.untyped:
                if database_target_types(config) is None:
                    continue
                config = resolve_database_write(config, lambda columns: {})
            prepare_tables(config)
            self._configs[sink.name] = config

    def check(self, sink, table):
        if decode_payload(sink.payload).untyped:
            self._typed(sink, self._sink_values(sink, table()))

    def _typed(self, sink, values):
        """The sink's config, its untyped fields typed (by `values()`, the
        batch's rows, when its table is new), with every one of the batch's
        values converted to its column's type now: a value the table cannot
        take fails the batch, never its commit."""
        config = self._configs.get(sink.name)
        if config is None:
            untyped = decode_payload(sink.payload)
            batch = list(values())
            config = resolve_database_write(
                untyped, lambda columns: untyped_writes.sample_values(columns, untyped.label, batch)
            )
            prepare_tables(config)
            self._configs[sink.name] = config
        if config.untyped:
            for _ in db_rows(config, values()):
                pass
        return config

    def _sink_values(self, sink, table):
        """A function giving the values of the sink's (kind, payload) rows in
        the Arrow `table`."""
        impl = context.coder_impl(self._components, sink.coder_id)
        return lambda: (
            v for batch in table.select(["kind", "payload"]).to_batches() for v in query_values(batch, impl)
        )

    def publication(self, sink, sink_id, batch_id, relative):
        config = self._configs.get(sink.name) or decode_payload(sink.payload)
        coder = context.components_context(self._components).coders[sink.coder_id]
        return StagedEpochPublication(config, sink_id, batch_id, self._files.root, relative, coder)


runner_io_glue.register_micro_batch_staging(WRITE_DATABASE_URN, MicroBatchStaging.of_query)


def staged_blocks(config, values, part, block_rows=BLOCK_ROWS):
    """Staged files' Arrow batches in PICKLED_FORMAT (`_BLOCKS_ARROW`) of
    task `part`'s `values` (rows, or `triggers.Retraction`s of rows): one
    per `block_rows` (retract, row tuple) pairs, pickled."""
    rows = db_rows(config, values)
    for block in itertools.count():
        chunk = list(itertools.islice(rows, block_rows))
        if not chunk:
            return
        yield pa.RecordBatch.from_pydict(
            {
                "format": [PICKLED_FORMAT],
                "part": [part],
                "block": [block],
                "rows": [len(chunk)],
                "data": [pickle.dumps(chunk, protocol=pickle.HIGHEST_PROTOCOL)],
            },
            schema=_BLOCKS_ARROW,
        )


@dataclasses.dataclass(frozen=True)
class StagedEpochPublication(SinkCommit):
    """Commits the rows a streaming sink staged for one batch under the
    checkpoint (`root`, `relative`) into the table, exactly once
    (`EpochCommit`), then removes them. Run again after a restart that
    interrupted it: the marker row says the batch is in the table, and
    only the removal is done again. Raises DatabaseError naming the sink,
    the table and the database's message when the database refuses,
    leaving the staged rows for the next call. `coder`: the sink's element
    coder, which decodes rows staged as query rows (RAW_FORMAT)."""

    config: DatabaseWriteConfig
    sink: str
    epoch: int
    root: str
    relative: str
    coder: Any = None

    def commit(self, context):
        files = context.open_files(self.root)
        staged = StagedRows(files, self.relative, self.config, self.coder)
        EpochCommit(self.config, self.sink, self.epoch)(staged.rows)
        files.delete(self.relative)


class StagedRows:
    """The rows staged under `relative`, as `EpochCommit` takes them for the
    sink's `row_encoding`: (retract, row tuple) pairs, or COPY text blocks.
    The staging tasks' files in task (part) order, each file's rows in the
    order its task wrote them, so a key's later rows (a retraction and its
    replacement) come after its earlier ones. Files of PICKLED_FORMAT hold
    blocks of pairs; of RAW_FORMAT, query rows decoded with `coder`."""

    def __init__(self, files, relative, config, coder):
        self._files = files
        self._relative = relative
        self._config = config
        self._coder = coder

    def rows(self):
        copy_text = self._config.row_encoding is RowEncoding.POSTGRESQL_COPY_TEXT
        impl = self._coder.get_impl() if self._coder is not None else None
        for _, fmt, table in staged_query_rows.staged_tables(self._files, self._relative, self._config.label):
            if fmt == RAW_FORMAT and copy_text:
                yield from staged_query_rows.raw_values(table, impl)  # the blocks, handed over as they are
            elif fmt == RAW_FORMAT:
                yield from db_rows(self._config, staged_query_rows.raw_values(table, impl))
            elif fmt == PICKLED_FORMAT:
                for _, blob in sorted(zip(table.column("block").to_pylist(), table.column("data").to_pylist())):
                    yield from pickle.loads(blob)
            else:
                raise ValueError(
                    "%s: staged rows under %s have format %d; this runner reads formats %d and %d"
                    % (self._config.label, self._files.uri(self._relative), fmt, PICKLED_FORMAT, RAW_FORMAT)
                )
