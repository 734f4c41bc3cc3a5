"""Rows whose fields Beam types Any (`beam.Row(k=kv[0], total=kv[1])` after a
CombinePerKey) written by WriteToSpark and WriteToDatabase, batch and
streaming: into an existing Parquet directory or PostgreSQL table they take
its column types, into a new directory the data's; a value the column
cannot hold, or values of two types, fail the run naming the column."""

import json
import os
import time

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import window
from pyspark.sql import Row
from pyspark.sql import types as T

from beam_spark_runner import SparkRunner
from beam_spark_runner.io.database.sql_dialects import dialect_of
from beam_spark_runner.io import ReadFromSpark, WriteToDatabase, WriteToSpark
from beam_spark_runner.result import PipelineState
from tests.services import drop_table, execute, unique_table

# (key, amount) pairs; the totals per key are KEY_TOTALS.
PAIRS = [("k%d" % (i % 5), i) for i in range(100)]
KEY_TOTALS = sorted(("k%d" % k, sum(range(k, 100, 5))) for k in range(5))
KT_SCHEMA = T.StructType([T.StructField("k", T.StringType()), T.StructField("total", T.IntegerType())])


def _batch():
    return beam.Pipeline(runner=SparkRunner(), options=PipelineOptions([]))


def _streaming(checkpoint_dir):
    return beam.Pipeline(
        runner=SparkRunner(), options=PipelineOptions(["--streaming", "--checkpoint_dir=%s" % checkpoint_dir])
    )


def _totals_as_rows(pcoll):
    """The natural pipeline: sums per key, each a beam.Row built in a lambda
    (Beam types its fields Any)."""
    return pcoll | "Sum" >> beam.CombinePerKey(sum) | "AsRows" >> beam.Map(lambda kv: beam.Row(k=kv[0], total=kv[1]))


SOURCE_SCHEMA = "k string, amount long, at long"
BASE_S = 1_767_225_600  # 2026-01-01T00:00:00Z, in seconds
TIMEOUT_S = 180
# (key, amount) pairs per ten-second window, one file (one micro-batch) each.
WINDOWS = [[("a", 1), ("b", 2), ("a", 3)], [("b", 4), ("c", 5)], [("a", 6), ("c", 7)]]


def _window_totals(windows):
    """(key, total) of each window."""
    totals = []
    for pairs in windows:
        per_key = {}
        for key, amount in pairs:
            per_key[key] = per_key.get(key, 0) + amount
        totals.extend(per_key.items())
    return sorted(totals)


def _write_json(directory, name, records):
    """One file of JSON lines, appearing at once (renamed into place)."""
    tmp = os.path.join(os.path.dirname(directory), "." + name)
    with open(tmp, "w") as f:
        for record in records:
            f.write(json.dumps(record) + "\n")
    os.rename(tmp, os.path.join(directory, name))


def _stream(tmp_path, build, published, windows=WINDOWS, unit="s"):
    """Runs a streaming pipeline reading `windows` from JSON files, event
    times (`at`) in seconds or milliseconds: `build(rows)` adds the rest.
    File i holds window i's events and closes window i-1, whose rows
    `published()` (a count) must show before file i+1 is written, so each
    window is written by its own micro-batch; then drains. Returns the
    result (failed or drained)."""
    source = tmp_path / "in"
    source.mkdir()
    p = _streaming(tmp_path / "checkpoint")
    rows = p | ReadFromSpark(
        format="json", path=str(source), schema=SOURCE_SCHEMA, timestamp_column="at", timestamp_unit=unit
    )
    build(rows | "Pairs" >> beam.Map(lambda r: (r.k, r.amount)) | "Window" >> beam.WindowInto(window.FixedWindows(10)))
    result = p.run()
    scale = 1000 if unit == "ms" else 1
    try:
        for i, pairs in enumerate(windows):
            events = [{"k": k, "amount": a, "at": (BASE_S + 10 * i + j) * scale} for j, (k, a) in enumerate(pairs)]
            _write_json(str(source), "w%d.json" % i, events)
            count = len(_window_totals(windows[:i]))
            deadline = time.time() + TIMEOUT_S
            while published() < count and result.state not in (PipelineState.FAILED, PipelineState.DONE):
                assert time.time() < deadline, "window %d was not published" % (i - 1)
                time.sleep(0.5)
            if result.state == PipelineState.FAILED:
                return result
        result.drain()
        result.wait_until_finish(TIMEOUT_S * 1000)
    finally:
        if result.state not in (PipelineState.DRAINED, PipelineState.DONE, PipelineState.FAILED):
            result.cancel()
    return result


