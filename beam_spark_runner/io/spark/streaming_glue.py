"""Spark glue of ReadFromSpark and WriteToSpark in a streaming query
(io/spark/planning.py; the plan's `SparkSource`s and `SparkSink`s).

A source is Spark's own `readStream`, unioned into the query beside the
Beam source: its Arrow batches become query rows in the executors
(`source_rows`, a `mapInArrow`: the data stays in the JVM until then),
each element a Beam row timestamped by its `timestamp_column` or by the
micro-batch's time (`current_timestamp()`, which Spark keeps in its offset
log: a replayed batch gets the same). Each task also sends one EVENT_TIMES
row: the newest event time it read per source partition, from which the
source planner moves the source's watermark (streaming/source_watermarks.py).
Spark's own offsets for the source live in the query's checkpoint, so a
restarted driver resumes where the last completed batch ended.

A WriteToSpark's rows reach the query's foreachBatch end
(execution/query_sinks.py), which has them staged by `SparkWriterStaging`:
written with Spark's writer to a staging directory named by the sink and
the batch (a replay of the batch overwrites its own attempt); the
`Publication` it returns renames the staged files to final names carrying
the run and the batch. The checkpoint coordinator runs it once the batch
is a completed checkpoint (and again after a restart that interrupted
it): each row is in exactly one published file.
"""

import dataclasses
import functools
import os
import posixpath

import pyarrow as pa
from apache_beam.coders.coder_impl import create_OutputStream
from apache_beam.io.filesystems import FileSystems
from apache_beam.transforms import window
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

from beam_spark_runner.execution import checkpoint_files, runner_io_glue, spark_internals, untyped_writes
from beam_spark_runner.io.spark.batch_glue import BLOCK_ROWS, converting_writer, spark_writer
from beam_spark_runner.io.spark.schema_glue import spark_reader
from beam_spark_runner.execution.sink_rows import query_values
from beam_spark_runner.execution.streaming_udfs import record_batch
from beam_spark_runner.streaming import rows as R
from beam_spark_runner.streaming.operators import RowWriter
from beam_spark_runner.streaming.source_planner import SPARK_SOURCE_SEQ
from beam_spark_runner.io.spark.planning import READ_SPARK_URN, WRITE_SPARK_URN, decode_payload
from beam_spark_runner.worker import context, spark_rows
from beam_spark_runner.worker.transactional_files import Move, Publication, digest

BATCH_TIME_COLUMN = "__beam_batch_time"
STAGING_DIR = "_beam_staging"  # Spark's readers skip names starting with "_"


# --- sources ------------------------------------------------------------------


def source_frame(spark, source, key_groups, shared, reader):
    """The streaming DataFrame of query rows (rows.SCHEMA) of one Spark
    source of the run whose SharedPlan is `shared`. `reader`: (OperatorRef,
    logs) of the source's fused reader (plans.SparkSource.fused_operator),
    or None."""
    from pyspark.sql import functions as F

    config = decode_payload(source.payload)
    frame = spark_reader(spark, config, True).withColumn(BATCH_TIME_COLUMN, F.current_timestamp())
    # Spread over every key-group's task before Python sees the rows: a
    # file source reads one new file in one task. A JVM shuffle of
    # Spark's rows (Spark sorts before a round-robin repartition, so a
    # replayed batch spreads them alike).
    frame = frame.repartition(key_groups)
    body = functools.partial(source_rows, source, shared, reader)
    return frame.mapInArrow(body, R.SCHEMA)


runner_io_glue.register_streaming_source(READ_SPARK_URN, source_frame)


