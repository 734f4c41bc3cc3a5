"""Beam's cross-language JDBC transforms (apache_beam.io.jdbc) and Beam SQL
(apache_beam.transforms.sql.SqlTransform), with their API unchanged, on
SparkRunner: expanded by the runner's Java expansion services, run by Beam's
Java SDK harness; JDBC against the real PostgreSQL of the services script."""

import collections
import typing
import urllib.parse
import uuid

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.io.jdbc import ReadFromJdbc, WriteToJdbc
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms.sql import SqlTransform

from beam_spark_runner import SparkRunner
from tests import services

pytestmark = pytest.mark.timeout(600)


class Reading(typing.NamedTuple):
    id: int
    sensor: str
    value: float
    ok: bool
    small: np.int32


class Purchase(typing.NamedTuple):
    item: str
    price: float
    ts: int


beam.coders.registry.register_coder(Reading, beam.coders.RowCoder)
beam.coders.registry.register_coder(Purchase, beam.coders.RowCoder)


def _jdbc():
    url = urllib.parse.urlparse(services.POSTGRESQL)
    return dict(
        driver_class_name="org.postgresql.Driver",
        jdbc_url="jdbc:postgresql://%s:%d%s" % (url.hostname, url.port or 5432, url.path),
        username=url.username or "postgres",
        password=url.password or "",
    )


def _options():
    return PipelineOptions(["--spark_master=local[2,4]"])


@pytest.fixture
def table(postgresql_url):
    import psycopg

    name = "xlang_%s" % uuid.uuid4().hex[:8]
    with psycopg.connect(services.POSTGRESQL, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE %s (id bigint, sensor text, value double precision, ok boolean, small integer)" % name
        )
    yield name
    with psycopg.connect(services.POSTGRESQL, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS %s" % name)


def test_write_to_jdbc_then_read_from_jdbc_round_trips_the_rows(table):
    import psycopg

    rows = [Reading(i, "s%d" % (i % 3), i * 0.25, i % 2 == 0, np.int32(-i)) for i in range(40)]
    with beam.Pipeline(runner=SparkRunner(), options=_options()) as p:
        _ = p | beam.Create(rows).with_output_types(Reading) | WriteToJdbc(table_name=table, **_jdbc())
    with psycopg.connect(services.POSTGRESQL) as conn:
        stored = conn.execute("SELECT id, sensor, value, ok, small FROM %s" % table).fetchall()
    assert sorted(stored) == sorted((r.id, r.sensor, r.value, r.ok, int(r.small)) for r in rows)

    # Beam's JDBC schema maps PostgreSQL's boolean to a Java logical type
    # Python cannot decode: the read casts it.
    with beam.Pipeline(runner=SparkRunner(), options=_options()) as p:
        read = p | ReadFromJdbc(
            table_name=table, query="SELECT id, sensor, value, ok::int AS ok, small FROM %s" % table, **_jdbc()
        )
        assert_that(
            read | beam.Map(lambda r: (r.id, r.sensor, r.value, r.ok, r.small)),
            equal_to([(r.id, r.sensor, r.value, int(r.ok), int(r.small)) for r in rows]),
        )


PURCHASES = [Purchase("item%d" % (i % 4), float(i % 7) + 0.5, i * 7) for i in range(120)]


def _windowed_sums_in_python():
    expected = collections.defaultdict(lambda: [0, 0.0])
    for purchase in PURCHASES:
        key = (purchase.item, purchase.ts // 60 * 60)
        expected[key][0] += 1
        expected[key][1] += purchase.price
    return [(item, start, n, total) for (item, start), (n, total) in expected.items()]


def _with_window(row, window=beam.DoFn.WindowParam):
    return (row.item, int(window.start), row.n, row.total)


_WINDOWED_SUMS = "SELECT item, COUNT(*) AS n, SUM(price) AS total FROM PCOLLECTION GROUP BY item"


def test_sql_windowed_group_by_equals_the_same_aggregation_in_python():
    with beam.Pipeline(runner=SparkRunner(), options=_options()) as p:
        result = (
            p
            | beam.Create(PURCHASES).with_output_types(Purchase)
            | beam.Map(lambda r: beam.window.TimestampedValue(r, r.ts)).with_output_types(Purchase)
            | beam.WindowInto(beam.window.FixedWindows(60))
            | SqlTransform(_WINDOWED_SUMS)
        )
        assert_that(result | beam.Map(_with_window), equal_to(_windowed_sums_in_python()))


def test_sql_windowed_group_by_in_streaming_equals_the_same_aggregation_in_python():
    """The Java stages of a SqlTransform in a streaming pipeline: the
    purchases arrive in three micro-batches as the watermark advances,
    each window's aggregate comes once, when the watermark passes it."""
    stream = TestStream(coder=beam.coders.RowCoder.from_type_hint(Purchase, None))
    for part in (PURCHASES[:40], PURCHASES[40:80], PURCHASES[80:]):
        stream = stream.add_elements([beam.window.TimestampedValue(r, r.ts) for r in part])
        stream = stream.advance_watermark_to(part[-1].ts // 60 * 60)
    stream = stream.advance_watermark_to_infinity()
    options = PipelineOptions(["--spark_master=local[2,4]", "--streaming"])
    with beam.Pipeline(runner=SparkRunner(), options=options) as p:
        result = (
            p
            | stream.with_output_types(Purchase)
            | beam.WindowInto(beam.window.FixedWindows(60))
            | SqlTransform(_WINDOWED_SUMS)
        )
        assert_that(result | beam.Map(_with_window), equal_to(_windowed_sums_in_python()))


def test_sql_refuses_a_dialect_beam_sql_does_not_have():
    p = beam.Pipeline(runner=SparkRunner(), options=_options())
    with pytest.raises(RuntimeError, match="dialect 'zetasql' is not supported"):
        _ = (
            p
            | beam.Create(PURCHASES).with_output_types(Purchase)
            | SqlTransform("SELECT item FROM PCOLLECTION", dialect="zetasql")
        )