def _parquet_count(spark, path):
    if not os.path.exists(path) or not any(n.startswith("part-") for n in os.listdir(path)):
        return 0
    return spark.read.parquet(str(path)).count()


def _parquet(spark, path):
    frame = spark.read.parquet(str(path))
    return frame.schema, sorted(tuple(r) for r in frame.collect())


# --- WriteToSpark, batch ---------------------------------------------------------------


def test_rows_typed_any_take_the_column_types_of_an_existing_parquet_directory(tmp_path, spark_session):
    out = str(tmp_path / "totals")
    spark_session.createDataFrame([Row(k="old", total=7)], KT_SCHEMA).write.parquet(out)
    with _batch() as p:
        _ = _totals_as_rows(p | beam.Create(PAIRS)) | WriteToSpark(format="parquet", path=out)
    schema, rows = _parquet(spark_session, out)
    assert schema == KT_SCHEMA  # total stays an int column: each Python int converted to it
    assert rows == sorted(KEY_TOTALS + [("old", 7)])


def test_rows_typed_any_into_a_new_directory_take_the_types_of_the_data(tmp_path, spark_session):
    out = str(tmp_path / "totals")
    with _batch() as p:
        _ = (
            _totals_as_rows(p | beam.Create(PAIRS))
            # share is None in one row: the others give its type.
            | beam.Map(lambda r: beam.Row(k=r.k, total=r.total, share=r.total / 4950 if r.k != "k0" else None))
            | WriteToSpark(format="parquet", path=out)
        )
    schema, rows = _parquet(spark_session, out)
    assert [(f.name, f.dataType) for f in schema.fields] == [
        ("k", T.StringType()),
        ("total", T.LongType()),
        ("share", T.DoubleType()),
    ]
    assert rows == sorted((k, t, t / 4950 if k != "k0" else None) for k, t in KEY_TOTALS)


def test_a_list_of_values_beam_types_any_into_a_new_directory_takes_the_type_of_the_data(tmp_path, spark_session):
    """`list(...)` of an untyped value is List[Any] to Beam: the column is
    an array of what the data holds."""
    out = str(tmp_path / "amounts")
    with _batch() as p:
        _ = (
            p
            | beam.Create([("k%d" % (i % 3), {"amount": i}) for i in range(9)])
            | beam.GroupByKey()
            | beam.Map(lambda kv: beam.Row(k=kv[0], amounts=list(v["amount"] for v in kv[1])))
            | WriteToSpark(format="parquet", path=out)
        )
    schema, rows = _parquet(spark_session, out)
    assert [(f.name, f.dataType) for f in schema.fields] == [
        ("k", T.StringType()),
        ("amounts", T.ArrayType(T.LongType())),
    ]
    assert [(k, sorted(amounts)) for k, amounts in rows] == [("k%d" % k, list(range(k, 9, 3))) for k in range(3)]


def test_a_value_the_existing_column_cannot_hold_fails_naming_the_column_the_value_and_the_target(
    tmp_path, spark_session
):
    out = str(tmp_path / "totals")
    spark_session.createDataFrame([Row(k="old", total=7)], KT_SCHEMA).write.parquet(out)
    p = _batch()
    _ = (
        p
        | beam.Create([("big", 2**31), ("small", 1)])
        | beam.CombinePerKey(sum)
        | beam.Map(lambda kv: beam.Row(k=kv[0], total=kv[1]))
        | WriteToSpark(format="parquet", path=out)
    )
    with pytest.raises(
        Exception,
        match=r"WriteToSpark\(format='parquet', path='%s'\): column 'total' cannot hold "
        r"2147483648 \(int\): its column in parquet at %s is int" % (out, out),
    ):
        p.run().wait_until_finish()
    assert _parquet(spark_session, out)[1] == [("old", 7)]  # nothing written


