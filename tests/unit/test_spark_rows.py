"""Spark SQL types as Beam schema types and back (worker/spark_rows.py),
without Spark: Spark schemas in their JSON form, values through pyarrow."""

import datetime
import decimal
import typing

import pyarrow as pa
import pytest
from apache_beam.coders import RowCoder
from apache_beam.portability.api import schema_pb2
from apache_beam.utils.timestamp import Timestamp

from beam_spark_runner.worker import spark_rows

ALL_TYPES = {
    "type": "struct",
    "fields": [
        {"name": "flag", "type": "boolean", "nullable": True, "metadata": {}},
        {"name": "b", "type": "byte", "nullable": True, "metadata": {}},
        {"name": "s", "type": "short", "nullable": True, "metadata": {}},
        {"name": "i", "type": "integer", "nullable": False, "metadata": {}},
        {"name": "l", "type": "long", "nullable": True, "metadata": {}},
        {"name": "f", "type": "float", "nullable": True, "metadata": {}},
        {"name": "d", "type": "double", "nullable": True, "metadata": {}},
        {"name": "text", "type": "string", "nullable": True, "metadata": {}},
        {"name": "raw", "type": "binary", "nullable": True, "metadata": {}},
        {"name": "day", "type": "date", "nullable": True, "metadata": {}},
        {"name": "ts", "type": "timestamp", "nullable": True, "metadata": {}},
        {"name": "money", "type": "decimal(10,2)", "nullable": True, "metadata": {}},
        {
            "name": "tags",
            "type": {"type": "array", "elementType": "string", "containsNull": True},
            "nullable": True,
            "metadata": {},
        },
        {
            "name": "scores",
            "type": {"type": "map", "keyType": "string", "valueType": "timestamp", "valueContainsNull": True},
            "nullable": True,
            "metadata": {},
        },
        {
            "name": "inner",
            "type": {
                "type": "struct",
                "fields": [
                    {"name": "x", "type": "long", "nullable": False, "metadata": {}},
                    {"name": "when", "type": "timestamp", "nullable": True, "metadata": {}},
                ],
            },
            "nullable": True,
            "metadata": {},
        },
    ],
}


def test_every_mapped_spark_type_has_a_beam_schema_type_and_comes_back_the_same():
    schema = spark_rows.beam_schema(ALL_TYPES)
    by_name = {f.name: f.type for f in schema.fields}
    assert by_name["i"] == schema_pb2.FieldType(atomic_type=schema_pb2.INT32, nullable=False)
    assert by_name["s"].atomic_type == schema_pb2.INT16 and by_name["s"].nullable
    assert by_name["b"].atomic_type == schema_pb2.INT16  # Beam Python's BYTE is unsigned
    assert by_name["ts"].logical_type.urn == "beam:logical_type:micros_instant:v1"
    assert by_name["day"].logical_type.urn == "beam:logical_type:date:v1"
    assert by_name["inner"].row_type.schema.fields[0].name == "x"
    t = spark_rows.row_type(ALL_TYPES)
    assert spark_rows.spark_schema_of(t) == ALL_TYPES  # the row type keeps its Spark schema
    assert spark_rows.beam_schema(ALL_TYPES).id == schema.id  # stable across processes


def test_a_beam_schema_of_its_own_maps_to_spark_types():
    class Order(typing.NamedTuple):
        id: int
        amount: float
        placed: Timestamp
        lines: typing.List[str]
        note: typing.Optional[str]
        price: decimal.Decimal

    struct = spark_rows.spark_schema_of(Order)
    assert [(f["name"], f["type"], f["nullable"]) for f in struct["fields"]] == [
        ("id", "long", False),
        ("amount", "double", False),
        ("placed", "timestamp", False),
        ("lines", {"type": "array", "elementType": "string", "containsNull": False}, False),
        ("note", "string", True),
        ("price", "decimal(38,18)", False),
    ]


@pytest.mark.parametrize(
    "spark_type, shown",
    [
        ("timestamp_ntz", "timestamp_ntz"),
        ("interval day to second", "interval day to second"),
        ("void", "void"),
        ({"type": "udt", "class": "x"}, "udt"),
    ],
)
def test_a_type_without_a_beam_counterpart_is_refused_naming_the_column(spark_type, shown):
    struct = {
        "type": "struct",
        "fields": [
            {
                "name": "outer",
                "type": {"type": "array", "elementType": spark_type, "containsNull": True},
                "nullable": True,
                "metadata": {},
            }
        ],
    }
    with pytest.raises(spark_rows.UnmappableType, match=r"column 'outer\[\]': Spark type .*%s" % shown):
        spark_rows.beam_schema(struct)


def _sample(when):
    """A value of every mapped type (as Arrow hands them to Python), `when` the timestamps'."""
    return dict(
        flag=True,
        b=-3,
        s=300,
        i=7,
        l=2**40,
        f=1.5,
        d=2.25,
        text="héllo",
        raw=b"\x00\x01",
        day=datetime.date(2026, 11, 27),
        ts=when,
        money=decimal.Decimal("12.34"),
        tags=["a", None],
        scores=[("k", when), ("n", None)],
        inner={"x": 5, "when": None},
    )


