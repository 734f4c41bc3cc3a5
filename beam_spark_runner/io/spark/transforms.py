"""`ReadFromSpark` and `WriteToSpark`: any Spark data source or writer as a
Beam transform (docs/io.md).

Both expand to the runner's primitives (io/spark/planning.py) once their
arguments are checked, without Spark: what can be known when the pipeline
is built fails then, naming the transform (a schema that is not one, a type
Beam cannot represent, an input without a schema, RETRACTING input). A
ReadFromSpark's schema is the `schema` given (a DDL string is parsed by
io/spark/ddl.py), its rows typed when the pipeline is built; else the
runner reads it from the source when it plans, with the session the
pipeline runs on (io/spark/schema_glue.py), and the rows are Any until then.
"""

import dataclasses
import os
import typing
import urllib.parse

import apache_beam as beam
from apache_beam.options.pipeline_options import StandardOptions
from apache_beam.utils.timestamp import Duration

from beam_spark_runner.errors import UnsupportedPipelineError
from beam_spark_runner.io.spark.ddl import DDLError, as_nullable, parse_ddl
from beam_spark_runner.io.spark.planning import (
    FILE_FORMATS,
    SparkRead,
    SparkReadConfig,
    SparkWrite,
    SparkWriteConfig,
    column_problems,
    partition_by_problems,
    schema_read_when_planned,
    untyped_rows_hint,
)
from beam_spark_runner.worker import spark_rows
from beam_spark_runner.worker.untyped_columns import untyped_columns

_MODES = ("append", "overwrite", "ignore", "error", "errorifexists")
_RETRACTING = 3
# Formats a streaming WriteToSpark stages and publishes per micro-batch.
STREAMING_WRITE_FORMATS = ("parquet", "orc", "json", "csv", "text", "avro")
# The columns naming a row's source partition when the user names none.
_DEFAULT_PARTITION_COLUMNS = {"kafka": ("topic", "partition")}


def _micros(value, name, label):
    """A duration given as seconds (int or float) or a Beam Duration, in micros."""
    if value is None:
        return None
    if isinstance(value, Duration):
        micros = value.micros
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        micros = int(round(value * 1e6))
    else:
        raise TypeError("%s: %s must be seconds or an apache_beam Duration, got %r" % (label, name, value))
    if micros < 0:
        raise ValueError("%s: %s must not be negative, got %r" % (label, name, value))
    return micros


def _absolute(path):
    """A local path made absolute (a restarted streaming driver may run
    elsewhere); a URI as it is."""
    if path is None or urllib.parse.urlparse(path).scheme not in ("", "file"):
        return path
    return os.path.abspath(path[len("file:") :] if path.startswith("file:") else path)


def _options(options, label):
    if options is None:
        return ()
    if not isinstance(options, dict):
        raise TypeError("%s: options must be a dict of option name to value, got %r" % (label, options))
    return tuple(sorted((str(k), str(v)) for k, v in options.items()))


def given_schema(schema, label):
    """A schema the user gave (a DDL string, a pyspark StructType or its JSON
    form) as JSON, read without Spark (io/spark/ddl.py)."""
    if isinstance(schema, dict):
        return schema
    if isinstance(schema, str):
        try:
            return parse_ddl(schema)
        except DDLError as e:
            raise UnsupportedPipelineError("%s: schema %r is not a Spark schema: %s" % (label, schema, e)) from None
    if callable(getattr(schema, "jsonValue", None)) and type(schema).__name__ == "StructType":
        return schema.jsonValue()
    raise TypeError("%s: schema must be a DDL string, a pyspark StructType or its JSON form, got %r" % (label, schema))


def _describe(format, path, table):
    if table is not None:
        return "table=%r" % table
    return "format=%r, path=%r" % (format, path)


def _as_row(value, row_type, names):
    return row_type(*[getattr(value, name) for name in names])


