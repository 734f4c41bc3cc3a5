"""Spark's data sources and writers as Beam transforms in batch
(beam_spark_runner.io: ReadFromSpark, WriteToSpark) on SparkRunner: every
mapped type round-trips Spark -> Beam -> Spark through each file format and
a catalog table, results equal the same job in PySpark, event times come
from a column, and bad input is refused when the pipeline is built."""

import datetime
import decimal
import os
import typing

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms import trigger, window
from pyspark.sql import Row, SparkSession
from pyspark.sql import types as T

from beam_spark_runner import SparkRunner
from beam_spark_runner.errors import UnsupportedPipelineError
from beam_spark_runner.io import ReadFromSpark, WriteToSpark

UTC = datetime.timezone.utc


class KeyTotal(typing.NamedTuple):
    key: str
    total: int


INNER = T.StructType([T.StructField("x", T.LongType(), False), T.StructField("when", T.TimestampType(), True)])
ALL_TYPES = T.StructType(
    [
        T.StructField("flag", T.BooleanType()),
        T.StructField("b", T.ByteType()),
        T.StructField("s", T.ShortType()),
        T.StructField("i", T.IntegerType(), False),
        T.StructField("l", T.LongType()),
        T.StructField("f", T.FloatType()),
        T.StructField("d", T.DoubleType()),
        T.StructField("text", T.StringType()),
        T.StructField("raw", T.BinaryType()),
        T.StructField("day", T.DateType()),
        T.StructField("ts", T.TimestampType()),
        T.StructField("money", T.DecimalType(10, 2)),
        T.StructField("tags", T.ArrayType(T.StringType())),
        T.StructField("scores", T.MapType(T.StringType(), T.LongType())),
        T.StructField("inner", INNER),
    ]
)
WHEN = datetime.datetime(2026, 11, 27, 8, 30, 0, 123456, tzinfo=UTC)


def _all_type_rows():
    return [
        Row(
            flag=i % 2 == 0,
            b=-i,
            s=300 + i,
            i=i,
            l=2**40 + i,
            f=1.5 * i,
            d=0.25 * i,
            text="héllo %d" % i,
            raw=bytes([i, 0, 255]),
            day=datetime.date(2026, 1, 1) + datetime.timedelta(days=i),
            ts=WHEN + datetime.timedelta(seconds=i),
            money=decimal.Decimal("%d.25" % i),
            tags=["a%d" % i, None] if i else [],
            scores={"k": i, "n": None} if i % 3 else None,
            inner=Row(x=i, when=None if i % 2 else WHEN),
        )
        if i != 4
        else Row(**{f.name: (4 if f.name == "i" else None) for f in ALL_TYPES.fields})  # nulls everywhere allowed
        for i in range(6)
    ]


def _spark():
    return SparkSession.getActiveSession()


def _run(build, *args):
    p = beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(list(args)))
    build(p)
    p.run().wait_until_finish()


def _rows(frame):
    return sorted((r.asDict(recursive=True) for r in frame.collect()), key=lambda r: r["i"])


@pytest.mark.parametrize("fmt", ["parquet", "orc", "json"])
def test_every_mapped_type_round_trips_through_beam(tmp_path, fmt):
    spark = _spark()
    source, out = str(tmp_path / "source"), str(tmp_path / "out")
    spark.createDataFrame(_all_type_rows(), ALL_TYPES).write.format(fmt).save(source)
    # JSON carries no types: the read is told the schema (other formats read their own).
    schema = ALL_TYPES if fmt == "json" else None
    _run(lambda p: p | ReadFromSpark(format=fmt, path=source, schema=schema) | WriteToSpark(format=fmt, path=out))
    written = spark.read.format(fmt).schema(ALL_TYPES).load(out) if fmt == "json" else spark.read.format(fmt).load(out)
    expected = (
        spark.read.format(fmt).schema(ALL_TYPES).load(source) if fmt == "json" else spark.read.format(fmt).load(source)
    )
    assert written.schema == expected.schema
    assert _rows(written) == _rows(expected)


def test_csv_round_trips_its_columns(tmp_path):
    spark = _spark()
    schema = T.StructType(
        [
            T.StructField("i", T.IntegerType()),
            T.StructField("name", T.StringType()),
            T.StructField("when", T.TimestampType()),
        ]
    )
    # CSV keeps timestamps to the millisecond (Spark's default timestampFormat).
    start = WHEN.replace(microsecond=123000)
    rows = [Row(i=i, name="n%d" % i, when=start + datetime.timedelta(minutes=i)) for i in range(20)]
    source, out = str(tmp_path / "source"), str(tmp_path / "out")
    spark.createDataFrame(rows, schema).write.option("header", "true").csv(source)
    options = {"header": "true"}
    _run(
        lambda p: (
            p
            | ReadFromSpark(format="csv", path=source, options=options, schema="i int, name string, when timestamp")
            | WriteToSpark(format="csv", path=out, options=options)
        )
    )
    back = spark.read.options(**options).schema(schema).csv(out)
    assert _rows(back) == _rows(spark.createDataFrame(rows, schema))


