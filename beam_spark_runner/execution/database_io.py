"""Spark glue of WriteToDatabase (connectors/database_sink.py has the
protocol): the tasks holding the rows stage them, the driver publishes.

- Batch (`write_database_rdd`): one Spark job stages every partition of the
  input, each task attempt in one transaction; then the driver runs the
  publication, which moves one attempt per partition into the table in one
  transaction: a retried or speculative task never writes twice, and a
  failed job leaves the table as it was.
- Streaming (`MicroBatchStaging`, from the query's foreachBatch sink,
  execution/streaming_spark_io.py): the tasks holding the batch's rows
  turn them into the table's row tuples, pickled in blocks, and Spark's
  Parquet writer stages them in a directory under the checkpoint named
  by the sink and the batch (`staged_epoch_dir`; a replay of the batch
  overwrites it; Spark's commit protocol keeps one attempt per task). The
  FINALIZE row handed back carries a `StagedEpochPublication`, which the
  checkpoint coordinator runs once the batch is a completed checkpoint (and
  again after a restart that interrupted it): one transaction writes the
  marker row and the staged rows into the table (`EpochCommit`), then the
  directory is removed. So each row is written into the database once,
  and a row staged for a completed checkpoint survives a database or
  driver restart in the checkpoint's own storage.
"""

import dataclasses
import functools
import itertools
import logging
import pickle
import uuid

import pyarrow as pa
from apache_beam.internal import pickler
from apache_beam.transforms import window
from apache_beam.utils.timestamp import MAX_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

from beam_spark_runner.connectors.database_sink import (
    DatabasePublication,
    DatabaseWriteConfig,
    EpochCommit,
    db_rows,
    prepare_tables,
    stage_rows,
)
from beam_spark_runner.execution import checkpoint_files
from beam_spark_runner.execution.naming import spark_call_site
from beam_spark_runner.streaming import rows as R
from beam_spark_runner.translation.database_io import WRITE_DATABASE_URN, decode_payload
from beam_spark_runner.worker import context, grouping
from beam_spark_runner.worker.runs import RunCodec
from beam_spark_runner.worker.transactional_files import digest

_STAGED_SCHEMA = "part int, rows long"
# A streaming sink's staged blocks: `rows` (retract, row tuple) pairs,
# pickled, as block `block` of task `part`. `format` is STAGED_FORMAT.
_BLOCKS_SCHEMA = "format int, part int, block int, rows long, data binary"
_BLOCKS_ARROW = pa.schema(
    [("format", pa.int32()), ("part", pa.int32()), ("block", pa.int32()), ("rows", pa.int64()), ("data", pa.binary())]
)
STAGED_FORMAT = 1
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
    prepare_tables(config)
    writer = uuid.uuid4().hex[:16]
    sink = "batch-%s-%s" % (writer, digest(stage.name)[:8])
    body = functools.partial(_stage_blocks, config, sink, writer, execution.plan.components, port.coder_id)
    execution.check_not_cancelled()
    sc.setJobDescription("Beam: %s" % stage.display_name)
    with spark_call_site(sc, stage.display_name):
        execution.input_rdd(stage).mapPartitions(body).collect()
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


DATABASE_IO_STAGES = {WRITE_DATABASE_URN: write_database_rdd}


# --- streaming ----------------------------------------------------------------


def staged_epoch_dir(sink_id: str, batch_id: int) -> str:
    """Where a streaming sink stages a batch's rows, relative to the
    checkpoint: one directory per sink and batch."""
    return checkpoint_files.join(STAGED_DIR, sink_id, "batch-%08d" % batch_id)


class MicroBatchStaging:
    """A streaming query's database sinks: `prepare()` at the query's start,
    `stage(frame, sink, batch_id)` per micro-batch with rows. `files`: the
    checkpoint's files (execution/checkpoint_files.py)."""

    def __init__(self, run, components, files):
        self._run = run  # the checkpoint's run id: the same for every restart of it
        self._components = components
        self._files = files

    @staticmethod
    def prepare(sinks):
        for sink in sinks:
            prepare_tables(decode_payload(sink.payload))

    def stage(self, selected, sink, batch_id):
        """Stages the sink's rows of the batch (`selected`: its DATA and
        KEYED query rows) under the checkpoint and returns the FINALIZE row
        carrying the publication."""
        config = decode_payload(sink.payload)
        sink_id = "%s-%s" % (self._run, digest(sink.name)[:8])
        relative = staged_epoch_dir(sink_id, batch_id)
        body = functools.partial(_staged_blocks, config, self._components, sink.coder_id)
        blocks = selected.select("kind", "payload").mapInArrow(body, _BLOCKS_SCHEMA)
        # "overwrite": a replay of the batch (after a restart) replaces
        # whatever an earlier run of it staged; Spark's commit protocol
        # publishes one attempt of each task.
        blocks.write.mode("overwrite").parquet(self._files.uri(relative))
        publication = StagedEpochPublication(config, sink_id, batch_id, self._files.root, relative)
        return R.finalize(sink.name, pickle.dumps((sink.display_name, pickler.dumps([publication]))))


