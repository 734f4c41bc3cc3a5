"""Spark glue of ReadFromSpark and WriteToSpark (io/spark/planning.py) in
batch: the read and the write as stages of the runner's plan (their
schemas are resolved before it plans: io/spark/schema_glue.py).

Rows cross between Spark and Beam as Arrow: a read is the data source's
DataFrame through `mapInArrow`, which cuts each Arrow batch into slices of
at most BLOCK_ROWS rows and hands each on as one Spark row holding its
Arrow IPC stream; a Python `mapPartitions` over those turns each slice into
a block of Beam rows, column by column (kept as Python objects when the
next stage runs in the same task, else encoded); a write turns the
input's blocks back into Arrow batches with `mapInArrow` and hands the
DataFrame to Spark's writer in one Spark job.
"""

import dataclasses
import functools
import operator

import pyarrow as pa
from apache_beam.transforms import window
from apache_beam.utils.timestamp import MAX_TIMESTAMP, MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

from beam_spark_runner.errors import UnsupportedPipelineError
from beam_spark_runner.execution import runner_io_glue, spark_internals, untyped_writes
from beam_spark_runner.execution.naming import name_rdd, spark_call_site
from beam_spark_runner.io.spark.planning import READ_SPARK_URN, WRITE_SPARK_URN, decode_payload
from beam_spark_runner.io.spark.schema_glue import first_line, spark_reader
from beam_spark_runner.worker import context, spark_rows
from beam_spark_runner.worker.gc_tuning import bulk_data_gc
from beam_spark_runner.worker.runs import DecodedBlock, RunCodec

BLOCK_ROWS = 4096


# --- batch -----------------------------------------------------------------------


def read_spark_rdd(execution, stage):
    config = decode_payload(stage.native.payload)
    spark = execution.spark
    frame = spark_reader(spark, config, False)
    if frame.schema.jsonValue() != config.schema:
        raise UnsupportedPipelineError(
            "%s (%s): the source's schema changed since the run was planned: now %s, was %s"
            % (config.label, config.describe(), frame.schema.simpleString(), _simple(config.schema))
        )
    ports = tuple((i, p.coder_id) for i, p in enumerate(stage.outputs))
    in_process = execution.feeds_plain_stage_in_process(stage)
    to_blocks = functools.partial(_arrow_to_blocks, config, execution.plan.components, ports, in_process)
    with spark_call_site(execution.sc, stage.display_name):
        payloads = frame.mapInArrow(_arrow_ipc, "arrow binary")
        return name_rdd(payloads.rdd.mapPartitions(to_blocks), stage.display_name)


def _simple(schema_json):
    from pyspark.sql.types import StructType

    return StructType.fromJson(schema_json).simpleString()


def _arrow_ipc(batches):
    """mapInArrow body: each Arrow batch of the source cut into slices of at
    most BLOCK_ROWS rows, each slice as one row holding its Arrow IPC stream."""
    for batch in batches:
        for start in range(0, batch.num_rows, BLOCK_ROWS):
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, batch.schema) as writer:
                writer.write_batch(batch.slice(start, BLOCK_ROWS))
            stream = sink.getvalue()
            offsets = pa.array([0, stream.size], pa.int32()).buffers()[1]
            column = pa.Array.from_buffers(pa.binary(), 1, [None, offsets, stream])
            yield pa.RecordBatch.from_arrays([column], names=["arrow"])


def _arrow_to_blocks(config, components, ports, in_process, payloads):
    """`(output index, block)` of the Beam rows in the Arrow IPC payloads
    (`_arrow_ipc`), one block per payload batch: a runs.DecodedBlock when
    the only reader is a plain Python stage in the same task, else the rows
    encoded for every output port."""
    ctx = context.components_context(components)
    codecs = [(i, RunCodec(ctx.coders[coder_id])) for i, coder_id in ports]
    row_type = spark_rows.row_type(config.schema)
    fields = config.schema["fields"]
    readers = [spark_rows.column_reader_of(f["type"]) for f in fields]
    names = [f["name"] for f in fields]
    event_time = _event_time(config, names)
    with bulk_data_gc():
        for (payload,) in payloads:
            for batch in pa.ipc.open_stream(pa.py_buffer(payload)):
                rows = spark_rows.rows_of(row_type, readers, batch)
                runs = _runs(rows, list(map(event_time, rows)) if event_time is not None else None)
                if in_process:
                    yield codecs[0][0], DecodedBlock(runs)
                else:
                    for index, codec in codecs:
                        yield index, codec.encode(runs)


def _event_time(config, names):
    """A function giving a row's event time from its `timestamp_column`
    (a timestamp, or a number of `timestamp_unit`s), or None without one."""
    if not config.timestamp_column:
        return None
    index = names.index(config.timestamp_column)
    if config.timestamp_unit is None:
        return operator.itemgetter(index)
    read = spark_rows.numeric_event_time(config.timestamp_unit, config.timestamp_column, config.label)
    return lambda row: read(row[index])


