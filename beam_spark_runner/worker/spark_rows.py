"""Spark SQL rows as Beam schema rows, and back: the type mapping and the
conversions of Arrow record batches (what Spark hands Python) to Beam rows
and back. No Spark here: a Spark schema is its JSON form
(`StructType.jsonValue()`), data is pyarrow.

The mapping (docs/io.md has the table), each way exact for these types:

    Spark                 Beam schema type               Python value
    boolean               BOOLEAN                        bool
    byte / short          INT16                          int
    integer / long        INT32 / INT64                  int
    float / double        FLOAT / DOUBLE                 float
    string / binary       STRING / BYTES                 str / bytes
    date                  logical date                   datetime.date
    timestamp             logical micros_instant         apache_beam Timestamp
    decimal(p, s)         logical decimal                decimal.Decimal
    array<T>              ARRAY<T>                       list
    map<K, V>             MAP<K, V>                      dict
    struct<...>           ROW<...>                       a row (named tuple)

Nullability is kept (a Spark field's `nullable`, an array's `containsNull`,
a map's `valueContainsNull`). A decimal's precision and scale are not part
of Beam's decimal type: a row type made here keeps its Spark schema, so a
row read from Spark writes back with the same type; other rows write
decimals as decimal(38, 18). Anything else (timestamp_ntz, intervals,
variant, null, char/varchar, calendar intervals) is refused, naming the
column and its type (`UnmappableType`).
"""

import datetime
import decimal
import functools
import hashlib
import json
import uuid

import pyarrow as pa
from apache_beam.portability.api import schema_pb2
from apache_beam.typehints import schemas
from apache_beam.utils.timestamp import Timestamp

from beam_spark_runner.worker import beam_internals

_ATOMIC = {
    "boolean": schema_pb2.BOOLEAN,
    # Beam Python's BYTE coder is unsigned (0-255), Spark's byte signed.
    "byte": schema_pb2.INT16,
    "short": schema_pb2.INT16,
    "integer": schema_pb2.INT32,
    "long": schema_pb2.INT64,
    "float": schema_pb2.FLOAT,
    "double": schema_pb2.DOUBLE,
    "string": schema_pb2.STRING,
    "binary": schema_pb2.BYTES,
}
_ATOMIC_BACK = {v: k for k, v in _ATOMIC.items() if k != "byte"}
_ATOMIC_BACK[schema_pb2.BYTE] = "short"  # Beam's bytes are 0-255
_DATE_URN = beam_internals.DATE_LOGICAL_TYPE.urn()
_MICROS_URN = schemas.MicrosInstant.urn()
_MILLIS_URN = schemas.MillisInstant.urn()
_DECIMAL_URN = schemas.DecimalLogicalType.urn()
DEFAULT_DECIMAL = "decimal(38,18)"
# The type a write's schema gives a top-level field Beam types Any: not a
# Spark type; the write takes its type from the target or the data when it
# runs (worker/untyped_columns.py).
UNTYPED = "beam:untyped"
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


class UnmappableType(ValueError):
    """A column whose type has no Beam (or Spark) counterpart; the message
    names the column and the type."""


class ColumnTypeError(ValueError):
    """A value a column cannot take, or cannot be read as; the message names
    the transform, the column and the value (or types) that did not fit.
    The runner reports it as the run's error wherever it was raised (a
    Spark task, the driver)."""


def _logical(python_type):
    """Beam's FieldType for a logical type, as Beam itself writes it."""
    return schemas.typing_to_runner_api(python_type)


def _field_type(spark_type, nullable, column):
    if isinstance(spark_type, str):
        if spark_type in _ATOMIC:
            field = schema_pb2.FieldType(atomic_type=_ATOMIC[spark_type])
        elif spark_type == "date":
            field = _logical(datetime.date)
        elif spark_type == "timestamp":
            field = _logical(Timestamp)
        elif spark_type.startswith("decimal"):
            field = _logical(decimal.Decimal)
        else:
            raise UnmappableType("column %r: Spark type %s has no Beam schema type" % (column, spark_type))
    else:
        kind = spark_type.get("type")
        if kind == "array":
            field = schema_pb2.FieldType(
                array_type=schema_pb2.ArrayType(
                    element_type=_field_type(spark_type["elementType"], spark_type["containsNull"], column + "[]")
                )
            )
        elif kind == "map":
            field = schema_pb2.FieldType(
                map_type=schema_pb2.MapType(
                    key_type=_field_type(spark_type["keyType"], False, column + "{key}"),
                    value_type=_field_type(spark_type["valueType"], spark_type["valueContainsNull"], column + "{}"),
                )
            )
        elif kind == "struct":
            field = schema_pb2.FieldType(row_type=schema_pb2.RowType(schema=beam_schema(spark_type, column + ".")))
        else:
            raise UnmappableType("column %r: Spark type %s has no Beam schema type" % (column, json.dumps(spark_type)))
    field.nullable = bool(nullable)
    return field


def _schema_id(spark_schema):
    """The same id for the same Spark schema, in every process."""
    digest = hashlib.sha1(json.dumps(spark_schema, sort_keys=True).encode()).hexdigest()
    return str(uuid.UUID(digest[:32]))


