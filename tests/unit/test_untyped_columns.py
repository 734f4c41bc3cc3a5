"""worker/untyped_columns.py: the Spark types inferred for Python values and
merged over rows as Spark's createDataFrame merges them, and the exact
conversion of a value to a column's type (or its refusal, naming the
write, the column, the value and where the type came from)."""

import datetime
import decimal
import typing

import apache_beam as beam
import pytest
from apache_beam.utils.timestamp import Timestamp

from beam_spark_runner.worker import spark_rows
from beam_spark_runner.worker.untyped_columns import (
    ColumnTypeError,
    TypeSample,
    converter,
    infer_type,
    resolved_schema,
    untyped_columns,
)

UTC = datetime.timezone.utc


def _convert(spark_type, value):
    return converter(spark_type, "c", "W(t)", "its column in T")(value)


def test_python_values_get_the_types_createDataFrame_infers():
    assert [
        infer_type(v, "c")
        for v in (True, 1, 1.5, "s", b"b", decimal.Decimal("1.5"), datetime.date(2026, 1, 1), Timestamp(0))
    ] == ["boolean", "long", "double", "string", "binary", "decimal(38,18)", "date", "timestamp"]
    assert infer_type(datetime.datetime(2026, 1, 1, tzinfo=UTC), "c") == "timestamp"
    assert infer_type([1, None], "c") == {"type": "array", "elementType": "long", "containsNull": True}
    assert infer_type({"a": 1.0}, "c")["valueType"] == "double"
    assert infer_type(beam.Row(x=1), "c")["fields"][0]["type"] == "long"
    assert infer_type(None, "c") is None
    with pytest.raises(ColumnTypeError, match="column 'c' holds .* which has no Spark SQL type"):
        infer_type(object(), "c")


def test_a_sample_merges_every_row_and_refuses_two_types_naming_both():
    sample = TypeSample(["n", "xs"], "W(t)")
    sample.add(beam.Row(n=None, xs=[]))
    sample.add(beam.Row(n=1, xs=[None]))
    sample.add(beam.Row(n=2, xs=["a"]))
    assert sample.types == {"n": "long", "xs": {"type": "array", "elementType": "string", "containsNull": True}}
    with pytest.raises(ColumnTypeError, match=r"^W\(t\): column 'n' has values of two types: bigint and double$"):
        sample.add(beam.Row(n=2.5, xs=None))


def test_values_convert_exactly_to_the_column_type_or_are_refused():
    assert _convert("integer", 5) == 5
    assert _convert("double", 3) == 3.0 and isinstance(_convert("double", 3), float)
    assert _convert("decimal(10,2)", 0.1) == decimal.Decimal("0.10")
    assert _convert("decimal(10,2)", 7) == decimal.Decimal("7.00")
    assert _convert("timestamp", datetime.datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)) == Timestamp(1)
    assert _convert("binary", bytearray(b"x")) == b"x"
    assert _convert("long", None) is None
    refused = [
        ("integer", 2**31, r"2147483648 \(int\)"),
        ("short", True, r"True \(bool\)"),
        ("long", 1.0, r"1.0 \(float\)"),
        ("long", "1", r"'1' \(str\)"),
        ("double", 2**60 + 1, r"which a float does not hold exactly"),
        ("float", 1e39, r"past the type's range"),
        ("decimal(10,2)", decimal.Decimal("1.005"), r"which would be rounded or is too large"),
        ("decimal(4,2)", 100, r"which would be rounded or is too large"),
        ("timestamp", datetime.datetime(2026, 1, 1), r"a datetime without a time zone"),
        ("date", datetime.datetime(2026, 1, 1, tzinfo=UTC), r"datetime"),
        ("string", b"x", r"b'x' \(bytes\)"),
    ]
    for spark_type, value, message in refused:
        with pytest.raises(
            ColumnTypeError, match=r"^W\(t\): column 'c' cannot hold .*%s.*: its column in T is " % message
        ):
            _convert(spark_type, value)
    with pytest.raises(ColumnTypeError, match="the column is NOT NULL"):
        converter("long", "c", "W(t)", "its column in T", nullable=False)(None)