def test_a_table_written_by_name_reads_back_by_name():
    spark = _spark()
    rows = _all_type_rows()
    spark.sql("DROP TABLE IF EXISTS beam_spark_io_t")
    spark.sql("DROP TABLE IF EXISTS beam_spark_io_copy")
    spark.createDataFrame(rows, ALL_TYPES).write.saveAsTable("beam_spark_io_t")
    try:
        _run(lambda p: p | ReadFromSpark(table="beam_spark_io_t") | WriteToSpark(table="beam_spark_io_copy"))
        assert _rows(spark.table("beam_spark_io_copy")) == _rows(spark.table("beam_spark_io_t"))
        assert spark.table("beam_spark_io_copy").schema == spark.table("beam_spark_io_t").schema
    finally:
        spark.sql("DROP TABLE IF EXISTS beam_spark_io_t")
        spark.sql("DROP TABLE IF EXISTS beam_spark_io_copy")


def test_a_count_per_key_equals_the_same_job_in_pyspark(tmp_path):
    spark = _spark()
    source, out = str(tmp_path / "events"), str(tmp_path / "counts")
    events = [Row(key="k%d" % (i % 7), value=i) for i in range(5000)]
    spark.createDataFrame(events).write.parquet(source)

    def build(p):
        (
            p
            | ReadFromSpark(format="parquet", path=source)
            | beam.Map(lambda row: (row.key, row.value))
            | beam.CombinePerKey(sum)
            | beam.MapTuple(lambda key, total: KeyTotal(key, total)).with_output_types(KeyTotal)
            | WriteToSpark(format="parquet", path=out)
        )

    _run(build)
    beam_counts = {r.key: r.total for r in spark.read.parquet(out).collect()}
    native = {
        r.key: r.total for r in spark.read.parquet(source).groupBy("key").sum("value").toDF("key", "total").collect()
    }
    assert beam_counts == native


def test_event_times_come_from_the_timestamp_column(tmp_path):
    spark = _spark()
    source = str(tmp_path / "events")
    start = datetime.datetime(2026, 1, 1, tzinfo=UTC)
    events = [Row(user="u%d" % (i % 2), at=start + datetime.timedelta(seconds=7 * i)) for i in range(10)]
    spark.createDataFrame(events).write.parquet(source)

    def build(p):
        counts = (
            p
            | ReadFromSpark(format="parquet", path=source, timestamp_column="at")
            | beam.Map(lambda row: row.user)
            | beam.WindowInto(window.FixedWindows(30))
            | beam.combiners.Count.PerElement()
            | beam.WithKeys(lambda kv: 0)
            | beam.GroupByKey()
            | beam.MapTuple(lambda _, kvs: sorted(kvs))
        )
        # 0, 7, 14, 21, 28 s in the first window; 35 .. 63 s in the next two.
        assert_that(counts, equal_to([[("u0", 3), ("u1", 2)], [("u0", 2), ("u1", 2)], [("u1", 1)]]))

    _run(build)


def test_event_times_come_from_a_numeric_column_in_seconds_or_milliseconds(tmp_path):
    spark = _spark()
    source = str(tmp_path / "events")
    start_s = int(datetime.datetime(2026, 1, 1, tzinfo=UTC).timestamp())
    # Seconds as a long and as a double (with a fraction), milliseconds as a long; one null.
    events = [
        Row(i=i, s=start_s + 7 * i, f=start_s + 7 * i + 0.25, ms=(start_s + 7 * i) * 1000 + 5) for i in range(10)
    ] + [Row(i=10, s=None, f=None, ms=None)]
    spark.createDataFrame(events, "i long, s long, f double, ms long").write.parquet(source)
    base_us = start_s * 1_000_000
    expected = {
        ("s", "s"): [(i, base_us + 7 * i * 1_000_000) for i in range(10)],
        ("f", "s"): [(i, base_us + 7 * i * 1_000_000 + 250_000) for i in range(10)],
        ("ms", "ms"): [(i, base_us + 7 * i * 1_000_000 + 5_000) for i in range(10)],
    }

    def build(p):
        for (column, unit), times in expected.items():
            stamps = (
                p
                | "read %s" % column
                >> ReadFromSpark(format="parquet", path=source, timestamp_column=column, timestamp_unit=unit)
                | "times %s" % column >> beam.Map(lambda row, ts=beam.DoFn.TimestampParam: (row.i, ts.micros))
            )
            # A null event time is the minimum timestamp.
            minimum = (10, beam.utils.timestamp.MIN_TIMESTAMP.micros)
            assert_that(stamps, equal_to(times + [minimum]), label="event times of %s" % column)

    _run(build)


