"""`WriteToDatabase` and `ReadFromDatabase`: PostgreSQL and MariaDB / MySQL
tables as Beam transforms (docs/io.md, "Databases").

Both check what can be known when the pipeline is built, naming the
transform: the URL's scheme, the server (it is reached then), the table's
columns and unique key, the query's column types, an input without a
schema, RETRACTING input without key columns.

`WriteToDatabase` expands to the runner's write primitive
(io/database/planning.py): exactly once in batch and streaming
(io/database/sink_protocol.py). Into PostgreSQL, a DoFn before it turns
the rows into COPY text blocks (io/database/postgresql_copy.py) in the
stage that produces them. `ReadFromDatabase` is plain Beam (Create,
Reshuffle, a DoFn reading one split), so it runs on any runner.
"""

import dataclasses

import apache_beam as beam

import triggers
from beam_spark_runner.io.database import reads as database_reads
from beam_spark_runner.io.database import postgresql_copy
from beam_spark_runner.io.database.sink_protocol import DatabaseWriteConfig, RowEncoding, check_table
from beam_spark_runner.io.database.sql_dialects import PostgreSQL, UnmappableColumn, dialect_of
from beam_spark_runner.errors import UnsupportedPipelineError
from beam_spark_runner.io.database.planning import DatabaseWrite
from beam_spark_runner.io.spark.planning import schema_read_when_planned, untyped_rows_hint
from beam_spark_runner.worker import spark_rows
from beam_spark_runner.worker.untyped_columns import untyped_columns

_RETRACTING = triggers.RETRACTING


class WriteToDatabase(beam.PTransform):
    """Writes a schema'd PCollection (beam.Row, a NamedTuple) into a table
    of a PostgreSQL (`postgresql://user@host:port/db`) or MariaDB / MySQL
    (`mysql://user@host:port/db`) database, exactly once: in batch the
    rows appear together when the job ends; in streaming each micro-batch's
    rows appear once that batch is a completed checkpoint.

    `table` (`name` or `schema.name`) is created when missing, with the
    rows' columns and a primary key on `key_columns`; an existing table
    needs the rows' columns and, with `key_columns`, a unique key on
    exactly them. Without `key_columns` rows are appended. With them rows
    are upserted, and a RETRACTING pane's retractions
    (`triggers.Retraction(row)`) delete the row with their key, so the table
    holds the current answer; RETRACTING input without `key_columns` is
    refused. A field Beam types Any (a beam.Row built in a lambda) takes
    its type when the write runs: the existing table's column, or, for a
    table the write creates, the data's (every row in batch, the first
    micro-batch with rows in streaming); each value is converted to the
    column's type or refused naming the column, the value and the table.
    The output is the table's name."""

    def __init__(self, url, table, key_columns=None):
        super().__init__()
        self._dialect = dialect_of(url)  # ValueError naming the scheme
        self._url, self._table = url, table
        self._key_columns = tuple(key_columns or ())
        self._label = "WriteToDatabase(%s at %s)" % (table, self._dialect.url.redacted())

    def expand(self, pcoll):
        label = self._label
        source = schema_read_when_planned(pcoll)
        if source is not None:
            raise UnsupportedPipelineError(
                "%s: its input is %s's rows, whose schema Spark reads when the runner plans, and this write "
                "needs the columns when the pipeline is built: give %s a schema=" % (label, source, source)
            )
        try:
            schema = spark_rows.spark_schema_of(pcoll.element_type, untyped=True)
        except TypeError as e:
            raise UnsupportedPipelineError(
                "%s: its input's elements (%s) have no schema: give it beam.Row elements or a NamedTuple "
                "type (with_output_types)%s" % (label, pcoll.element_type, untyped_rows_hint(pcoll.element_type))
            ) from e
        except spark_rows.UnmappableType as e:
            raise UnsupportedPipelineError("%s: %s" % (label, e)) from None
        names = [f["name"] for f in schema["fields"]]
        missing = [c for c in self._key_columns if c not in names]
        if missing:
            raise UnsupportedPipelineError("%s: key_columns names columns its rows do not have: %s" % (label, missing))
        untyped = untyped_columns(schema)
        for f in schema["fields"]:
            if f["name"] in untyped:
                continue  # typed when the write runs: the table's column, or the data's type
            try:
                self._dialect.column_type(f["type"], f["name"])
            except UnmappableColumn as e:
                raise UnsupportedPipelineError("%s: %s" % (label, e)) from None
        if pcoll.windowing.accumulation_mode == _RETRACTING and not self._key_columns:
            raise UnsupportedPipelineError(
                "%s: its input has RETRACTING panes; give key_columns so a retraction deletes the row it "
                "retracts, or use DISCARDING or ACCUMULATING panes" % label
            )
        config = DatabaseWriteConfig(self._url, self._table, self._key_columns, schema, label, untyped=untyped)
        check_table(config)
        if untyped:
            # The rows themselves reach the sink, in their own coder (a
            # RowCoder for beam.Row): their untyped fields are converted to
            # the table's column types there.
            return pcoll | DatabaseWrite(config)
        if isinstance(self._dialect, PostgreSQL):
            # The rows become COPY text in the stage that produces them;
            # the commit writes those bytes as they are.
            config = dataclasses.replace(config, row_encoding=RowEncoding.POSTGRESQL_COPY_TEXT)
            encoder = postgresql_copy.CopyTextEncoder(schema, keyed=bool(self._key_columns))
            blocks = pcoll | "AsCopyText" >> beam.ParDo(_CopyTextBlocks(encoder)).with_output_types(bytes)
            return blocks | DatabaseWrite(config)
        row_type = spark_rows.row_type(schema)
        if pcoll.element_type is not row_type:
            # Rows of the schema's own type always have their RowCoder (a
            # NamedTuple never registered with one would be pickled).
            pcoll = pcoll | "AsRows" >> beam.Map(_as_row, row_type, tuple(row_type._fields)).with_output_types(row_type)
        return pcoll | DatabaseWrite(config)


