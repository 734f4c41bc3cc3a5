"""Row fields Beam types `Any` (a `beam.Row` built in a lambda from a keyed
value: `beam.Row(k=kv[0], total=kv[1])`), written by WriteToSpark and
WriteToDatabase: their types come, when the write runs, from the target
(its columns) or from the data, and every value is converted to its
column's type or refused (docs/io.md, "Fields Beam types Any").

No Spark here: types are Spark's JSON forms (worker/spark_rows.py: a name
such as "long", or a dict for arrays, maps and structs), values Python's.

- `infer_type(value)`: the Spark type Spark's `createDataFrame` infers for
  a Python value: bool boolean, int long, float double, str string, bytes
  binary, Decimal decimal(38,18), date date, datetime and Beam Timestamp
  timestamp, a list array, a dict map, a named tuple or beam.Row struct;
  None for None (and an empty list's or dict's element).
- `TypeSample`: the types of many rows' fields merged as `createDataFrame`
  merges a list's: None fits any type, two different types fail naming the
  column and both (`ColumnTypeError`).
- `converter(spark_type, ...)`: a function turning a value into what a row
  field of that type holds, exactly, refusing (`ColumnTypeError`, naming the
  write, the column, the value and where the type came from) a value the
  type cannot hold: no rounding, no truncation, no parsing of strings.
"""

import contextlib
import datetime
import decimal
import math
import re
import types

from apache_beam.utils.timestamp import MAX_TIMESTAMP, MIN_TIMESTAMP, Timestamp

from beam_spark_runner.worker.spark_rows import DEFAULT_DECIMAL, UNTYPED, ColumnTypeError

_INT_BITS = {"byte": 8, "short": 16, "integer": 32, "long": 64}
_FLOAT32_MAX = 3.4028234663852886e38
_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)$")
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def untyped_columns(schema) -> tuple:
    """The names of the top-level fields of `schema` Beam types Any."""
    return tuple(f["name"] for f in schema["fields"] if f["type"] == UNTYPED)


def simple(spark_type) -> str:
    """A Spark type as Spark's simpleString writes it (None: no type yet)."""
    if spark_type is None:
        return "unknown"
    if isinstance(spark_type, str):
        return {"long": "bigint", "integer": "int", "short": "smallint", "byte": "tinyint"}.get(spark_type, spark_type)
    kind = spark_type["type"]
    if kind == "array":
        return "array<%s>" % simple(spark_type["elementType"])
    if kind == "map":
        return "map<%s,%s>" % (simple(spark_type["keyType"]), simple(spark_type["valueType"]))
    return "struct<%s>" % ",".join("%s:%s" % (f["name"], simple(f["type"])) for f in spark_type["fields"])


def _is_struct_value(value):
    return hasattr(value, "_fields") or hasattr(value, "as_dict")


def _struct_items(value):
    if hasattr(value, "_fields"):
        return [(name, getattr(value, name)) for name in value._fields]
    return list(value.as_dict().items())


def _array(element):
    return {"type": "array", "elementType": element, "containsNull": True}


def _map(key, value):
    return {"type": "map", "keyType": key, "valueType": value, "valueContainsNull": True}


def _struct(fields):
    return {
        "type": "struct",
        "fields": [{"name": n, "type": t, "nullable": True, "metadata": {}} for n, t in fields],
    }