def _refused_at_submission(build, match):
    """The pipeline `build` makes is refused when it is run, with a message
    matching `match` (before it runs: the tests check nothing was written)."""
    p = beam.Pipeline(runner=SparkRunner())
    build(p)
    with pytest.raises(UnsupportedPipelineError, match=match):
        p.run()


def test_a_numeric_timestamp_column_needs_a_known_unit(tmp_path):
    spark = _spark()
    source = str(tmp_path / "events")
    spark.createDataFrame([Row(i=1, at=1_767_225_600, ts=WHEN)]).write.parquet(source)
    _refused_at_submission(
        lambda p: p | ReadFromSpark(format="parquet", path=source, timestamp_column="at"),
        r"timestamp_column 'at' is numeric \(long\): give timestamp_unit",
    )
    with pytest.raises(ValueError, match=r"timestamp_unit must be one of 's', 'ms', 'us'.*column 'at'.*got 'h'"):
        ReadFromSpark(format="parquet", path=source, timestamp_column="at", timestamp_unit="h")
    with pytest.raises(ValueError, match=r"timestamp_unit='s' says what a numeric timestamp_column counts; no "):
        ReadFromSpark(format="parquet", path=source, timestamp_unit="s")
    _refused_at_submission(
        lambda p: p | ReadFromSpark(format="parquet", path=source, timestamp_column="ts", timestamp_unit="ms"),
        r"timestamp_unit='ms' is for a numeric timestamp_column; 'ts'",
    )
    # A given schema is checked when the pipeline is built.
    with pytest.raises(UnsupportedPipelineError, match=r"timestamp_unit='ms' is for a numeric timestamp_column; 'ts'"):
        beam.Pipeline() | ReadFromSpark(
            format="parquet", path=source, schema="i long, ts timestamp", timestamp_column="ts", timestamp_unit="ms"
        )


def test_a_source_spark_cannot_read_is_refused_when_the_pipeline_is_submitted(tmp_path):
    spark = _spark()
    _refused_at_submission(
        lambda p: p | ReadFromSpark(format="parquet", path=str(tmp_path / "nowhere")),
        r"ReadFromSpark\(format='parquet', path=.*nowhere.*\): Spark cannot read it",
    )
    _refused_at_submission(
        lambda p: p | ReadFromSpark(format="nosuchformat", path=str(tmp_path)),
        r"ReadFromSpark\(format='nosuchformat'.*Spark cannot read it",
    )
    _refused_at_submission(
        lambda p: p | ReadFromSpark(format="rate"), r"ReadFromSpark\(format='rate'.*Spark cannot read it in batch"
    )
    ntz = str(tmp_path / "ntz")
    spark.sql("SELECT 1 AS id, TIMESTAMP_NTZ '2026-01-01 00:00:00' AS local").write.parquet(ntz)
    out = str(tmp_path / "copy")
    _refused_at_submission(
        lambda p: p | ReadFromSpark(format="parquet", path=ntz) | WriteToSpark(path=out),
        r"column 'local': Spark type timestamp_ntz has no Beam",
    )
    by_day = str(tmp_path / "by_day")
    spark.createDataFrame([(1, 2)], "id int, day int").write.partitionBy("day").parquet(by_day)
    _refused_at_submission(
        lambda p: p | ReadFromSpark(format="parquet", path=by_day) | WriteToSpark(path=out, partition_by=["month"]),
        r"WriteToSpark\(.*partition_by names columns it does not have: \['month'\]",
    )
    # A given schema Spark does not read the source with: a directory's
    # partition columns come after the files' columns.
    _refused_at_submission(
        lambda p: p | ReadFromSpark(format="parquet", path=by_day, schema="id int"),
        r"Spark reads it with the schema struct<id:int,day:int>, not the one given \(struct<id:int>\)",
    )
    assert not os.path.exists(out)