def test_values_go_from_arrow_to_encoded_rows_and_back_unchanged():
    t = spark_rows.row_type(ALL_TYPES)
    inner_type = spark_rows.row_type(ALL_TYPES["fields"][-1]["type"])
    when = datetime.datetime(2026, 11, 27, 8, 30, 0, 123456, tzinfo=datetime.timezone.utc)
    row = _sample(when)
    readers = {f["name"]: spark_rows.reader_of(f["type"]) for f in ALL_TYPES["fields"]}
    beam_row = t(**{name: readers[name](value) for name, value in row.items()})
    assert beam_row.ts == Timestamp(micros=int(when.timestamp()) * 1_000_000 + 123456)
    assert beam_row.scores == {"k": beam_row.ts, "n": None}
    # The nested row has the inner schema's type (by its schema id: Beam up to 2.73
    # makes a new class per use of a schema, later releases reuse one).
    assert type(beam_row.inner).__name__ == inner_type.__name__ and beam_row.inner.x == 5
    coder = RowCoder(spark_rows.beam_schema(ALL_TYPES))
    decoded = coder.decode(coder.encode(beam_row))
    assert decoded == beam_row
    writers = {f["name"]: spark_rows.writer_of(f["type"]) for f in ALL_TYPES["fields"]}
    back = {name: writers[name](getattr(decoded, name)) for name in row}
    assert back["ts"] == beam_row.ts.micros and back["inner"] == {"x": 5, "when": None}
    arrow = pa.array([back["scores"]], type=pa.map_(pa.string(), pa.timestamp("us", tz="UTC")))
    assert arrow.to_pylist() == [[("k", when), ("n", None)]]


def _arrow_type(spark_type):
    atomic = {
        "boolean": pa.bool_(),
        "byte": pa.int8(),
        "short": pa.int16(),
        "integer": pa.int32(),
        "long": pa.int64(),
        "float": pa.float32(),
        "double": pa.float64(),
        "string": pa.string(),
        "binary": pa.binary(),
        "date": pa.date32(),
        "timestamp": pa.timestamp("us", tz="UTC"),
        "decimal(10,2)": pa.decimal128(10, 2),
    }
    if isinstance(spark_type, str):
        return atomic[spark_type]
    if spark_type["type"] == "array":
        return pa.list_(_arrow_type(spark_type["elementType"]))
    if spark_type["type"] == "map":
        return pa.map_(_arrow_type(spark_type["keyType"]), _arrow_type(spark_type["valueType"]))
    return pa.struct([pa.field(f["name"], _arrow_type(f["type"]), f["nullable"]) for f in spark_type["fields"]])


def test_a_record_batch_reads_as_the_rows_the_value_readers_make():
    when = datetime.datetime(2026, 11, 27, 8, 30, 0, 123456, tzinfo=datetime.timezone.utc)
    before_epoch = datetime.datetime(1901, 3, 4, 5, 6, 7, 890123, tzinfo=datetime.timezone.utc)
    full = _sample(when)
    names = [f["name"] for f in ALL_TYPES["fields"]]
    nulls = {name: (1 if name == "i" else None) for name in names}
    earlier = dict(full, i=2, ts=before_epoch, tags=[], scores=[], inner={"x": -1, "when": before_epoch})
    values = [full, nulls, earlier]
    batch = pa.RecordBatch.from_arrays(
        [pa.array([v[f["name"]] for v in values], _arrow_type(f["type"])) for f in ALL_TYPES["fields"]], names=names
    )
    t = spark_rows.row_type(ALL_TYPES)
    readers = [spark_rows.column_reader_of(f["type"]) for f in ALL_TYPES["fields"]]
    rows = spark_rows.rows_of(t, readers, batch)
    by_value = {f["name"]: spark_rows.reader_of(f["type"]) for f in ALL_TYPES["fields"]}
    expected = [t(**{name: by_value[name](value) for name, value in v.items()}) for v in values]
    assert rows == expected
    assert all(type(row) is t for row in rows)
    assert rows[0].ts == Timestamp(micros=int(when.timestamp()) * 1_000_000 + 123456)
    assert rows[2].ts == Timestamp.from_utc_datetime(before_epoch) and rows[2].inner.when == rows[2].ts
    assert rows[1] == t(**nulls)  # a null is None, a timestamp's too
    coder = RowCoder(spark_rows.beam_schema(ALL_TYPES))
    assert [coder.decode(coder.encode(row)) for row in rows] == rows
    assert spark_rows.rows_of(t, readers, batch.slice(1, 2)) == expected[1:]
    assert spark_rows.rows_of(t, readers, batch.slice(2, 1)) == expected[2:]  # no null in the slice
    no_columns = spark_rows.row_type({"type": "struct", "fields": []})
    two_rows = pa.RecordBatch.from_pydict({"x": [1, 2]}).select([])
    assert spark_rows.rows_of(no_columns, [], two_rows) == [no_columns(), no_columns()]


def test_a_timestamp_column_reads_as_the_timestamps_beam_itself_makes():
    micros = [0, 1, -1, 999_999, -1_000_001, 1_764_201_600_123_456, None, -62_135_596_800_000_000]
    column = pa.array(micros, pa.int64()).cast(pa.timestamp("us", tz="UTC"))
    read = spark_rows.column_reader_of("timestamp")(column)
    beams = [None if m is None else Timestamp(micros=m) for m in micros]
    assert read == beams
    for got, beam in zip(read, beams):
        if beam is not None:
            assert type(got) is Timestamp and vars(got) == vars(beam) and hash(got) == hash(beam)
            assert got.micros == beam.micros and got.to_rfc3339() == beam.to_rfc3339()
    assert sorted(t for t in read if t is not None) == sorted(b for b in beams if b is not None)
