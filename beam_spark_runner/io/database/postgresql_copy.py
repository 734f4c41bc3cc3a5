"""Rows for PostgreSQL's COPY, made by the tasks that have the rows and
written by the commit as they are.

A WriteToDatabase into PostgreSQL turns its rows into lines of COPY's text
format in the stage that produces them (`CopyTextEncoder`, run by a DoFn
fused into that stage), in blocks of up to `BLOCK_ROWS` lines. The blocks
travel as bytes to the sink, which hands them to the server unchanged
(`copy_blocks`): the commit on the driver decodes and formats nothing,
and the server parses each value against its column's type, refusing
what the column cannot hold, exactly as for a value psycopg writes as
text. With key columns each line starts with the retraction flag, and
the commit loads the lines into a temporary table numbered in order
(`load_epoch_rows`), from which the last line of each key decides.

Blocks persist in a checkpoint between a micro-batch and its commit, so
their format has a name with a version (`COPY_TEXT_V1`) that the sink's
config carries. No Spark here.
"""

import itertools
import operator
from typing import Optional

from triggers import Retraction

BLOCK_ROWS = 8192
# The block format: COPY's text format (tab-separated columns, \N for NULL,
# backslash escapes, one line per row, UTF-8), the columns in the rows'
# schema order, with key columns preceded by the retraction flag (t / f).
COPY_TEXT_V1 = "postgresql-copy-text-v1"
# The temporary table a commit loads keyed lines into; its `_beam_seq`
# numbers them in the order COPY read them.
EPOCH_ROWS_TABLE = "pg_temp.beam_epoch_rows"
_NULL = "\\N"
_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def _text(value):
    if value is None:
        return _NULL
    if type(value) is not str:
        value = str(value)
    if "\\" in value or "\t" in value or "\n" in value or "\r" in value:
        return value.translate(_ESCAPES)
    return value


def _binary(value):
    # bytea's hex input, its backslash escaped for COPY.
    return _NULL if value is None else "\\\\x" + bytes(value).hex()


def _boolean(value):
    if value is True:
        return "t"
    if value is False:
        return "f"
    # Anything else as its text: the server refuses what is not a boolean,
    # as it refuses what psycopg writes for it.
    return _text(value)


def _timestamp(value):
    # A Beam Timestamp, as TIMESTAMPTZ's input reads it (UTC, microseconds).
    return _NULL if value is None else value.to_utc_datetime(has_tz=True).isoformat()


# Spark type -> the column's text form; types absent here are written as
# str(value) (numbers, decimals, dates), whose text the server parses.
_CONVERTERS = {"string": _text, "binary": _binary, "boolean": _boolean, "timestamp": _timestamp}


class CopyTextEncoder:
    """Lines of COPY's text format (COPY_TEXT_V1) for rows of `schema` (a
    Spark StructType, JSON form): each field read by name, in the schema's
    order. `keyed`: each line starts with the retraction flag, so a
    `triggers.Retraction` of a row is a line too; without key columns a
    retraction has no row to delete and gives no line (the sink appends)."""

    def __init__(self, schema: dict, keyed: bool):
        names = [f["name"] for f in schema["fields"]]
        self._get = operator.attrgetter(*names)
        self._single = len(names) == 1  # attrgetter of one name gives the value, not a tuple
        self._converted = [
            (i, _CONVERTERS[f["type"]]) for i, f in enumerate(schema["fields"]) if f["type"] in _CONVERTERS
        ]
        # Every column written as str(value) but strings, which need
        # escaping only when they hold a tab, a newline, a return or a
        # backslash: a line made with str() throughout is right when it
        # holds none of those but its own separators.
        self._str_only = all(f["type"] not in _CONVERTERS or f["type"] == "string" for f in schema["fields"])
        columns = "\t".join(["%s"] * len(names)) + "\n"
        self._keyed = keyed
        self._formats = ("f\t" + columns, "t\t" + columns) if keyed else (columns, None)
        self._tabs = len(names) - 1 + bool(keyed)

    def block(self, values) -> bytes:
        """The block of `values` (rows, or `triggers.Retraction`s of rows),
        in order; a retraction gives no line without key columns."""
        rows = [v for v in values if type(v) is not Retraction] if not self._keyed else values
        if self._keyed and any(type(v) is Retraction for v in rows):
            return self._block_of_lines(rows)
        tuples = list(map(self._get, rows))
        if self._single:
            tuples = [(v,) for v in tuples]
        if self._str_only and not any(map(operator.contains, tuples, itertools.repeat(None))):
            # str() of every value, all in C: right when the text holds no
            # tab, newline, return or backslash but the separators.
            text = "".join(map(self._formats[0].__mod__, tuples))
            n = len(tuples)
            if text.count("\t") == self._tabs * n and text.count("\n") == n and "\\" not in text and "\r" not in text:
                return text.encode("utf-8")
        return self._block_of_lines(rows)

    def _block_of_lines(self, values):
        return "".join(filter(None, map(self.line, values))).encode("utf-8")

    def line(self, value) -> Optional[str]:
        """The line of `value` (a row or a `triggers.Retraction` of one),
        or None for a retraction without key columns."""
        retract = type(value) is Retraction
        if retract:
            if not self._keyed:
                return None
            value = value.value
        values = self._get(value)
        if self._single:
            values = (values,)
        return self._formats[retract] % self._converted_values(values)

    def _converted_values(self, values):
        values = list(values)
        for i, convert in self._converted:
            values[i] = convert(values[i])
        return tuple(_NULL if v is None else v for v in values)


def _copy_sql(dialect, table, columns):
    return "COPY %s (%s) FROM STDIN" % (table, ", ".join(map(dialect.quote, columns)))


def copy_blocks(cursor, dialect, table, columns, blocks) -> None:
    """Writes `blocks` (COPY_TEXT_V1, without the retraction flag) into
    `columns` of `table` (quoted), in order, with one COPY."""
    # The blocks are UTF-8 whatever the database's encoding; the server
    # converts them. LOCAL: the transaction's setting only.
    cursor.execute("SET LOCAL client_encoding TO 'UTF8'")
    with cursor.copy(_copy_sql(dialect, table, columns)) as copy:
        for block in blocks:
            copy.write(block)


def load_epoch_rows(cursor, dialect, staging, columns, blocks, keyed=True) -> str:
    """Loads `blocks` into EPOCH_ROWS_TABLE, a temporary table dropped when
    the transaction ends, shaped as the sink's `staging` table (quoted):
    `_beam_part` 0, `_beam_seq` numbering the lines in the order of the
    blocks, `_beam_retract` (false for lines without the flag, `keyed`
    False) and `columns`. Returns the table's name."""
    q = dialect.quote
    cursor.execute(
        "CREATE TEMPORARY TABLE %s ON COMMIT DROP AS SELECT 0 AS _beam_part, _beam_seq, _beam_retract, %s "
        "FROM %s WITH NO DATA" % (EPOCH_ROWS_TABLE, ", ".join(map(q, columns)), staging)
    )
    cursor.execute(
        "ALTER TABLE %s ALTER COLUMN _beam_seq SET NOT NULL, "
        "ALTER COLUMN _beam_seq ADD GENERATED ALWAYS AS IDENTITY, "
        "ALTER COLUMN _beam_retract SET DEFAULT false" % EPOCH_ROWS_TABLE
    )
    copy_blocks(cursor, dialect, EPOCH_ROWS_TABLE, (("_beam_retract",) if keyed else ()) + tuple(columns), blocks)
    return EPOCH_ROWS_TABLE