def test_only_untyped_fields_are_resolved_from_the_target_then_the_data():
    schema = {
        "type": "struct",
        "fields": [
            {"name": "k", "type": "string", "nullable": True, "metadata": {}},
            {"name": "a", "type": spark_rows.UNTYPED, "nullable": True, "metadata": {}},
            {"name": "b", "type": spark_rows.UNTYPED, "nullable": True, "metadata": {}},
        ],
    }
    assert untyped_columns(schema) == ("a", "b")
    resolved = resolved_schema(schema, ("a", "b"), {"a": ("integer", False)}, {"b": "double"}, "W(t)")
    assert [(f["name"], f["type"], f["nullable"]) for f in resolved["fields"]] == [
        ("k", "string", True),
        ("a", "integer", False),
        ("b", "double", True),
    ]
    with pytest.raises(ColumnTypeError, match=r"field 'b' has no type Beam knows \(it is Any\).*every value is None"):
        resolved_schema(schema, ("a", "b"), None, {"a": "long", "b": None}, "W(t)")


def test_a_row_typed_any_has_untyped_fields_only_where_beam_types_it_any():
    p = beam.Pipeline()
    sums = p | beam.Create([("a", 1)]) | beam.CombinePerKey(sum)
    rows = sums | beam.Map(lambda kv: beam.Row(k=kv[0], total=kv[1]))
    schema = spark_rows.spark_schema_of(rows.element_type, untyped=True)
    assert [(f["name"], f["type"]) for f in schema["fields"]] == [("k", "string"), ("total", spark_rows.UNTYPED)]
    with pytest.raises(spark_rows.UnmappableType, match=r"field 'total' has no type Beam knows \(it is Any\)"):
        spark_rows.spark_schema_of(rows.element_type)


class _Inner(typing.NamedTuple):
    v: typing.List[typing.Any]


class _WithAnyInside(typing.NamedTuple):
    k: str
    vals: typing.List[typing.Any]  # what Beam infers for list(kv[1]) of an untyped kv
    by_name: typing.Dict[str, typing.Any]
    inner: _Inner
    ns: typing.List[int]


def test_a_field_with_any_inside_a_list_a_map_or_a_row_is_untyped_as_a_whole():
    """A field with Any anywhere in it takes its column's type from the
    target or the data, as a field typed Any does; one whose type Beam
    knows whole keeps it."""
    schema = spark_rows.spark_schema_of(_WithAnyInside, untyped=True)
    assert [(f["name"], f["type"], f["nullable"]) for f in schema["fields"]] == [
        ("k", "string", False),
        ("vals", spark_rows.UNTYPED, True),
        ("by_name", spark_rows.UNTYPED, True),
        ("inner", spark_rows.UNTYPED, True),
        ("ns", {"type": "array", "elementType": "long", "containsNull": False}, False),
    ]
    with pytest.raises(spark_rows.UnmappableType, match=r"field 'vals\[\]' has no type Beam knows \(it is Any\)"):
        spark_rows.spark_schema_of(_WithAnyInside)


def test_a_numeric_event_time_counts_its_unit_since_the_epoch():
    assert spark_rows.numeric_event_time("s", "at", "R")(2) == Timestamp(2)
    assert spark_rows.numeric_event_time("s", "at", "R")(1.5) == Timestamp(micros=1_500_000)
    assert spark_rows.numeric_event_time("ms", "at", "R")(1500) == Timestamp(micros=1_500_000)
    assert spark_rows.numeric_event_time("us", "at", "R")(decimal.Decimal("7.6")) == Timestamp(micros=8)
    assert spark_rows.numeric_event_time("s", "at", "R")(None) is None
    with pytest.raises(ColumnTypeError, match=r"^R: timestamp_column 'at' holds 1e\+300, which is no time Beam"):
        spark_rows.numeric_event_time("s", "at", "R")(1e300)


def test_a_target_path_that_surely_does_not_exist_is_not_read_for_its_schema(tmp_path):
    """A new local directory is known new without Spark's read, which logs
    a warning with a stack trace for a missing path; other file systems,
    and paths without a scheme where Hadoop's default is not local, are
    left to Spark."""
    from beam_spark_runner.execution.untyped_writes import _may_exist

    new, old = str(tmp_path / "new"), str(tmp_path)
    for default_fs in ("file:///", None):
        assert not _may_exist(new, default_fs) and _may_exist(old, default_fs)
    assert not _may_exist("file://" + new, "hdfs://namenode:8020") and _may_exist("file://" + old, "file:///")
    assert _may_exist(new, "hdfs://namenode:8020")
    assert _may_exist("hdfs://namenode:8020/lake/totals", "file:///")