class ReadFromSpark(beam.PTransform):
    """The rows of a Spark data source as a PCollection of Beam rows.

    `format` (Spark's source name: "parquet", "orc", "json", "csv", ...,
    or one a connector on the session's classpath adds) with `path`, or a
    catalog `table`; `options` are the source's (Spark's `.options`);
    `schema` (a DDL string, a pyspark StructType or its JSON form) types the
    rows when the pipeline is built; without it the runner reads the
    source's schema when it plans, and the rows are typed Any until then.
    `timestamp_column`: a column whose value is each element's event time
    (else the minimum timestamp in batch, the micro-batch's time in
    streaming): of Spark type timestamp, or numeric (integer, floating point
    or decimal) counting `timestamp_unit`s since the epoch: "s" (seconds),
    "ms" (milliseconds) or "us" (microseconds), which a numeric column needs
    and a timestamp column refuses. Rows are in the global window; their
    type maps Spark's types as worker/spark_rows.py says.

    In a streaming pipeline the source is `spark.readStream` (a file
    source's schema is read from the files there when the pipeline is
    submitted unless `schema` is given) and its watermark follows the data: per
    source partition (the values of `partition_columns`; a Kafka source's
    topic and partition by default) the newest event time read, minus
    `max_out_of_orderness`; the minimum over partitions, leaving out those
    that read nothing for `idle_timeout` (both seconds or a Duration;
    streaming/source_watermarks.py)."""

    def __init__(
        self,
        format=None,
        path=None,
        table=None,
        options=None,
        schema=None,
        timestamp_column=None,
        max_out_of_orderness=None,
        idle_timeout=None,
        partition_columns=None,
        timestamp_unit=None,
    ):
        super().__init__()
        self._label = "ReadFromSpark(%s)" % _describe(format, path, table)
        if timestamp_unit is not None and timestamp_unit not in spark_rows.TIMESTAMP_UNITS:
            raise ValueError(
                "%s: timestamp_unit must be one of %s (what the numeric timestamp_column %r counts since the "
                "epoch), got %r"
                % (self._label, ", ".join(map(repr, spark_rows.TIMESTAMP_UNITS)), timestamp_column, timestamp_unit)
            )
        if timestamp_unit is not None and timestamp_column is None:
            raise ValueError(
                "%s: timestamp_unit=%r says what a numeric timestamp_column counts; no timestamp_column is given"
                % (self._label, timestamp_unit)
            )
        self._timestamp_unit = timestamp_unit
        if path is not None and table is not None:
            raise ValueError("%s: give a path or a table, not both" % self._label)
        if path is None and table is None and format is None:
            raise ValueError("%s: give a format (with its path, if it reads one) or a table" % self._label)
        self._format, self._path, self._table = format, path, table
        self._spark_options = _options(options, self._label)
        self._schema = schema
        self._timestamp_column = timestamp_column
        self._out_of_orderness_us = _micros(max_out_of_orderness, "max_out_of_orderness", self._label)
        self._idle_timeout_us = _micros(idle_timeout, "idle_timeout", self._label)
        if partition_columns is not None and isinstance(partition_columns, str):
            raise TypeError("%s: partition_columns must be a list of column names" % self._label)
        self._partition_columns = None if partition_columns is None else tuple(partition_columns)

    def expand(self, pbegin):
        options = pbegin.pipeline.options
        streaming = bool(options.view_as(StandardOptions).streaming)
        if not streaming:
            self._refuse_streaming_arguments()
        path = _absolute(self._path) if streaming else self._path
        config = SparkReadConfig(
            self._format,
            path,
            self._table,
            self._spark_options,
            None,
            self._timestamp_column,
            self._label,
            streaming=streaming,
            timestamp_unit=self._timestamp_unit,
            out_of_orderness_us=self._out_of_orderness_us or 0,
            idle_timeout_us=self._idle_timeout_us,
            partition_columns=self._partition_columns
            if self._partition_columns is not None
            else _DEFAULT_PARTITION_COLUMNS.get(self._format, ()),
        )
        if self._schema is None:
            # Spark reads the source's schema when the runner plans, with the
            # session the pipeline runs on (io/spark/schema_glue.py): the rows
            # are typed then, and Any until then.
            return pbegin | SparkRead(config, typing.Any, bounded=not streaming)
        given = given_schema(self._schema, self._label)
        # The source reads with the given schema; a file source makes every
        # column of it nullable, as Spark does (the runner checks, when it
        # plans, that Spark reads the rows with this schema).
        schema = as_nullable(given) if self._table is None and self._format in FILE_FORMATS else given
        try:
            element_type = spark_rows.row_type(schema)
        except spark_rows.UnmappableType as e:
            raise UnsupportedPipelineError("%s: %s" % (self._label, e)) from None
        config = dataclasses.replace(config, schema=schema, schema_given=True)
        problems = column_problems(config, schema)
        if problems:
            raise UnsupportedPipelineError(problems[0])
        return pbegin | SparkRead(config, element_type, bounded=not streaming)

    def _refuse_streaming_arguments(self):
        given = [
            name
            for name, value in (
                ("max_out_of_orderness", self._out_of_orderness_us),
                ("idle_timeout", self._idle_timeout_us),
                ("partition_columns", self._partition_columns),
            )
            if value is not None
        ]
        if given:
            raise UnsupportedPipelineError(
                "%s: %s set the watermark of a streaming read; this pipeline is batch (no --streaming)"
                % (self._label, ", ".join(given))
            )