def _runs(rows, timestamps):
    """(template, values) runs of the rows: all at the minimum timestamp, or
    each at its event time (a null one at the minimum timestamp)."""
    glob = (window.GlobalWindow(),)
    if timestamps is None:
        return [(WindowedValue(None, MIN_TIMESTAMP, glob), rows)]
    runs, last, values = [], object(), None
    for row, ts in zip(rows, timestamps):
        ts = MIN_TIMESTAMP if ts is None else ts
        if ts != last:
            values = []
            runs.append((WindowedValue(None, ts, glob), values))
            last = ts
        values.append(row)
    return runs


def write_spark_rdd(execution, stage):
    from pyspark.sql.types import StructType

    config = decode_payload(stage.native.payload)
    spark, sc = execution.spark, execution.sc
    (port,) = stage.inputs
    execution.check_not_cancelled()
    sc.setJobDescription("Beam: %s" % stage.display_name)
    with spark_call_site(sc, stage.display_name):
        inputs = execution.input_rdd(stage)
        convert = {}
        if config.untyped:
            config, convert = _resolved(execution, config, inputs, port.coder_id)
        spark_schema = StructType.fromJson(config.schema)
        decode = functools.partial(blocks_to_arrow, config.schema, execution.plan.components, port.coder_id, convert)
        blocks = inputs.map(_block_row)
        with spark_internals.keeping_active_session(spark):
            frame = spark.createDataFrame(blocks, "block binary").mapInArrow(decode, spark_schema)
        writer = spark_writer(frame, config, config.mode)
        try:
            with untyped_writes.raising_column_errors():
                if config.table:
                    writer.saveAsTable(config.table)
                else:
                    writer.save(config.path)
        except Exception as e:  # noqa: BLE001 -- Spark's writer errors come in several classes
            if _is_user_code_failure(e) or isinstance(e, untyped_writes.ColumnTypeError):
                raise
            raise UnsupportedPipelineError(
                "%s (%s): Spark's writer failed: %s" % (config.label, config.describe(), first_line(e))
            ) from None
    execution.after_spark_job()
    destination = config.table or config.path
    final = WindowedValue(None, MAX_TIMESTAMP, (window.GlobalWindow(),))
    ctx = context.components_context(execution.plan.components)
    blocks = [
        (i, RunCodec(ctx.coders[p.coder_id]).encode([(final, [destination])])) for i, p in enumerate(stage.outputs)
    ]
    return sc.parallelize(blocks, 1)


def _resolved(execution, config, inputs, coder_id):
    """(`config` with its untyped fields typed, their converters): the
    target's column types, else the types of every row of `inputs`."""
    target = untyped_writes.spark_target_types(execution.spark, config)

    def infer(columns):
        return untyped_writes.batch_input_types(execution, inputs, coder_id, columns, config.label)

    schema, convert = untyped_writes.resolve(config, config.untyped, target, infer, config.describe())
    return dataclasses.replace(config, schema=schema), convert


def spark_writer(frame, config, mode):
    """`frame`'s DataFrameWriter as `config` asks, in `mode`."""
    writer = frame.write.mode(mode)
    if config.format:
        writer = writer.format(config.format)
    if config.options:
        writer = writer.options(**dict(config.options))
    if config.partition_by:
        writer = writer.partitionBy(*config.partition_by)
    return writer


def _is_user_code_failure(error):
    """A failure inside a Beam stage that fed the write (its own message
    says so), as opposed to the writer's."""
    return "Beam stage" in str(error)


def _block_row(pair):
    return (bytes(pair[1]),)


def blocks_to_arrow(schema, components, coder_id, convert, frames):
    """mapInArrow body: the blocks of encoded Beam rows as Arrow batches of
    the Spark schema; `convert`: {column: converter} of the fields Beam
    types Any (worker/untyped_columns.py)."""
    from pyspark.sql.types import StructType

    arrow_schema = spark_internals.arrow_schema(StructType.fromJson(schema))
    codec = RunCodec(context.components_context(components).coders[coder_id])
    fields = schema["fields"]
    writers = [(f["name"], converting_writer(f["type"], convert.get(f["name"]))) for f in fields]
    for frame in frames:
        for block in frame.column(0).to_pylist():
            rows = [row for _, run in codec.decode(block) for row in run]
            if not rows:
                continue
            columns = [[write(getattr(row, name)) for row in rows] for name, write in writers]
            yield pa.RecordBatch.from_arrays(
                [pa.array(col, type=arrow_schema.field(i).type) for i, col in enumerate(columns)], schema=arrow_schema
            )


def converting_writer(spark_type, convert):
    """spark_rows.writer_of(spark_type), after `convert` (if any)."""
    write = spark_rows.writer_of(spark_type)
    if convert is None:
        return write
    return lambda value: write(convert(value))


runner_io_glue.register_batch_stage(READ_SPARK_URN, read_spark_rdd)
runner_io_glue.register_batch_stage(WRITE_SPARK_URN, write_spark_rdd)