def beam_schema(spark_schema, prefix="") -> schema_pb2.Schema:
    """The Beam schema of a Spark StructType (its JSON form)."""
    fields = [
        schema_pb2.Field(name=f["name"], type=_field_type(f["type"], f.get("nullable", True), prefix + f["name"]))
        for f in spark_schema["fields"]
    ]
    return schema_pb2.Schema(fields=fields, id=_schema_id(spark_schema))


def row_type(spark_schema):
    """The Python row type (a named tuple Beam registers with its RowCoder)
    of a Spark StructType; it remembers the Spark schema (`spark_schema_of`)."""
    t = schemas.named_tuple_from_schema(beam_schema(spark_schema))
    t.__spark_schema__ = json.dumps(spark_schema, sort_keys=True)
    return t


def spark_schema_of(element_type, untyped=False):
    """The Spark StructType (JSON form) for rows of `element_type`: the one a
    row type made by `row_type` remembers, else derived from its Beam schema.
    With `untyped`, a top-level field Beam types Any, wholly or in part
    (`List[Any]`, a map or row with an Any in it), gets the type UNTYPED
    (the write resolves it when it runs); without, it is refused. Raises
    UnmappableType for a field with no Spark type, TypeError for an
    element type without a schema."""
    kept = getattr(element_type, "__spark_schema__", None)
    if kept is not None:
        return json.loads(kept)
    try:
        schema = schemas.schema_from_element_type(element_type)
    except Exception as e:
        raise TypeError(
            "%s has no schema (use beam.Row, a NamedTuple or a type with a Beam schema)" % element_type
        ) from e
    return _spark_struct(schema, "", untyped)


def _is_any(field):
    return field.WhichOneof("type_info") == "logical_type" and field.logical_type.urn == schemas.PYTHON_ANY_URN


def _contains_any(field):
    """Whether Beam types `field`, or any part of it (a list's elements, a
    map's keys or values, a nested row's fields), Any."""
    which = field.WhichOneof("type_info")
    if which == "array_type":
        return _contains_any(field.array_type.element_type)
    if which == "iterable_type":
        return _contains_any(field.iterable_type.element_type)
    if which == "map_type":
        return _contains_any(field.map_type.key_type) or _contains_any(field.map_type.value_type)
    if which == "row_type":
        return any(_contains_any(f.type) for f in field.row_type.schema.fields)
    return _is_any(field)


def _spark_struct(schema, prefix, untyped=False):
    return {
        "type": "struct",
        "fields": [
            {
                "name": f.name,
                "type": UNTYPED if untyped and _contains_any(f.type) else _spark_type(f.type, prefix + f.name),
                "nullable": True if untyped and _contains_any(f.type) else f.type.nullable,
                "metadata": {},
            }
            for f in schema.fields
        ],
    }


def _spark_type(field, column):
    which = field.WhichOneof("type_info")
    if which == "atomic_type" and field.atomic_type in _ATOMIC_BACK:
        return _ATOMIC_BACK[field.atomic_type]
    if which == "logical_type":
        urn = field.logical_type.urn
        if urn == _DATE_URN:
            return "date"
        if urn in (_MICROS_URN, _MILLIS_URN):
            return "timestamp"
        if urn == _DECIMAL_URN:
            return DEFAULT_DECIMAL
    if which == "array_type" or which == "iterable_type":
        element = field.array_type.element_type if which == "array_type" else field.iterable_type.element_type
        return {"type": "array", "elementType": _spark_type(element, column + "[]"), "containsNull": element.nullable}
    if which == "map_type":
        value = field.map_type.value_type
        return {
            "type": "map",
            "keyType": _spark_type(field.map_type.key_type, column + "{key}"),
            "valueType": _spark_type(value, column + "{}"),
            "valueContainsNull": value.nullable,
        }
    if which == "row_type":
        return _spark_struct(field.row_type.schema, column + ".")
    if which == "logical_type" and field.logical_type.urn == schemas.PYTHON_ANY_URN:
        raise UnmappableType(
            "field %r has no type Beam knows (it is Any): declare the element type, e.g. a NamedTuple "
            "with typed fields and .with_output_types(...)" % column
        )
    raise UnmappableType("field %r: Beam type %s has no Spark SQL type" % (column, _describe(field)))


def _describe(field):
    which = field.WhichOneof("type_info")
    if which == "atomic_type":
        return schema_pb2.AtomicType.Name(field.atomic_type)
    if which == "logical_type":
        return field.logical_type.urn
    return which


# --- values ---------------------------------------------------------------------


def _identity(value):
    return value