class WriteToSpark(beam.PTransform):
    """A schema'd PCollection's rows written with Spark's writer.

    `format` ("parquet" when None and a path is given, Spark's default
    otherwise) with `path`, or a catalog `table` (`saveAsTable`); `mode`:
    append, overwrite, ignore, error (errorifexists); `options` are the
    writer's; `partition_by`: columns to partition the output by. The
    input's element type must have a Beam schema (beam.Row, a NamedTuple,
    rows read with ReadFromSpark); RETRACTING panes are refused (these
    formats cannot apply them). A field Beam types Any (a beam.Row built in
    a lambda) takes its type when the write runs: the existing target's
    column, else the data's (execution/untyped_writes.py). The output is the
    destination written."""

    def __init__(self, format=None, path=None, table=None, mode="append", options=None, partition_by=None):
        super().__init__()
        self._label = "WriteToSpark(%s)" % _describe(format, path, table)
        if (path is None) == (table is None):
            raise ValueError("%s: give a path or a table, not both" % self._label)
        if mode not in _MODES:
            raise ValueError("%s: mode must be one of %s, got %r" % (self._label, ", ".join(_MODES), mode))
        self._format = format if format is not None or table is not None else "parquet"
        self._path, self._table, self._mode = path, table, mode
        self._spark_options = _options(options, self._label)
        self._partition_by = tuple(partition_by or ())

    def expand(self, pcoll):
        streaming = bool(pcoll.pipeline.options.view_as(StandardOptions).streaming) or not pcoll.is_bounded
        if streaming:
            self._check_streaming_write()
        if pcoll.windowing.accumulation_mode == _RETRACTING:
            raise UnsupportedPipelineError(
                "%s: its input has RETRACTING panes, which %s cannot apply; map retractions away "
                "(triggers.map_pane) or use DISCARDING or ACCUMULATING panes"
                % (self._label, self._table and "a table" or "a %s directory" % self._format)
            )
        if schema_read_when_planned(pcoll) is not None:
            # Its rows are a ReadFromSpark's whose schema Spark reads when the
            # runner plans: the write takes that schema then.
            return pcoll | SparkWrite(self._config(None, streaming))
        try:
            schema = spark_rows.spark_schema_of(pcoll.element_type, untyped=True)
        except TypeError as e:
            raise UnsupportedPipelineError(
                "%s: its input's elements (%s) have no schema: give it beam.Row elements or a NamedTuple "
                "type (with_output_types)%s" % (self._label, pcoll.element_type, untyped_rows_hint(pcoll.element_type))
            ) from e
        except spark_rows.UnmappableType as e:
            raise UnsupportedPipelineError("%s: %s" % (self._label, e)) from None
        problems = partition_by_problems(self._label, self._partition_by, schema)
        if problems:
            raise UnsupportedPipelineError(problems[0])
        config = self._config(schema, streaming)
        if config.untyped:
            # Rows with fields Beam types Any keep their own coder (a
            # RowCoder for beam.Row); the write types those fields when it runs.
            return pcoll | SparkWrite(config)
        row_type = spark_rows.row_type(schema)
        if pcoll.element_type is not row_type:
            # Beam encodes a NamedTuple that was never registered with a
            # RowCoder by pickling it: the write's input is made rows of the
            # schema's own type, which always have their RowCoder.
            pcoll = pcoll | "AsRows" >> beam.Map(_as_row, row_type, tuple(row_type._fields)).with_output_types(row_type)
        return pcoll | SparkWrite(config)

    def _config(self, schema, streaming):
        return SparkWriteConfig(
            self._format,
            _absolute(self._path) if streaming else self._path,
            self._table,
            self._mode,
            self._spark_options,
            self._partition_by,
            schema,
            self._label,
            untyped=untyped_columns(schema) if schema is not None else (),
        )

    def _check_streaming_write(self):
        """A streaming write stages each micro-batch's rows and publishes
        them as new files in a directory: what cannot be done that way is
        refused."""
        if self._table is not None:
            raise UnsupportedPipelineError(
                "%s: a streaming pipeline cannot write a catalog table; write a directory (path=...) "
                "and create the table over it" % self._label
            )
        if self._mode != "append":
            raise UnsupportedPipelineError(
                "%s: a streaming pipeline appends each micro-batch's rows; mode %r is for batch writes"
                % (self._label, self._mode)
            )
        if self._format not in STREAMING_WRITE_FORMATS:
            raise UnsupportedPipelineError(
                "%s: a streaming pipeline writes the file formats %s; %r has no exactly-once commit here"
                % (self._label, ", ".join(STREAMING_WRITE_FORMATS), self._format)
            )
