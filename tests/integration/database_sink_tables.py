"""What the database sink's protocol tests share: a row type, a sink of a
table of its own, and the table's and staging table's contents."""

import typing

from beam_spark_runner.io.database.sink_protocol import DatabaseWriteConfig, staging_table
from beam_spark_runner.io.database.sql_dialects import dialect_of
from beam_spark_runner.worker import spark_rows
from tests.services import execute, unique_table


class Total(typing.NamedTuple):
    user: str
    start: int
    total: int


def sink_config(url, keys=()):
    """A sink of its own table; the tests use the table's name as the sink's
    id (commit markers are per sink and epoch)."""
    return DatabaseWriteConfig(url, unique_table(), tuple(keys), spark_rows.spark_schema_of(Total), "test sink")


def table_rows(config):
    q = dialect_of(config.url).quote
    return sorted(tuple(r) for r in execute(config.url, "SELECT * FROM %s" % q(config.table)))


def staged_count(config):
    """Rows in the staging table beside the sink's table."""
    q = dialect_of(config.url).quote
    return execute(config.url, "SELECT COUNT(*) FROM %s" % q(staging_table(config.table)))[0][0]