def source_rows(source, shared, reader, batches):
    """mapInArrow body: a Spark source's Arrow batches (its columns, then
    the batch time) as query rows addressed to `source.dest` (or, with a
    fused `reader` (OperatorRef, logs), that operator's output
    for them), then one EVENT_TIMES row with the newest event time per
    source partition."""
    plan, key_groups = shared.load()
    config = decode_payload(source.payload)
    writer = RowWriter(plan.keyed_dests, plan.components, key_groups, plan.element_coders, plan.broadcast_dests)
    encode = context.coder_impl(plan.components, source.coder_id).encode_to_stream
    fields = config.schema["fields"]
    names = [f["name"] for f in fields]
    row_type = spark_rows.row_type(config.schema)
    readers = [spark_rows.column_reader_of(f["type"]) for f in fields]
    ts_index = names.index(config.timestamp_column) if config.timestamp_column else None
    event_time = None
    if ts_index is not None and config.timestamp_unit is not None:
        event_time = spark_rows.numeric_event_time(config.timestamp_unit, config.timestamp_column, config.label)
    partition_indexes = [names.index(c) for c in config.partition_columns]
    glob = (window.GlobalWindow(),)
    newest = {}
    for batch in batches:
        for start in range(0, batch.num_rows, BLOCK_ROWS):
            part = batch.slice(start, BLOCK_ROWS)
            columns = [read(part.column(i)) for i, read in enumerate(readers)]
            if ts_index is None:
                times = _timestamps(part.column(len(fields)))
            elif event_time is not None:
                times = list(map(event_time, columns[ts_index]))
            else:
                times = columns[ts_index]
            if partition_indexes:
                keys = [columns[i] for i in partition_indexes]
                partitions = ["/".join(map(str, values)) for values in zip(*keys)]
            else:
                partitions = None
            elements = []
            for r, values in enumerate(zip(*columns)):
                ts = times[r]
                if ts is None:
                    ts = MIN_TIMESTAMP  # a null event time: the minimum, counted by no watermark
                else:
                    partition = partitions[r] if partitions is not None else ""
                    if ts.micros > newest.get(partition, MIN_TIMESTAMP.micros):
                        newest[partition] = ts.micros
                elements.append(WindowedValue(row_type(*values), ts, glob))
            if reader is not None:
                rows = _run_fused(reader, elements)
            else:
                stream = create_OutputStream()
                for element in elements:
                    encode(element, stream, True)
                rows = writer.rows(source.dest, stream.get(), SPARK_SOURCE_SEQ)
            if rows:
                yield record_batch(rows)
    if newest:
        yield record_batch([R.event_times(source.name, newest)])


def _run_fused(reader, elements):
    """The fused operator's rows for one slice of the source's elements,
    handed over as runs (one per element: their timestamps differ)."""
    from beam_spark_runner.execution.streaming_udfs import operator
    from beam_spark_runner.worker.gc_tuning import bulk_data_gc
    from beam_spark_runner.worker.log_forwarding import forwarding

    ref, logs = reader
    runs = [(element, [element.value]) for element in elements]
    with bulk_data_gc(), forwarding(*logs):
        return operator(ref).run_decoded(runs, SPARK_SOURCE_SEQ)


def _timestamps(column):
    """The batch-time column as Beam Timestamps."""
    return spark_rows.column_reader_of("timestamp")(column)


# --- sinks --------------------------------------------------------------------