def _staged_blocks(config, components, coder_id, batches):
    """mapInArrow body: the sink's query rows as blocks of pickled
    (retract, row tuple) pairs (`_BLOCKS_SCHEMA`)."""
    impl = context.coder_impl(components, coder_id)
    part, _ = _task()
    yield from staged_blocks(config, (value for batch in batches for value in query_values(batch, impl)), part)


def query_values(batch, impl):
    """The values of an Arrow batch of a sink's DATA and KEYED query rows
    (kind, payload), decoded with the element coder `impl`."""
    for kind, payload in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()):
        if kind == R.KEYED:
            # A keyed reader beside the sink: its elements, each with its key.
            payload = b"".join(element for _, element in R.keyed_entries(payload))
        for wv, _ in grouping.decode_elements(payload, impl):
            yield wv.value


def staged_blocks(config, values, part, block_rows=BLOCK_ROWS):
    """Arrow batches (`_BLOCKS_SCHEMA`) of task `part`'s `values` (rows, or
    `triggers.Retraction`s of rows): one per `block_rows` (retract, row
    tuple) pairs, pickled."""
    rows = db_rows(config, values)
    for block in itertools.count():
        chunk = list(itertools.islice(rows, block_rows))
        if not chunk:
            return
        yield pa.RecordBatch.from_pydict(
            {
                "format": [STAGED_FORMAT],
                "part": [part],
                "block": [block],
                "rows": [len(chunk)],
                "data": [pickle.dumps(chunk, protocol=pickle.HIGHEST_PROTOCOL)],
            },
            schema=_BLOCKS_ARROW,
        )


@dataclasses.dataclass(frozen=True)
class StagedEpochPublication:
    """Commits the rows a streaming sink staged for one batch under the
    checkpoint (`root`, `relative`) into the table, exactly once
    (`EpochCommit`), then removes them. Run again after a restart that
    interrupted it: the marker row says the batch is in the table, and
    only the removal is done again. Raises DatabaseError naming the sink,
    the table and the database's message when the database refuses,
    leaving the staged rows for the next call."""

    config: DatabaseWriteConfig
    sink: str
    epoch: int
    root: str
    relative: str

    def __call__(self):
        files = _checkpoint_files(self.root)
        EpochCommit(self.config, self.sink, self.epoch)(lambda: _read_blocks(files, self.relative, self.config))
        files.delete(self.relative)


def _checkpoint_files(root):
    """The checkpoint's files; Spark's Hadoop file system (through the
    driver's SparkSession) only for a checkpoint that is not local."""
    spark = None
    if not checkpoint_files.is_local(root):
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.getOrCreate()
    return checkpoint_files.open_checkpoint_files(spark, root)


def _read_blocks(files, relative, config):
    """The staged (retract, row tuple) pairs, in (part, block) order."""
    import pyarrow.parquet as pq

    blocks = []
    for name in files.list(relative):
        if not name.startswith("part-"):
            continue  # Spark's _SUCCESS marker
        data = files.read(checkpoint_files.join(relative, name))
        if data is None:
            raise OSError(
                "%s: staged file %s vanished" % (config.label, files.uri(checkpoint_files.join(relative, name)))
            )
        table = pq.read_table(pa.BufferReader(data))
        for fmt, part, block, blob in zip(
            table.column("format").to_pylist(),
            table.column("part").to_pylist(),
            table.column("block").to_pylist(),
            table.column("data").to_pylist(),
        ):
            if fmt != STAGED_FORMAT:
                raise ValueError(
                    "%s: staged rows at %s have format %r; this runner reads format %d"
                    % (config.label, files.uri(relative), fmt, STAGED_FORMAT)
                )
            blocks.append((part, block, blob))
    blocks.sort(key=lambda b: (b[0], b[1]))
    for _, _, blob in blocks:
        yield from pickle.loads(blob)