def test_bad_input_is_refused_when_the_pipeline_is_built(tmp_path):
    spark = _spark()
    p = beam.Pipeline(runner=SparkRunner())
    with pytest.raises(UnsupportedPipelineError, match=r"WriteToSpark\(format='parquet'.*have no schema"):
        p | "ints" >> beam.Create([1, 2]) | "no schema" >> WriteToSpark(format="parquet", path=str(tmp_path / "o"))
    retracting = (
        p
        | "rows" >> beam.Create([beam.Row(k="a", n=1)])
        | beam.WindowInto(window.FixedWindows(10), trigger=trigger.AfterCount(1), accumulation_mode=3)
    )
    with pytest.raises(UnsupportedPipelineError, match=r"WriteToSpark\(.*RETRACTING panes"):
        retracting | "retracted" >> WriteToSpark(format="parquet", path=str(tmp_path / "r"))
    ntz = str(tmp_path / "ntz")
    with pytest.raises(
        UnsupportedPipelineError, match=r"timestamp_column 'ntz' must be a column of Spark type timestamp, or numeric"
    ):
        p | "bad ts" >> ReadFromSpark(format="parquet", path=ntz, schema="ntz string", timestamp_column="ntz")
    with pytest.raises(UnsupportedPipelineError, match=r"column 'local': Spark type timestamp_ntz has no Beam"):
        p | "ntz" >> ReadFromSpark(format="parquet", path=ntz, schema="local timestamp_ntz")
    with pytest.raises(UnsupportedPipelineError, match=r"schema 'id int,' is not a Spark schema: the text ends"):
        p | "bad ddl" >> ReadFromSpark(format="parquet", path=ntz, schema="id int,")
    from beam_spark_runner.io import WriteToDatabase

    with pytest.raises(
        UnsupportedPipelineError,
        match=r"WriteToDatabase\(totals at .*\): its input is ReadFromSpark\(format='parquet', path=.*ntz'\)'s rows, "
        r"whose schema Spark reads when the runner plans.*give ReadFromSpark\(.*\) a schema=",
    ):
        p | "unknown" >> ReadFromSpark(format="parquet", path=ntz) | WriteToDatabase("postgresql://db/x", "totals")
    with pytest.raises(
        UnsupportedPipelineError, match=r"have no schema.*rows read by a ReadFromSpark without schema= are typed only"
    ):
        p | "later" >> ReadFromSpark(format="parquet", path=ntz) | beam.Reshuffle() | WriteToSpark(path=ntz + "2")
    assert not os.path.exists(tmp_path / "o")
    assert not os.path.exists(ntz)  # the pipeline was never run: nothing read


def test_a_source_read_by_two_transforms_feeds_both(tmp_path):
    spark = _spark()
    source = str(tmp_path / "events")
    start = datetime.datetime(2026, 1, 1, tzinfo=UTC)
    schema = T.StructType(
        [
            T.StructField("key", T.StringType()),
            T.StructField("value", T.LongType()),
            T.StructField("at", T.TimestampType()),
        ]
    )
    events = [
        Row(key="k%d" % (i % 3), value=i, at=None if i == 5 else start + datetime.timedelta(seconds=i))
        for i in range(10_000)
    ]
    spark.createDataFrame(events, schema).write.parquet(source)

    def build(p):
        rows = p | ReadFromSpark(format="parquet", path=source, timestamp_column="at")
        totals = rows | "key and value" >> beam.Map(lambda row: (row.key, row.value)) | beam.CombinePerKey(sum)
        stamps = rows | "event times" >> beam.Map(
            lambda row, ts=beam.DoFn.TimestampParam: (row.value, row.at is None, ts.micros)
        )
        assert_that(
            totals,
            equal_to([("k%d" % k, sum(range(k, 10_000, 3))) for k in range(3)]),
            label="totals",
        )
        min_micros = beam.utils.timestamp.MIN_TIMESTAMP.micros
        assert_that(
            stamps,
            equal_to(
                [(i, i == 5, min_micros if i == 5 else int((start.timestamp() + i) * 1_000_000)) for i in range(10_000)]
            ),
            label="event times",
        )

    _run(build)


_BUILD_WITHOUT_SPARK = """
import apache_beam as beam
from pyspark import SparkContext
from beam_spark_runner import SparkRunner
from beam_spark_runner.io import ReadFromSpark, WriteToSpark

p = beam.Pipeline(runner=SparkRunner())
rows = p | "found" >> ReadFromSpark(format="parquet", path="/nowhere/yet")
rows | "copy" >> WriteToSpark(format="orc", path="/nowhere/copy")
given = p | "given" >> ReadFromSpark(format="csv", path="/nowhere/csv", schema="id bigint not null, name string")
assert given.element_type._fields == ("id", "name"), given.element_type
p.to_runner_api()
assert SparkContext._gateway is None and SparkContext._active_spark_context is None, "a JVM was started"
print("built without Spark")
"""


def test_building_a_pipeline_starts_no_spark():
    """ReadFromSpark and WriteToSpark expand without a SparkSession: a
    schema the user gives is parsed in Python, any other is read when the
    runner plans."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _BUILD_WITHOUT_SPARK], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "built without Spark" in done.stdout, done.stderr[-3000:]