def test_values_of_two_types_in_a_new_directory_fail_naming_the_column_and_both_types(tmp_path):
    out = str(tmp_path / "totals")
    p = _batch()
    _ = (
        p
        | beam.Create([("a", 1), ("b", 2.5)])
        | beam.CombinePerKey(sum)
        | beam.Map(lambda kv: beam.Row(k=kv[0], total=kv[1]))
        | WriteToSpark(format="parquet", path=out)
    )
    with pytest.raises(
        Exception, match=r"WriteToSpark\(.*\): column 'total' has values of two types: bigint and double"
    ):
        p.run().wait_until_finish()
    assert not os.path.exists(out)


def test_a_field_that_is_none_in_every_row_of_a_new_directory_is_refused(tmp_path):
    out = str(tmp_path / "totals")
    p = _batch()
    _ = (
        p
        | beam.Create([("a", 1)])
        | beam.Map(lambda kv: beam.Row(k=kv[0], total=None))
        | WriteToSpark(format="parquet", path=out)
    )
    with pytest.raises(Exception, match=r"field 'total' has no type Beam knows \(it is Any\).*every value is None"):
        p.run().wait_until_finish()
    assert not os.path.exists(out)


# --- WriteToSpark, streaming -----------------------------------------------------------


def test_streamed_rows_typed_any_take_the_column_types_of_an_existing_parquet_directory(tmp_path, spark_session):
    out = str(tmp_path / "totals")
    spark_session.createDataFrame([Row(k="old", total=7)], KT_SCHEMA).write.parquet(out)
    result = _stream(
        tmp_path,
        lambda pairs: _totals_as_rows(pairs) | WriteToSpark(format="parquet", path=out),
        lambda: _parquet_count(spark_session, out) - 1,
    )
    assert result.state == PipelineState.DRAINED
    schema, rows = _parquet(spark_session, out)
    assert schema == KT_SCHEMA
    assert rows == sorted(_window_totals(WINDOWS) + [("old", 7)])


@pytest.mark.parametrize("unit", ["s", "ms"])
def test_streamed_rows_typed_any_into_a_new_directory_take_the_types_of_the_data(tmp_path, spark_session, unit):
    """Also event times from a numeric column, in seconds or milliseconds:
    the windows are the events' own."""
    out = str(tmp_path / "totals")
    result = _stream(
        tmp_path,
        lambda pairs: (
            _totals_as_rows(pairs) | beam.ParDo(_WithWindowStart()) | WriteToSpark(format="parquet", path=out)
        ),
        lambda: _parquet_count(spark_session, out),
        unit=unit,
    )
    assert result.state == PipelineState.DRAINED
    schema, rows = _parquet(spark_session, out)
    assert [(f.name, f.dataType) for f in schema.fields] == [
        ("k", T.StringType()),
        ("total", T.LongType()),
        ("window_start", T.LongType()),
    ]
    assert rows == sorted(
        (k, t, BASE_S + 10 * i) for i, pairs in enumerate(WINDOWS) for k, t in _window_totals([pairs])
    )


class _WithWindowStart(beam.DoFn):
    """A row and the start of its window (seconds), as a beam.Row typed Any."""

    def process(self, row, w=beam.DoFn.WindowParam):
        yield beam.Row(k=row.k, total=row.total, window_start=int(w.start))


def _b_as_text(kv):
    return beam.Row(k=kv[0], total=kv[1] if kv[0] != "b" else str(kv[1]))


def test_a_micro_batch_whose_values_disagree_with_earlier_ones_fails_naming_both_types(tmp_path, spark_session):
    """Window 0 (a: long) is published by one micro-batch; the next one's
    b total is text: the run fails naming the column and both types."""
    out = str(tmp_path / "totals")
    windows = [[("a", 1)], [("b", 2)], [("c", 3)]]
    result = _stream(
        tmp_path,
        lambda pairs: pairs | beam.CombinePerKey(sum) | beam.Map(_b_as_text) | WriteToSpark(format="parquet", path=out),
        lambda: _parquet_count(spark_session, out),
        windows=windows,
    )
    assert result.state == PipelineState.FAILED
    with pytest.raises(
        Exception,
        match=r"WriteToSpark\(format='parquet', path='%s'\): column 'total': micro-batch \d+ has values of type "
        r"string; this run's earlier micro-batches wrote it as bigint" % out,
    ):
        result.wait_until_finish()
    assert _parquet(spark_session, out)[1] == [("a", 1)]


