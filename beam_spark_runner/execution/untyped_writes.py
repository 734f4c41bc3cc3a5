"""The types of a write's fields Beam types Any (worker/untyped_columns.py),
found when the write runs, with the run's SparkSession or the sink's own
database connection:

- the target's: an existing catalog table, or a Parquet / ORC / Avro / Delta
  directory with data (not when the write overwrites it), read with the
  run's SparkSession; an existing database table's columns;
- else the data's: every row the write gets (in batch the whole input,
  whose RDD is kept so no stage runs twice; in streaming each micro-batch's
  rows, which must agree with the types the run's earlier micro-batches
  wrote), merged as Spark's createDataFrame merges a list's rows.

Each untyped value is then converted to its column's type, or refused
naming the write, the column, the value and where the type came from.
"""

import contextlib
import functools
import json
import os
import re
import urllib.parse

import pyarrow as pa
import triggers

from beam_spark_runner.errors import UnsupportedPipelineError
from beam_spark_runner.execution import spark_internals
from beam_spark_runner.execution.sink_rows import query_values
from beam_spark_runner.worker import context
from beam_spark_runner.worker.runs import RunCodec
from beam_spark_runner.worker.untyped_columns import ColumnTypeError, TypeSample, converters, resolved_schema

# Path formats whose files carry their schema (text formats would be read
# by guessing: their untyped columns are inferred from the data instead).
SELF_DESCRIBING_FORMATS = ("parquet", "orc", "avro", "delta")
_NO_DATA = ("PATH_NOT_FOUND", "UNABLE_TO_INFER_SCHEMA")
_COLUMN_ERROR = re.compile(r"ColumnTypeError: (.*?)(?=\n\s*\tat |\n\n|\Z)", re.S)


@contextlib.contextmanager
def raising_column_errors():
    """A ColumnTypeError a Spark task raised, raised again here with its own
    message (Spark's error around it names Spark's frames only)."""
    try:
        yield
    except ColumnTypeError:
        raise
    except Exception as e:  # noqa: BLE001 -- Spark's and Py4J's error classes
        match = _COLUMN_ERROR.search(str(e))
        if match is None:
            raise
        raise ColumnTypeError(match.group(1).strip()) from None


# --- the target's types ------------------------------------------------------------


def spark_target_types(spark, config):
    """{column: (Spark type, nullable)} of a WriteToSpark's existing target,
    or None when it has none (a new path or table, a text format, mode
    overwrite)."""
    if config.mode == "overwrite":
        return None
    try:
        if config.table:
            if not spark.catalog.tableExists(config.table):
                return None
            schema = spark.table(config.table).schema
        else:
            fmt = config.format or "parquet"
            if fmt not in SELF_DESCRIBING_FORMATS or not _may_exist(config.path, _default_fs(spark)):
                return None
            schema = spark.read.format(fmt).load(config.path).schema
    except Exception as e:  # noqa: BLE001 -- Spark's analysis errors come in several classes
        condition = getattr(e, "getCondition", lambda: None)()
        if condition in _NO_DATA:
            return None
        raise UnsupportedPipelineError(
            "%s (%s): cannot read the target's schema: %s" % (config.label, config.describe(), _first_line(e))
        ) from None
    return {f.name: (f.dataType.jsonValue(), f.nullable) for f in schema.fields}


def _may_exist(path, default_fs):
    """False only when `path` is on the local file system (a file: URI, or
    no scheme where `default_fs`, Hadoop's fs.defaultFS, is local) and does
    not exist: a new directory. Spark's read of a missing path logs a
    warning with a stack trace, though the write goes on; any other file
    system is left to that read to tell."""
    parsed = urllib.parse.urlparse(path)
    if parsed.scheme == "file":
        return os.path.exists(parsed.path)
    if parsed.scheme or urllib.parse.urlparse(default_fs or "file:///").scheme != "file":
        return True
    return os.path.exists(path)


def _default_fs(spark):
    hadoop_conf = spark_internals.java_spark_context(spark.sparkContext).hadoopConfiguration()
    return hadoop_conf.get("fs.defaultFS")


# --- the data's types --------------------------------------------------------------


def sample_blocks(components, coder_id, columns, where, pairs):
    """mapPartitions body: the merged types (JSON) of `columns` over the rows
    (or retractions of rows) in a partition's (index, encoded block) pairs."""
    codec = RunCodec(context.components_context(components).coders[coder_id])
    sample = TypeSample(columns, where)
    for _, block in pairs:
        for _, run in codec.decode(block):
            for value in run:
                sample.add(triggers.unwrap(value)[0])
    yield json.dumps(sample.types)


def sample_values(columns, where, values):
    """The merged types of `columns` over `values` (rows or retractions)."""
    sample = TypeSample(columns, where)
    for value in values:
        sample.add(triggers.unwrap(value)[0])
    return sample.types


def sample_query_rows(components, coder_id, columns, where, batches):
    """mapInArrow body: the merged types (one JSON string) of `columns` over
    a sink's (kind, payload) query rows, decoded with its element coder."""
    impl = context.coder_impl(components, coder_id)
    types = sample_values(columns, where, (v for batch in batches for v in query_values(batch, impl)))
    yield pa.RecordBatch.from_arrays([pa.array([json.dumps(types)])], names=["types"])


def merged(samples, columns, where):
    """The types of `columns` the samples (JSON strings) agree on."""
    sample = TypeSample(columns, where)
    for found in samples:
        sample.merged(json.loads(found))
    return sample.types


def agreeing(earlier, now, where, batch_id):
    """The types of a streaming write's micro-batch `batch_id` (`now`) as
    one with those the run's earlier batches wrote (`earlier`, updated):
    ColumnTypeError naming the column and both types when they differ."""
    from beam_spark_runner.worker.untyped_columns import merge, simple

    agreed = {}
    for column, found in now.items():
        try:
            agreed[column] = merge(earlier.get(column), found, column)
        except ColumnTypeError:
            raise ColumnTypeError(
                "%s: column %r: micro-batch %d has values of type %s; this run's earlier micro-batches wrote it "
                "as %s" % (where, column, batch_id, simple(found), simple(earlier[column]))
            ) from None
    earlier.update((c, t) for c, t in agreed.items() if t is not None)
    return agreed


def batch_input_types(execution, rdd, coder_id, columns, where):
    """The merged types of `columns` over every row of a batch write's input
    `rdd`, which is kept (persisted) so the write reads the same rows
    without running the stages before it again."""
    execution.persist(rdd)
    body = functools.partial(sample_blocks, execution.plan.components, coder_id, tuple(columns), where)
    with raising_column_errors():
        found = rdd.mapPartitions(body).collect()
    return merged(found, columns, where)


# --- resolution --------------------------------------------------------------------


def resolve(config, untyped, target_types, infer, target):
    """(`config` with its schema's untyped fields resolved, {column:
    converter}). `infer(columns)` gives the data's types of the columns
    the target does not have; `target` describes the target."""
    needed = [c for c in untyped if not target_types or c not in target_types]
    inferred = infer(needed) if needed else {}
    if target_types:
        unknown = [c for c in untyped if c in target_types and target_types[c][0] is None]
        if unknown:
            raise ColumnTypeError(
                "%s: column %r of %s has a type no row field holds; declare the element type"
                % (config.label, unknown[0], target)
            )
    schema = resolved_schema(config.schema, untyped, target_types, inferred, config.label)
    return schema, converters(schema, untyped, target_types, config.label, target)


def _first_line(error):
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]
