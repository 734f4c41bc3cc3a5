"""COPY text blocks (io/database/postgresql_copy.py), which carry every row
a WriteToDatabase writes into PostgreSQL: every value of every column type
the sink writes, edge values included, reads back as written; a value its
column cannot hold fails the COPY rather than landing changed; the block's
fast path (plain str() of every value, checked) makes the same bytes as
formatting row by row; retractions carry their flag with key columns and
give no line without. Round trips against the machine's PostgreSQL."""

import datetime
import decimal
import math
import typing

import pytest
from apache_beam.utils.timestamp import Timestamp
from hypothesis import given, settings
from hypothesis import strategies as st

import triggers
from beam_spark_runner.io.database import postgresql_copy
from beam_spark_runner.io.database.postgresql_copy import CopyTextEncoder
from beam_spark_runner.io.database.sql_dialects import dialect_of
from beam_spark_runner.worker import spark_rows
from tests.services import drop_table, execute, unique_table

_UTC = datetime.timezone.utc


class Every(typing.NamedTuple):
    l: typing.Optional[int]  # noqa: E741 -- a column's name
    d: typing.Optional[float]
    txt: typing.Optional[str]
    bin: typing.Optional[bytes]
    day: typing.Optional[datetime.date]
    ts: typing.Optional[Timestamp]
    b: typing.Optional[bool]
    n: typing.Optional[decimal.Decimal]


_SCHEMA = spark_rows.spark_schema_of(Every)
_COLUMNS = Every._fields
_EDGE_ROWS = [
    Every(
        -(2**63),
        -2.25,
        "text é\t\n\r\\ \u2603",
        b"\x00\x01\xff",
        datetime.date(1, 1, 1),
        Timestamp(micros=-1),
        True,
        decimal.Decimal("-12.5"),
    ),
    Every(
        2**63 - 1,
        float("-inf"),
        "",
        b"",
        datetime.date(9999, 12, 31),
        Timestamp(micros=1_795_000_000_123_456),
        False,
        None,
    ),
    Every(0, float("inf"), "\\N", b"\\", datetime.date(2026, 11, 29), Timestamp(0), None, decimal.Decimal("1E+2")),
    Every(1, 0.1, "None", b"\t\n", None, None, True, decimal.Decimal("0.001")),
    Every(2, 1e300, "\\.", None, None, None, None, None),
    Every(3, None, None, None, None, None, None, None),
]


@pytest.fixture
def table(postgresql_url):
    name = unique_table()
    dialect = dialect_of(postgresql_url)
    types = {f["name"]: f["type"] for f in _SCHEMA["fields"]}
    columns = ", ".join("%s %s" % (dialect.quote(c), dialect.column_type(types[c], c)) for c in _COLUMNS)
    execute(postgresql_url, "CREATE TABLE %s (%s)" % (dialect.quote(name), columns))
    yield name
    drop_table(postgresql_url, name)


def _copy(url, table, columns, blocks):
    dialect = dialect_of(url)
    with dialect.connect() as conn:
        postgresql_copy.copy_blocks(conn.cursor(), dialect, dialect.quote_table(table), columns, blocks)
        conn.commit()


def _read(url, table, columns):
    q = dialect_of(url).quote
    return execute(url, "SELECT %s FROM %s ORDER BY %s" % (", ".join(map(q, columns)), q(table), q(columns[0])))


def _as_read(row):
    """A row as PostgreSQL gives it back: timestamps as aware datetimes,
    decimals at the column's scale."""
    ts = None if row.ts is None else row.ts.to_utc_datetime(has_tz=True)
    n = None if row.n is None else row.n.quantize(decimal.Decimal(10) ** -18)
    return row._replace(ts=ts, n=n)


def test_every_column_type_reads_back_as_written_edge_values_included(postgresql_url, table):
    encoder = CopyTextEncoder(_SCHEMA, keyed=False)
    # Two blocks: the rows are written in order, block after block.
    _copy(postgresql_url, table, _COLUMNS, [encoder.block(_EDGE_ROWS[:2]), encoder.block(_EDGE_ROWS[2:])])
    got = [Every(*r) for r in _read(postgresql_url, table, _COLUMNS)]
    assert got == sorted((_as_read(r) for r in _EDGE_ROWS), key=lambda r: r.l)


