"""Spark glue of WriteToDatabase (connectors/database_sink.py has the
protocol): the tasks holding the rows stage them, the driver publishes.

- Batch (`write_database_rdd`): one Spark job stages every partition of the
  input, each task attempt in one transaction; then the driver runs the
  publication, which moves one attempt per partition into the table in one
  transaction: a retried or speculative task never writes twice, and a
  failed job leaves the table as it was.
- Streaming (`stage_micro_batch`, from the query's foreachBatch sink,
  execution/streaming_spark_io.py): the batch's rows are staged under the
  batch id, and the FINALIZE row handed back carries the publication the
  checkpoint coordinator runs once the batch is a completed checkpoint.
"""

import functools
import pickle
import uuid

import pyarrow as pa
from apache_beam.internal import pickler
from apache_beam.transforms import window
from apache_beam.utils.timestamp import MAX_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

from beam_spark_runner.connectors.database_sink import DatabasePublication, prepare_tables, stage_rows
from beam_spark_runner.execution.naming import spark_call_site
from beam_spark_runner.streaming import rows as R
from beam_spark_runner.translation.database_io import WRITE_DATABASE_URN, decode_payload
from beam_spark_runner.worker import context, grouping
from beam_spark_runner.worker.runs import RunCodec
from beam_spark_runner.worker.transactional_files import digest

_STAGED_SCHEMA = "part int, rows long"


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


class MicroBatchStaging:
    """A streaming query's database sinks: `prepare()` at the query's start,
    `stage(frame, sink, batch_id)` per micro-batch with rows."""

    def __init__(self, run, components):
        self._run = run  # the checkpoint's run id: the same for every restart of it
        self._components = components

    @staticmethod
    def prepare(sinks):
        for sink in sinks:
            prepare_tables(decode_payload(sink.payload))

    def stage(self, selected, sink, batch_id):
        """Stages the sink's rows of the batch (`selected`: its DATA and
        KEYED query rows) and returns the FINALIZE row carrying the
        publication."""
        config = decode_payload(sink.payload)
        sink_id = "%s-%s" % (self._run, digest(sink.name)[:8])
        # A writer of its own for each run of the batch: a batch the query
        # replays (after a restart, in this driver or another) may spread
        # its rows over partitions differently, so its staged partitions
        # must never be taken for an earlier run's.
        writer = uuid.uuid4().hex[:16]
        body = functools.partial(_stage_query_rows, config, sink_id, writer, batch_id, self._components, sink.coder_id)
        selected.select("kind", "payload").mapInArrow(body, _STAGED_SCHEMA).collect()
        publication = DatabasePublication(config, sink_id, batch_id, writer)
        return R.finalize(sink.name, pickle.dumps((sink.display_name, pickler.dumps([publication]))))


def _stage_query_rows(config, sink, writer, epoch, components, coder_id, batches):
    impl = context.coder_impl(components, coder_id)

    def values():
        for batch in batches:
            for kind, payload in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()):
                if kind == R.KEYED:
                    payload = b"".join(element for _, element in R.keyed_entries(payload))
                for wv, _ in grouping.decode_elements(payload, impl):
                    yield wv.value

    part, attempt = _task()
    count = stage_rows(config, sink, writer, epoch, part, attempt, values())
    yield pa.RecordBatch.from_pydict(
        {"part": [part], "rows": [count]}, schema=pa.schema([("part", pa.int32()), ("rows", pa.int64())])
    )