# --- WriteToDatabase -------------------------------------------------------------------


def _pg_totals_table(url):
    table = unique_table()
    execute(url, 'CREATE TABLE "%s" (k VARCHAR(10), total INTEGER)' % table)
    return table


def _table_rows(url, table):
    return sorted(tuple(r) for r in execute(url, "SELECT k, total FROM %s" % dialect_of(url).quote(table)))


def test_rows_typed_any_take_the_column_types_of_an_existing_postgresql_table(postgresql_url):
    table = _pg_totals_table(postgresql_url)
    try:
        with _batch() as p:
            _ = _totals_as_rows(p | beam.Create(PAIRS)) | WriteToDatabase(postgresql_url, table)
        assert _table_rows(postgresql_url, table) == KEY_TOTALS
    finally:
        drop_table(postgresql_url, table)


def test_streamed_rows_typed_any_take_the_column_types_of_an_existing_postgresql_table(
    postgresql_url, tmp_path, spark_session
):
    """The same rows into the table and into a new Parquet directory (a
    query with database and file sinks stages the table's rows with a
    Spark job)."""
    table = _pg_totals_table(postgresql_url)
    out = str(tmp_path / "totals")
    try:

        def build(pairs):
            rows = _totals_as_rows(pairs)
            _ = rows | WriteToDatabase(postgresql_url, table)
            _ = rows | WriteToSpark(format="parquet", path=out)

        result = _stream(tmp_path, build, lambda: len(_table_rows(postgresql_url, table)))
        assert result.state == PipelineState.DRAINED
        assert _table_rows(postgresql_url, table) == _window_totals(WINDOWS)
        assert _parquet(spark_session, out)[1] == _window_totals(WINDOWS)
    finally:
        drop_table(postgresql_url, table)


def test_a_value_the_table_cannot_hold_fails_naming_the_column_the_value_and_the_table(postgresql_url, tmp_path):
    table = _pg_totals_table(postgresql_url)
    where = r"WriteToDatabase\(%s at postgresql://.*\): column 'total' cannot hold " % table
    try:
        p = _batch()
        _ = (
            p
            | beam.Create([("big", 2**31), ("small", 1)])
            | beam.CombinePerKey(sum)
            | beam.Map(lambda kv: beam.Row(k=kv[0], total=kv[1]))
            | WriteToDatabase(postgresql_url, table)
        )
        with pytest.raises(Exception, match=where + r"2147483648 \(int\): its column in table %s at .* is int" % table):
            p.run().wait_until_finish()
        assert _table_rows(postgresql_url, table) == []  # nothing written
        result = _stream(
            tmp_path,
            lambda pairs: (
                pairs | beam.CombinePerKey(sum) | beam.Map(_b_as_text) | WriteToDatabase(postgresql_url, table)
            ),
            lambda: len(_table_rows(postgresql_url, table)),
            windows=[[("a", 1)], [("b", 2)], [("c", 3)]],
        )
        assert result.state == PipelineState.FAILED
        with pytest.raises(Exception, match=where + r"'2' \(str\): its column in table %s at .* is int" % table):
            result.wait_until_finish()
        # The micro-batch before the bad one is in the table, and nothing of the bad one.
        assert _table_rows(postgresql_url, table) == [("a", 1)]
    finally:
        drop_table(postgresql_url, table)


def test_rows_typed_any_into_a_new_table_take_the_types_of_the_data(database_url, tmp_path):
    table = unique_table()
    try:
        with _batch() as p:
            _ = _totals_as_rows(p | beam.Create(PAIRS)) | WriteToDatabase(database_url, table)
        assert _table_rows(database_url, table) == KEY_TOTALS
    finally:
        drop_table(database_url, table)