def test_a_nan_double_is_written_as_nan(postgresql_url, table):
    encoder = CopyTextEncoder(_SCHEMA, keyed=False)
    _copy(postgresql_url, table, _COLUMNS, [encoder.block([Every(7, float("nan"), "x", None, None, None, None, None)])])
    ((l, d),) = _read(postgresql_url, table, ("l", "d"))
    assert l == 7 and math.isnan(d)


class Narrow(typing.NamedTuple):
    value: typing.Any
    txt: str


@pytest.mark.parametrize(
    "create, field_type, value",
    [
        ("value SMALLINT", "long", 2**15),
        ("value INTEGER", "long", 2**31),
        ("value BIGINT", "long", 2**63),
        ("value BIGINT", "long", 1.5),
        ("value REAL", "double", 1e40),
        ("value BOOLEAN", "boolean", 2),
        ("value VARCHAR(5)", "string", "too long"),
    ],
)
def test_a_value_its_column_cannot_hold_fails_the_copy_and_writes_nothing(postgresql_url, create, field_type, value):
    name = unique_table()
    q = dialect_of(postgresql_url).quote
    execute(postgresql_url, "CREATE TABLE %s (%s, txt TEXT)" % (q(name), create))
    schema = {
        "type": "struct",
        "fields": [
            {"name": "value", "type": field_type, "nullable": True, "metadata": {}},
            {"name": "txt", "type": "string", "nullable": True, "metadata": {}},
        ],
    }
    block = CopyTextEncoder(schema, keyed=False).block([Narrow(None, "fits"), Narrow(value, "refused")])
    try:
        with pytest.raises(Exception, match="value|range|invalid|too long"):  # the server's own message
            _copy(postgresql_url, name, ("value", "txt"), [block])
        assert _read(postgresql_url, name, ("value", "txt")) == []
    finally:
        drop_table(postgresql_url, name)


class Plain(typing.NamedTuple):
    id: typing.Optional[int]
    user: typing.Optional[str]
    amount: typing.Optional[float]


_PLAIN_SCHEMA = spark_rows.spark_schema_of(Plain)
_plain_rows = st.lists(
    st.builds(
        Plain,
        st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)),
        st.one_of(st.none(), st.text(alphabet=st.sampled_from("ab\t\n\r\\N. é"), max_size=6)),
        st.one_of(st.none(), st.floats(allow_nan=False)),
    ),
    max_size=12,
)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(_plain_rows, st.booleans())
def test_a_block_is_its_rows_lines_whichever_way_it_is_made(rows, keyed):
    encoder = CopyTextEncoder(_PLAIN_SCHEMA, keyed=keyed)
    lines = "".join(encoder.line(r) for r in rows).encode("utf-8")
    assert encoder.block(rows) == lines
    assert lines.count(b"\n") == len(rows)


def test_tricky_strings_read_back_as_written(postgresql_url):
    name = unique_table()
    q = dialect_of(postgresql_url).quote
    execute(postgresql_url, "CREATE TABLE %s (id BIGINT, %s TEXT, amount DOUBLE PRECISION)" % (q(name), q("user")))
    rows = [Plain(i, s, 0.5) for i, s in enumerate(["a\tb", "\\", "\\N", "\\.", "x\r\ny", "None", "", "\\t"])]
    rows.append(Plain(len(rows), None, None))
    try:
        _copy(postgresql_url, name, Plain._fields, [CopyTextEncoder(_PLAIN_SCHEMA, keyed=False).block(rows)])
        assert [Plain(*r) for r in _read(postgresql_url, name, Plain._fields)] == rows
    finally:
        drop_table(postgresql_url, name)


def test_retractions_carry_their_flag_with_key_columns_and_give_no_line_without():
    row = Plain(1, "u", 2.5)
    retraction = triggers.Retraction(Plain(1, "u", 2.0))
    assert CopyTextEncoder(_PLAIN_SCHEMA, keyed=True).block([retraction, row]) == b"t\t1\tu\t2.0\nf\t1\tu\t2.5\n"
    assert CopyTextEncoder(_PLAIN_SCHEMA, keyed=False).block([retraction, row]) == b"1\tu\t2.5\n"


class One(typing.NamedTuple):
    only: str


def test_a_row_of_one_column_is_a_line_of_one_value():
    encoder = CopyTextEncoder(spark_rows.spark_schema_of(One), keyed=False)
    assert encoder.block([One("a"), One(None), One("b\tc")]) == b"a\n\\N\nb\\tc\n"