def _to_timestamp(value):
    """An Arrow timestamp (a datetime, or micros) as Beam's Timestamp."""
    if value is None or isinstance(value, Timestamp):
        return value
    if isinstance(value, int):
        return Timestamp(micros=value)
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.timezone.utc)
    delta = value - _EPOCH
    return Timestamp(micros=(delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds)


# What a numeric timestamp column counts, in microseconds (ReadFromSpark's
# `timestamp_unit`).
TIMESTAMP_UNITS = {"s": 1_000_000, "ms": 1_000, "us": 1}
NUMERIC_TYPES = ("byte", "short", "integer", "long", "float", "double")


def is_numeric(spark_type):
    return spark_type in NUMERIC_TYPES or (isinstance(spark_type, str) and spark_type.startswith("decimal"))


def numeric_event_time(unit, column, label):
    """A function turning a value of a numeric timestamp column counting
    `unit`s ("s", "ms", "us") since the epoch into a Beam Timestamp (None
    for None), rounded to the microsecond; a value outside Beam's
    timestamps, or not finite, raises ColumnTypeError naming `label`, the
    column and the value."""
    from apache_beam.utils.timestamp import MAX_TIMESTAMP, MIN_TIMESTAMP

    factor = TIMESTAMP_UNITS[unit]
    low, high = MIN_TIMESTAMP.micros, MAX_TIMESTAMP.micros

    def read(value):
        if value is None:
            return None
        if isinstance(value, int):
            micros = value * factor
        elif isinstance(value, decimal.Decimal) and value.is_finite():
            micros = int((value * factor).to_integral_value(decimal.ROUND_HALF_EVEN))
        elif isinstance(value, float) and value == value and abs(value) != float("inf"):
            micros = round(value * factor)
        else:
            micros = None
        if micros is None or not low <= micros <= high:
            raise ColumnTypeError(
                "%s: timestamp_column %r holds %r, which is no time Beam holds as %s since the epoch "
                "(timestamp_unit=%r)"
                % (label, column, value, {"s": "seconds", "ms": "milliseconds", "us": "microseconds"}[unit], unit)
            )
        return Timestamp(micros=micros)

    return read


def _from_timestamp(value):
    return None if value is None else value.micros


def reader_of(spark_type, converting_only=False):
    """A function turning one value of an Arrow column of `spark_type` (as
    `to_pylist` gives it) into what the Beam row field holds; with
    `converting_only`, None where the value needs no conversion."""
    if converting_only:
        read = reader_of(spark_type)
        return None if read is _identity else read
    if isinstance(spark_type, str):
        return _to_timestamp if spark_type == "timestamp" else _identity
    kind = spark_type["type"]
    if kind == "array":
        element = reader_of(spark_type["elementType"])
        if element is _identity:
            return _identity
        return lambda v: None if v is None else [element(x) for x in v]
    if kind == "map":
        key, value = reader_of(spark_type["keyType"]), reader_of(spark_type["valueType"])
        return lambda v: None if v is None else {key(k): value(x) for k, x in v}
    # A struct: a dict from Arrow, a row of its own Beam type.
    nested = row_type(spark_type)
    fields = [(f["name"], reader_of(f["type"])) for f in spark_type["fields"]]
    return lambda v: None if v is None else nested(**{name: read(v[name]) for name, read in fields})


def column_reader_of(spark_type):
    """A function turning an Arrow column of `spark_type` (as Spark hands it
    to Python) into the list of what the Beam row fields hold, one per value
    and equal to what `reader_of` makes of each value (None for a null).
    Whole columns at once where the type allows it: a timestamp column as
    its microseconds, any type that needs no conversion as `to_pylist`."""
    if spark_type == "timestamp":
        return _timestamp_column
    read = reader_of(spark_type, converting_only=True)
    if read is None:
        return _plain_column
    return functools.partial(_column_by_value, read)


def _plain_column(column):
    return column.to_pylist()


def _column_by_value(read, column):
    return [read(v) for v in column.to_pylist()]


def _timestamp_column(column):
    # Imported here: the Beam shim loads the SDK harness, which the driver's
    # schema mapping and the database connectors importing this module never
    # need.
    from beam_spark_runner.worker.beam_internals import timestamps_from_micros

    if column.type.unit != "us":
        column = column.cast(pa.timestamp("us", tz=column.type.tz))
    return timestamps_from_micros(column.cast(pa.int64()).to_pylist())


def rows_of(row_type, readers, batch):
    """The rows of `row_type` (made by `row_type(spark_schema)`) holding an
    Arrow record batch's values, in its order; `readers` are the
    `column_reader_of` functions of its columns, in column order."""
    if not readers:
        return [row_type() for _ in range(batch.num_rows)]
    return list(map(row_type, *(read(batch.column(i)) for i, read in enumerate(readers))))


def writer_of(spark_type):
    """A function turning one Beam row field value into what pyarrow takes
    for a column of `spark_type`."""
    if isinstance(spark_type, str):
        return _from_timestamp if spark_type == "timestamp" else _identity
    kind = spark_type["type"]
    if kind == "array":
        element = writer_of(spark_type["elementType"])
        return lambda v: None if v is None else [element(x) for x in v]
    if kind == "map":
        key, value = writer_of(spark_type["keyType"]), writer_of(spark_type["valueType"])
        return lambda v: None if v is None else [(key(k), value(x)) for k, x in v.items()]
    fields = [(f["name"], writer_of(f["type"])) for f in spark_type["fields"]]
    return lambda v: None if v is None else {name: write(getattr(v, name)) for name, write in fields}