class SparkWriterStaging(runner_io_glue.MicroBatchSinkStaging):
    """A query's WriteToSpark sinks: each batch's rows written with Spark's
    writer to a staging directory named by the sink and the batch (a
    replay of the batch overwrites its own attempt); the `Publication`
    renames the staged files to final names carrying the run and the
    batch."""

    def __init__(self, context: runner_io_glue.StagingContext):
        self._spark = context.spark
        self._run = context.run_id
        self._components = context.components
        # sink name -> (its target's types, the types its untyped fields took
        # from this run's earlier batches): see `_typed`.
        self._untyped = {}

    def stage(self, selected, sink, batch_id):
        from pyspark.sql.types import StructType

        config, convert = self._typed(selected, sink, decode_payload(sink.payload), batch_id)
        writer_id = "%s-%s" % (self._run, digest(sink.name)[:8])
        window_prefix = checkpoint_files.join(config.path, STAGING_DIR, writer_id, "batch")
        staging = Publication(config.label, window_prefix, batch_id, ()).staging_dir
        to_arrow = functools.partial(sink_batches, config.schema, self._components, sink.coder_id, convert)
        with untyped_writes.raising_column_errors():
            rows = selected.select("kind", "payload").mapInArrow(to_arrow, StructType.fromJson(config.schema))
            spark_writer(rows, config, "overwrite").save(staging)
        moves = tuple(
            Move(path, _final_name(config.path, staging, path, writer_id, batch_id, i))
            for i, path in enumerate(_staged_files(staging))
        )
        return Publication(config.label, window_prefix, batch_id, moves)

    def _typed(self, selected, sink, config, batch_id):
        """(`config` with its untyped fields typed, their converters): the
        target's column types as the run's first write of the sink found
        them, else the types of the batch's rows, which must agree with
        those the run's earlier batches wrote."""
        if not config.untyped:
            return config, {}
        if sink.name not in self._untyped:
            self._untyped[sink.name] = (untyped_writes.spark_target_types(self._spark, config), {})
        target, earlier = self._untyped[sink.name]

        def infer(columns):
            body = functools.partial(
                untyped_writes.sample_query_rows, self._components, sink.coder_id, tuple(columns), config.label
            )
            with untyped_writes.raising_column_errors():
                found = selected.select("kind", "payload").mapInArrow(body, "types string").collect()
            now = untyped_writes.merged([row.types for row in found], columns, config.label)
            return untyped_writes.agreeing(earlier, now, config.label, batch_id)

        schema, convert = untyped_writes.resolve(config, config.untyped, target, infer, config.describe())
        return dataclasses.replace(config, schema=schema), convert


runner_io_glue.register_micro_batch_staging(WRITE_SPARK_URN, SparkWriterStaging)


def _staged_files(staging):
    """The data files Spark's writer left under `staging`, sorted (its
    _SUCCESS marker and checksum files are not data)."""
    found = FileSystems.match([staging.rstrip("/") + "/**"])[0].metadata_list
    return sorted(m.path for m in found if posixpath.basename(m.path).startswith("part-"))


def _final_name(path, staging, staged, writer_id, batch_id, index):
    """A staged file's published name: in the same partition directory
    (col=value/...) under `path`, named by the writer (run and sink: two
    sinks writing one directory never share a name), batch and index, with
    the writer's extension (".snappy.parquet")."""
    relative = os.path.relpath(staged, staging)
    directory, base = posixpath.split(relative.replace(os.sep, "/"))
    extension = base[base.index(".") :] if "." in base else ""
    name = "part-%s-%08d-%05d%s" % (writer_id, batch_id, index, extension)
    return checkpoint_files.join(path, directory, name) if directory else checkpoint_files.join(path, name)


def sink_batches(schema, components, coder_id, convert, batches):
    """mapInArrow body: a sink's DATA and KEYED query rows (kind, payload)
    as Arrow batches of its Spark schema; `convert`: {column: converter} of
    the fields Beam types Any."""
    from pyspark.sql.types import StructType

    arrow_schema = spark_internals.arrow_schema(StructType.fromJson(schema))
    impl = context.coder_impl(components, coder_id)
    writers = [(f["name"], converting_writer(f["type"], convert.get(f["name"]))) for f in schema["fields"]]
    for batch in batches:
        values = list(query_values(batch, impl))
        for start in range(0, len(values), BLOCK_ROWS):
            chunk = values[start : start + BLOCK_ROWS]
            columns = [[write(getattr(row, name)) for row in chunk] for name, write in writers]
            yield pa.RecordBatch.from_arrays(
                [pa.array(col, type=arrow_schema.field(i).type) for i, col in enumerate(columns)],
                schema=arrow_schema,
            )