class _CopyTextBlocks(beam.DoFn):
    """The rows as blocks of COPY text lines (io/database/postgresql_copy.py):
    one block per BLOCK_ROWS rows and one at the end of the bundle. A block
    takes the windows of the element that completed it (the last one's at
    the end of the bundle): the sink writes each element once, whatever
    its windows, as it writes a row."""

    def __init__(self, encoder):
        self._encoder = encoder
        self._values = []
        self._last = None  # the last element held

    def start_bundle(self):
        self._values = []
        self._last = None

    def process(self, value, element=beam.DoFn.WindowedValueParam):
        # WindowedValueParam, not WindowParam: the element whole, in all its
        # windows at once, so its row is written once.
        values = self._values
        values.append(value)
        if len(values) < postgresql_copy.BLOCK_ROWS:
            self._last = element
            return ()  # nothing yet (not `return None`: Beam warns on that line at construction)
        self._values = []
        return [self._encoder.block(values)]

    def finish_bundle(self):
        if self._values:
            values, self._values = self._values, []
            yield self._last.with_value(self._encoder.block(values))


def _as_row(value, row_type, fields):
    row, retraction = triggers.unwrap(value)
    if getattr(row, "_fields", None) == fields:  # a NamedTuple of the same fields, in order
        made = tuple.__new__(row_type, row)
    else:
        made = row_type(*(getattr(row, f) for f in fields))
    return triggers.Retraction(made) if retraction else made


class ReadFromDatabase(beam.PTransform):
    """Reads a table or a query's result as beam.Row elements whose schema
    follows the result's column types (docs/io.md has the mapping; a column
    of another type is refused, naming it), in the global window at the
    minimum timestamp.

    With `partition_column` (numeric) and `num_partitions`, the result is
    read in that many parallel queries, split as Spark's JDBC reader
    splits: ranges between `lower_bound` and `upper_bound` (by default the
    column's minimum and maximum when the pipeline is built), the first and
    last open-ended, so every row is read once whatever the bounds."""

    def __init__(
        self,
        url,
        query=None,
        table=None,
        partition_column=None,
        num_partitions=None,
        lower_bound=None,
        upper_bound=None,
    ):
        super().__init__()
        self._dialect = dialect_of(url)
        source = table or query
        self._label = "ReadFromDatabase(%s at %s)" % (source, self._dialect.url.redacted())
        if (query is None) == (table is None):
            raise ValueError("%s: give a query or a table, not both" % self._label)
        if (partition_column is None) != (num_partitions is None):
            raise ValueError("%s: give partition_column and num_partitions together" % self._label)
        if num_partitions is not None and (not isinstance(num_partitions, int) or num_partitions < 1):
            raise ValueError("%s: num_partitions must be a positive int, got %r" % (self._label, num_partitions))
        for name, bound in (("lower_bound", lower_bound), ("upper_bound", upper_bound)):
            if bound is not None and (isinstance(bound, bool) or not isinstance(bound, (int, float))):
                raise ValueError("%s: %s must be a number, got %r" % (self._label, name, bound))
        self._url = url
        self._query = query if query is not None else "SELECT * FROM %s" % self._dialect.quote_table(table)
        self._partition_column = partition_column
        self._num_partitions = num_partitions
        self._bounds = (lower_bound, upper_bound)

    def expand(self, pbegin):
        schema = database_reads.result_schema(self._url, self._query, self._label)
        column = self._partition_column
        if column is not None:
            types = {f["name"]: f["type"] for f in schema["fields"]}
            if column not in types:
                raise UnsupportedPipelineError(
                    "%s: partition_column %r is not a column of the result (%s)"
                    % (self._label, column, ", ".join(types))
                )
            if types[column] not in ("short", "integer", "long", "float", "double") and not str(
                types[column]
            ).startswith("decimal"):
                raise UnsupportedPipelineError(
                    "%s: partition_column %r must be numeric, it is %s" % (self._label, column, types[column])
                )
        lower, upper = self._bounds
        if column is not None and (lower is None or upper is None):
            found = database_reads.bounds(self._url, self._query, column)
            lower = found[0] if lower is None else lower
            upper = found[1] if upper is None else upper
        splits = database_reads.splits(self._dialect.quote, column, lower, upper, self._num_partitions)
        row_type = spark_rows.row_type(schema)
        return (
            pbegin
            | "Splits" >> beam.Create(splits, reshuffle=False)
            | "Spread" >> beam.Reshuffle()
            | "Read"
            >> beam.FlatMap(database_reads.read_split_of, self._url, self._query, schema).with_output_types(row_type)
        )