def infer_type(value, column):
    """The Spark type of `value` (module docstring); None for None.
    Raises ColumnTypeError for a value no Spark type holds."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "long"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "binary"
    if isinstance(value, decimal.Decimal):
        return DEFAULT_DECIMAL
    if isinstance(value, (Timestamp, datetime.datetime)):
        return "timestamp"
    if isinstance(value, datetime.date):
        return "date"
    if _is_struct_value(value):
        return _struct([(n, infer_type(v, "%s.%s" % (column, n))) for n, v in _struct_items(value)])
    if isinstance(value, (list, tuple)):
        element = None
        for item in value:
            element = merge(element, infer_type(item, column + "[]"), column + "[]")
        return _array(element)
    if isinstance(value, dict):
        key = item = None
        for k, v in value.items():
            key = merge(key, infer_type(k, column + "{key}"), column + "{key}")
            item = merge(item, infer_type(v, column + "{}"), column + "{}")
        return _map(key, item)
    raise ColumnTypeError(
        "column %r holds %r (a %s), which has no Spark SQL type" % (column, value, type(value).__name__)
    )


def merge(a, b, column):
    """The one type of two a column's values have (None fits any);
    ColumnTypeError naming the column and both types when they differ."""
    if a is None:
        return b
    if b is None or a == b:
        return a
    if isinstance(a, dict) and isinstance(b, dict) and a["type"] == b["type"]:
        kind = a["type"]
        if kind == "array":
            return _array(merge(a["elementType"], b["elementType"], column + "[]"))
        if kind == "map":
            return _map(
                merge(a["keyType"], b["keyType"], column + "{key}"),
                merge(a["valueType"], b["valueType"], column + "{}"),
            )
        fields = {f["name"]: f["type"] for f in a["fields"]}
        for f in b["fields"]:
            fields[f["name"]] = merge(fields.get(f["name"]), f["type"], "%s.%s" % (column, f["name"]))
        return _struct(list(fields.items()))
    # The two in a fixed order: which a run meets first depends on its partitions.
    first, second = sorted((simple(a), simple(b)))
    raise ColumnTypeError("column %r has values of two types: %s and %s" % (column, first, second))


def unknown_part(spark_type):
    """Whether a part of an inferred type is still unknown (only None seen)."""
    if spark_type is None:
        return True
    if isinstance(spark_type, str):
        return False
    kind = spark_type["type"]
    if kind == "array":
        return unknown_part(spark_type["elementType"])
    if kind == "map":
        return unknown_part(spark_type["keyType"]) or unknown_part(spark_type["valueType"])
    return any(unknown_part(f["type"]) for f in spark_type["fields"])


class TypeSample:
    """The merged types of `columns` over the rows `add`ed (every row: the
    sample is all of them); a conflict's error starts with `where` (the
    write and its target)."""

    def __init__(self, columns, where=""):
        self.columns = tuple(columns)
        self.types = dict.fromkeys(self.columns)
        self._where = where

    def add(self, row):
        for column in self.columns:
            value = getattr(row, column)
            if value is not None:
                with self._naming_the_write():
                    self.types[column] = merge(self.types[column], infer_type(value, column), column)

    def merged(self, other):
        """This sample and `other` (a `types` dict) as one."""
        for column in self.columns:
            with self._naming_the_write():
                self.types[column] = merge(self.types[column], other.get(column), column)
        return self

    @contextlib.contextmanager
    def _naming_the_write(self):
        try:
            yield
        except ColumnTypeError as e:
            raise ColumnTypeError("%s: %s" % (self._where, e) if self._where else str(e)) from None


# --- conversion -------------------------------------------------------------------


def converter(spark_type, column, where, source, nullable=True):
    """A function turning a value into what a row field of `spark_type`
    holds (a Beam Timestamp for a timestamp); a value the type cannot hold
    raises ColumnTypeError: "<where>: column <column> cannot hold <value>
    (<Python type>): <source> is <type>". `where` names the write and its
    target, `source` where the type came from ("its column in ...")."""

    def refuse(value, column=column, why=""):
        raise ColumnTypeError(
            "%s: column %r cannot hold %r (%s)%s: %s is %s"
            % (where, column, value, type(value).__name__, why, source, simple(spark_type))
        )

    convert = _converter(spark_type, column, refuse)
    if nullable:
        return lambda value: None if value is None else convert(value)

    def not_null(value):
        if value is None:
            refuse(value, why=", the column is NOT NULL")
        return convert(value)

    return not_null


def _converter(spark_type, column, refuse):
    if isinstance(spark_type, dict):
        return _nested_converter(spark_type, column, refuse)
    if spark_type in _INT_BITS:
        bits = _INT_BITS[spark_type]
        low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1

        def to_int(value):
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                refuse(value)
            return int(value)

        return to_int
    if spark_type in ("float", "double"):
        limit = _FLOAT32_MAX if spark_type == "float" else math.inf

        def to_float(value):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                refuse(value)
            try:
                converted = float(value)
            except OverflowError:
                converted = math.inf
            if isinstance(value, int) and converted != value:
                refuse(value, why=", which a float does not hold exactly")
            if math.isfinite(converted) and abs(converted) > limit:
                refuse(value, why=", past the type's range")
            return converted

        return to_float
    if spark_type == "boolean":
        return lambda value: value if isinstance(value, bool) else refuse(value)
    if spark_type == "string":
        return lambda value: value if isinstance(value, str) else refuse(value)
    if spark_type == "binary":
        return lambda value: bytes(value) if isinstance(value, (bytes, bytearray, memoryview)) else refuse(value)
    if spark_type == "date":

        def to_date(value):
            if not isinstance(value, datetime.date) or isinstance(value, datetime.datetime):
                refuse(value)
            return value

        return to_date
    if spark_type == "timestamp":
        return lambda value: _timestamp(value, refuse)
    match = _DECIMAL.match(spark_type)
    if match:
        return _decimal_converter(int(match.group(1)), int(match.group(2)), refuse)
    raise ColumnTypeError("column %r: Spark type %s has no Beam row field type" % (column, spark_type))


def _timestamp(value, refuse):
    if isinstance(value, Timestamp):
        return value
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            refuse(value, why=", a datetime without a time zone")
        delta = value - _EPOCH
        micros = (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
        if not MIN_TIMESTAMP.micros <= micros <= MAX_TIMESTAMP.micros:
            refuse(value)
        return Timestamp(micros=micros)
    return refuse(value)


def _decimal_converter(precision, scale, refuse):
    quantum = decimal.Decimal(1).scaleb(-scale)
    # Room for every digit the column holds and a few more: a value that
    # needs more is refused whatever its rounding.
    context = decimal.Context(prec=precision + 2)

    def to_decimal(value):
        if isinstance(value, float):
            # A float's shortest text (0.1, not its binary expansion).
            number = decimal.Decimal(repr(value))
        elif isinstance(value, (int, decimal.Decimal)) and not isinstance(value, bool):
            number = decimal.Decimal(value)
        else:
            return refuse(value)
        if not number.is_finite():
            refuse(value)
        try:
            quantized = number.quantize(quantum, context=context)
        except decimal.InvalidOperation:
            quantized = None
        if quantized is None or quantized != number or len(quantized.as_tuple().digits) > precision:
            refuse(value, why=", which would be rounded or is too large")
        return quantized

    return to_decimal


def _nested_converter(spark_type, column, refuse):
    kind = spark_type["type"]
    if kind == "array":
        element = _converter(spark_type["elementType"], column + "[]", refuse)
        contains_null = spark_type.get("containsNull", True)

        def to_list(value):
            if not isinstance(value, (list, tuple)) or _is_struct_value(value):
                refuse(value)
            return [_nullable(element, x, contains_null, value, refuse) for x in value]

        return to_list
    if kind == "map":
        key = _converter(spark_type["keyType"], column + "{key}", refuse)
        item = _converter(spark_type["valueType"], column + "{}", refuse)
        contains_null = spark_type.get("valueContainsNull", True)

        def to_dict(value):
            if not isinstance(value, dict):
                refuse(value)
            return {
                _nullable(key, k, False, value, refuse): _nullable(item, v, contains_null, value, refuse)
                for k, v in value.items()
            }

        return to_dict
    fields = [
        (f["name"], _converter(f["type"], "%s.%s" % (column, f["name"]), refuse), f.get("nullable", True))
        for f in spark_type["fields"]
    ]

    def to_struct(value):
        if not _is_struct_value(value):
            refuse(value)
        items = dict(_struct_items(value))
        if set(items) - {name for name, _, _ in fields}:
            refuse(value, why=", fields the column does not have")
        return types.SimpleNamespace(
            **{name: _nullable(convert, items.get(name), nullable, value, refuse) for name, convert, nullable in fields}
        )

    return to_struct


def _nullable(convert, value, nullable, whole, refuse):
    if value is None:
        if not nullable:
            refuse(whole)
        return None
    return convert(value)


def resolved_schema(schema, untyped, target_types, inferred, where):
    """`schema` with each untyped field's type: its column's in the target
    (`target_types`: {column: (Spark type, nullable)}, None for a target
    without a schema), else the one `inferred` from the data ({column:
    type or None}). ColumnTypeError naming the column when neither knows."""
    fields = []
    for f in schema["fields"]:
        name = f["name"]
        if name not in untyped:
            fields.append(f)
            continue
        if target_types and name in target_types:
            spark_type, nullable = target_types[name]
        else:
            spark_type, nullable = inferred.get(name), True
            if unknown_part(spark_type):
                raise ColumnTypeError(
                    "%s: field %r has no type Beam knows (it is Any) and the target has no column to take it "
                    "from; its type cannot be inferred from the data: %s. Declare the element type, e.g. a "
                    "NamedTuple with typed fields and .with_output_types(...)"
                    % (
                        where,
                        name,
                        "every value is None" if spark_type is None else "only None or empty values in its parts",
                    )
                )
        fields.append(dict(f, type=spark_type, nullable=nullable))
    return dict(schema, fields=fields)


def converters(schema, untyped, target_types, where, target):
    """{column: converter} for the untyped fields of a resolved `schema`;
    `target` describes the target (for where each type came from)."""
    made = {}
    for f in schema["fields"]:
        name = f["name"]
        if name not in untyped:
            continue
        if target_types and name in target_types:
            source = "its column in %s" % target
        else:
            source = "the type inferred from the data"
        try:
            made[name] = converter(f["type"], name, where, source, f.get("nullable", True))
        except ColumnTypeError as e:
            raise ColumnTypeError("%s: %s (%s)" % (where, e, source)) from None
    return made
