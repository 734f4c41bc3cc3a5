"""Parallel reads of a query's result (`beam_spark_runner.io.ReadFromDatabase`),
split on a numeric column the way Spark's JDBC reader splits:
`num_partitions` ranges of equal width between `lower_bound` and
`upper_bound`, the first also taking everything below (and NULLs), the last
everything above, so every row is read once whatever the bounds. Each
split is one query in its own transaction. No Spark here.
"""

import dataclasses
from typing import Optional, Tuple

from beam_spark_runner.io.database.sql_dialects import DatabaseError, UnmappableColumn, dialect_of
from beam_spark_runner.worker import spark_rows


@dataclasses.dataclass(frozen=True)
class ReadSplit:
    """One split: `where` (with `%s` placeholders for `params`) on the
    query's result, or None for the whole result."""

    index: int
    where: Optional[str]
    params: Tuple = ()


def result_schema(url, query, label):
    """The Spark StructType (JSON form) of `query`'s result. Raises
    DatabaseError naming the server, or naming the column no row type can
    hold."""
    dialect = dialect_of(url)
    with dialect.connect() as conn:
        try:
            columns = dialect.result_columns(conn.cursor(), query)
        except UnmappableColumn as e:
            raise DatabaseError("%s: %s" % (label, e)) from None
        except Exception as e:  # noqa: BLE001 -- each client raises its own classes
            raise DatabaseError(
                "%s: %s cannot describe the query: %s" % (label, dialect.url.redacted(), str(e).strip().splitlines()[0])
            ) from None
    return {
        "type": "struct",
        "fields": [{"name": name, "type": spark, "nullable": True, "metadata": {}} for name, spark in columns],
    }


def bounds(url, query, column):
    """(min, max) of `column` in the query's result."""
    dialect = dialect_of(url)
    with dialect.connect() as conn:
        cursor = conn.cursor()
        q = dialect.quote(column)
        cursor.execute("SELECT MIN(%s), MAX(%s) FROM (%s) AS q" % (q, q, query))
        return cursor.fetchone()


def splits(dialect_quote, column, lower, upper, count):
    """Spark's JDBC partitioning of [lower, upper] into `count` splits."""
    if column is None or count is None or count <= 1 or lower is None or upper is None or upper <= lower:
        return [ReadSplit(0, None)]
    q = dialect_quote(column)
    stride = (upper - lower) / count
    if isinstance(lower, int) and isinstance(upper, int):
        stride = max(1, (upper - lower) // count)
    edges = [lower + stride * i for i in range(1, count)]
    edges = sorted(set(e for e in edges if lower < e <= upper))
    result = [ReadSplit(0, "%s < %%s OR %s IS NULL" % (q, q), (edges[0],))]
    for i in range(1, len(edges)):
        result.append(ReadSplit(i, "%s >= %%s AND %s < %%s" % (q, q), (edges[i - 1], edges[i])))
    result.append(ReadSplit(len(edges), "%s >= %%s" % q, (edges[-1],)))
    return result


def read_split(url, query, schema, split: ReadSplit):
    """The rows (of `spark_rows.row_type(schema)`) of one split."""
    dialect = dialect_of(url)
    row_type = spark_rows.row_type(schema)
    converters = [dialect.from_db(f["type"]) for f in schema["fields"]]
    sql = "SELECT * FROM (%s) AS q" % query
    if split.where:
        sql += " WHERE " + split.where
    with dialect.connect() as conn:
        cursor = dialect.result_cursor(conn)
        cursor.execute(sql, split.params or None)
        while True:
            fetched = cursor.fetchmany(10000)
            if not fetched:
                break
            for values in fetched:
                yield row_type(*(convert(v) if convert else v for convert, v in zip(converters, values)))


def read_split_of(split: ReadSplit, url, query, schema):
    """`read_split` with the split first (a FlatMap's element)."""
    return read_split(url, query, schema, split)
