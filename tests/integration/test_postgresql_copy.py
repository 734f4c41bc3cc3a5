"""PostgreSQL's bulk insert (io/database/sql_dialects.py), which stages every
row WriteToDatabase writes there: binary COPY when each column's type has
a binary form that holds the rows' values exactly and refuses what the
column cannot hold, text COPY otherwise; either way every value, edge values
included, reads back as written, and a value its column cannot hold fails
the COPY rather than landing changed. Against the machine's PostgreSQL."""

import datetime
import decimal
import math

import pytest

from beam_spark_runner.io.database.sql_dialects import dialect_of
from tests.services import drop_table, execute, unique_table

_BINARY_TYPES = "l BIGINT, d DOUBLE PRECISION, txt TEXT, v VARCHAR(64), bin BYTEA, day DATE, ts TIMESTAMPTZ"
# Copied in binary only where the runner makes the values itself.
_TRUSTED_TYPES = "b BOOLEAN, s SMALLINT, i INTEGER, f REAL"
_UTC = datetime.timezone.utc
_EDGE_ROWS = [
    (
        -(2**63),
        -2.25,
        "text é\t\n\\ \u2603",
        "v",
        b"\x00\x01\xff",
        datetime.date(1, 1, 1),
        datetime.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=_UTC),
    ),
    (
        2**63 - 1,
        float("-inf"),
        "",
        "",
        b"",
        datetime.date(9999, 12, 31),
        datetime.datetime(2026, 11, 28, 12, 0, 0, 123456, tzinfo=_UTC),
    ),
    (None,) * 7,
]
_COLUMNS = ("l", "d", "txt", "v", "bin", "day", "ts")
_TRUSTED = ("b", "s", "i", "f")


@pytest.fixture
def table(postgresql_url):
    name = unique_table()
    yield name
    drop_table(postgresql_url, name)


def _insert(url, table, columns, rows):
    dialect = dialect_of(url)
    with dialect.connect() as conn:
        dialect.bulk_insert(conn.cursor(), table, columns, rows)
        conn.commit()


def _read(url, table, columns):
    q = dialect_of(url).quote
    return execute(url, "SELECT %s FROM %s" % (", ".join(map(q, columns)), q(table)))


def test_columns_of_types_with_an_exact_binary_form_are_copied_in_binary(postgresql_url, table):
    dialect = dialect_of(postgresql_url)
    execute(postgresql_url, "CREATE TABLE %s (%s, %s)" % (dialect.quote(table), _BINARY_TYPES, _TRUSTED_TYPES))
    with dialect.connect() as conn:
        cursor = conn.cursor()
        assert dialect.copy_types(cursor, table, _COLUMNS) == [20, 701, 25, 1043, 17, 1082, 1184]
        assert dialect.copy_types(cursor, table, _COLUMNS + _TRUSTED, trusted=_TRUSTED) == [
            20,
            701,
            25,
            1043,
            17,
            1082,
            1184,
            16,
            21,
            23,
            700,
        ]


@pytest.mark.parametrize("column", _TRUSTED)
def test_a_user_column_whose_binary_form_would_wrap_or_round_keeps_the_text_form(postgresql_url, table, column):
    dialect = dialect_of(postgresql_url)
    execute(postgresql_url, "CREATE TABLE %s (%s, %s)" % (dialect.quote(table), _BINARY_TYPES, _TRUSTED_TYPES))
    with dialect.connect() as conn:
        assert dialect.copy_types(conn.cursor(), table, _COLUMNS + (column,)) is None


def test_a_numeric_column_keeps_the_text_form(postgresql_url, table):
    dialect = dialect_of(postgresql_url)
    execute(postgresql_url, "CREATE TABLE %s (l BIGINT, n NUMERIC(10, 2))" % dialect.quote(table))
    with dialect.connect() as conn:
        assert dialect.copy_types(conn.cursor(), table, ("l", "n")) is None
    _insert(postgresql_url, table, ("l", "n"), [(1, decimal.Decimal("12.34")), (2, 5), (3, None)])
    assert sorted(_read(postgresql_url, table, ("l", "n"))) == [
        (1, decimal.Decimal("12.34")),
        (2, decimal.Decimal("5.00")),
        (3, None),
    ]


def test_every_binary_copied_type_reads_back_as_written_edge_values_included(postgresql_url, table):
    dialect = dialect_of(postgresql_url)
    execute(postgresql_url, "CREATE TABLE %s (%s)" % (dialect.quote(table), _BINARY_TYPES))
    _insert(postgresql_url, table, _COLUMNS, _EDGE_ROWS)
    got = sorted(_read(postgresql_url, table, _COLUMNS), key=lambda r: (r[0] is None, r[0] or 0))
    assert got == _EDGE_ROWS


def test_a_nan_double_is_copied_as_nan(postgresql_url, table):
    dialect = dialect_of(postgresql_url)
    execute(postgresql_url, "CREATE TABLE %s (d DOUBLE PRECISION, l BIGINT)" % dialect.quote(table))
    _insert(postgresql_url, table, ("d", "l"), [(float("nan"), 3)])
    ((d, l),) = _read(postgresql_url, table, ("d", "l"))
    assert math.isnan(d) and l == 3


@pytest.mark.parametrize(
    "create, row",
    [
        ("s SMALLINT, txt TEXT", (2**15, "past a smallint")),
        ("i INTEGER, txt TEXT", (2**31, "past an integer")),
        ("f REAL, txt TEXT", (1e40, "past a real")),
        ("b BOOLEAN, txt TEXT", (2, "not a boolean")),
        ("l BIGINT, txt TEXT", (2**63, "past a bigint")),
        ("v VARCHAR(5), txt TEXT", ("too long", "past the varchar")),
        ("ts TIMESTAMPTZ, txt TEXT", (datetime.datetime(2026, 1, 1), "no time zone")),
    ],
)
def test_a_value_its_column_cannot_hold_fails_the_copy_and_writes_nothing(postgresql_url, table, create, row):
    dialect = dialect_of(postgresql_url)
    execute(postgresql_url, "CREATE TABLE %s (%s)" % (dialect.quote(table), create))
    columns = tuple(part.split()[0] for part in create.split(", "))
    with pytest.raises(Exception):  # noqa: B017 -- each refusal is the client's or the server's own class
        _insert(postgresql_url, table, columns, [(None, "fits"), row])
    assert _read(postgresql_url, table, columns) == []
