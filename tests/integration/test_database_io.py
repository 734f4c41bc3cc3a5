"""WriteToDatabase and ReadFromDatabase against the machine's PostgreSQL and
MariaDB over real connections: batch appends and upserts, a task that
fails mid-partition and is retried, streaming appends, RETRACTING sessions
leaving only the current answer in the table, partitioned reads, the type
mapping both ways, and the errors bad input gets."""

import datetime
import decimal
import typing

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms import trigger, window
from apache_beam.utils.timestamp import Timestamp

import triggers
from beam_spark_runner import SparkRunner
from beam_spark_runner.io.database.sql_dialects import DatabaseError, dialect_of
from beam_spark_runner.errors import UnsupportedPipelineError
from beam_spark_runner.io import ReadFromDatabase, WriteToDatabase
from tests.services import drop_table, execute, unique_table


class Score(typing.NamedTuple):
    id: int
    user: str
    score: float


def _batch():
    return beam.Pipeline(runner=SparkRunner(), options=PipelineOptions([]))


def _streaming():
    return beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(["--streaming"]))


def _rows(url, table, order="id"):
    q = dialect_of(url).quote
    return execute(url, "SELECT * FROM %s ORDER BY %s" % (q(table), q(order)))


def _drop(url, table):
    drop_table(url, table)


def _score(i):
    return Score(i, "u%d" % (i % 7), i / 4)


def test_a_batch_write_appends_every_row_exactly_once(database_url):
    table = unique_table()
    try:
        with _batch() as p:
            written = (
                p
                | beam.Create(list(range(3000)) + list(range(50)))  # 50 rows twice: no key, both kept
                | beam.Reshuffle()
                | beam.Map(_score).with_output_types(Score)
                | WriteToDatabase(database_url, table)
            )
            assert_that(written, equal_to([table]))
        got = sorted(tuple(r) for r in _rows(database_url, table))
        assert got == sorted([tuple(_score(i)) for i in range(3000)] + [tuple(_score(i)) for i in range(50)])
    finally:
        _drop(database_url, table)


def test_a_batch_write_with_key_columns_upserts_into_an_existing_table(database_url):
    table = unique_table()
    q = dialect_of(database_url).quote
    text = "VARCHAR(20)"
    execute(
        database_url,
        "CREATE TABLE %s (id BIGINT PRIMARY KEY, %s %s, score DOUBLE PRECISION, note %s)"
        % (q(table), q("user"), text, text),
        (
            "INSERT INTO %s (id, %s, score, note) VALUES (1, 'old', 0, 'kept'), (999, 'other', 9, 'kept')"
            % (q(table), q("user"))
        ),
    )
    try:
        with _batch() as p:
            _ = (
                p
                | beam.Create(range(5))
                | beam.Map(_score).with_output_types(Score)
                | WriteToDatabase(database_url, table, key_columns=["id"])
            )
        got = [tuple(r) for r in _rows(database_url, table)]
        # Rows 0-4 written (1 replaced: its untouched column keeps its value), 999 untouched.
        assert got == [(0, "u0", 0.0, None), (1, "u1", 0.25, "kept")] + [
            (i, "u%d" % i, i / 4, None) for i in (2, 3, 4)
        ] + [(999, "other", 9.0, "kept")]
    finally:
        _drop(database_url, table)


class _FailFirstAttempt(beam.DoFn):
    """Raises in the first attempt of partition 0's task after 100 rows:
    the write's transaction of that attempt must leave nothing behind."""

    def process(self, element):
        from pyspark import TaskContext

        task = TaskContext.get()
        yield element
        if element == 100 and task.partitionId() == 0 and task.attemptNumber() == 0:
            raise RuntimeError("injected failure after the first rows of the partition")


def test_a_task_retried_after_writing_part_of_its_rows_writes_each_row_once(postgresql_url):
    table = unique_table()
    try:
        with _batch() as p:
            _ = (
                p
                | beam.Create([list(range(0, 500)), list(range(500, 1000))], reshuffle=False)
                | beam.FlatMap(lambda xs: xs)
                | beam.ParDo(_FailFirstAttempt())
                | beam.Map(_score).with_output_types(Score)
                | WriteToDatabase(postgresql_url, table)
            )
        got = [r[0] for r in _rows(postgresql_url, table)]
        assert got == list(range(1000))
    finally:
        _drop(postgresql_url, table)


def test_streaming_micro_batches_are_appended_exactly_once(database_url):
    table = unique_table()
    stream = TestStream().advance_watermark_to(0)
    for batch in range(4):
        stream = stream.add_elements([window.TimestampedValue(i, batch) for i in range(batch * 25, batch * 25 + 25)])
        stream = stream.advance_processing_time(1)
    stream = stream.advance_watermark_to_infinity()
    try:
        with _streaming() as p:
            _ = p | stream | beam.Map(_score).with_output_types(Score) | WriteToDatabase(database_url, table)
        assert [tuple(r) for r in _rows(database_url, table)] == [tuple(_score(i)) for i in range(100)]
    finally:
        _drop(database_url, table)


class SessionTotal(typing.NamedTuple):
    user: str
    session_start: int
    total: int


class _SessionRow(beam.DoFn):
    """A combined pane (user, total) or its retraction (user,
    Retraction(total)) as a row, keeping its polarity."""

    def process(self, element, w=beam.DoFn.WindowParam):
        user, total = element
        yield triggers.retractions.map_pane(lambda t: SessionTotal(user, int(w.start), t), total)


def _late_merging_sessions():
    """5 at t=1, 7 at t=10 (two sessions of gap 5, both fired in their own
    micro-batches), the watermark at 8, then 3 at t=5.5: it merges both
    into one session [1, 15) of 15."""
    return (
        TestStream()
        .add_elements([window.TimestampedValue(("k", 5), 1)])
        .advance_processing_time(1)
        .add_elements([window.TimestampedValue(("k", 7), 10)])
        .advance_processing_time(1)
        .advance_watermark_to(8)
        .advance_processing_time(1)
        .add_elements([window.TimestampedValue(("k", 3), 5.5)])
        .advance_processing_time(1)
        .advance_watermark_to_infinity()
    )


def test_retracting_sessions_leave_only_the_current_sessions_in_the_table(database_url):
    table = unique_table()
    try:
        with _streaming() as p:
            _ = (
                p
                | _late_merging_sessions()
                | beam.WindowInto(
                    window.Sessions(5),
                    trigger=trigger.AfterWatermark(early=trigger.AfterCount(1), late=trigger.AfterCount(1)),
                    accumulation_mode=triggers.RETRACTING,
                    allowed_lateness=100,
                )
                | beam.CombinePerKey(sum)
                | beam.ParDo(_SessionRow()).with_output_types(SessionTotal)
                | WriteToDatabase(database_url, table, key_columns=["user", "session_start"])
            )
        # Sessions [1, 6) and [10, 15) were published, then retracted when
        # they merged: [10, 15)'s row is gone, [1, 6)'s replaced.
        assert [tuple(r) for r in _rows(database_url, table, order="session_start")] == [("k", 1, 15)]
    finally:
        _drop(database_url, table)


def test_retracting_input_without_key_columns_is_refused_at_submission(postgresql_url):
    p = _streaming()
    with pytest.raises(UnsupportedPipelineError, match="RETRACTING panes; give key_columns"):
        _ = (
            p
            | _late_merging_sessions()
            | beam.WindowInto(window.Sessions(5), accumulation_mode=triggers.RETRACTING)
            | beam.CombinePerKey(sum)
            | beam.ParDo(_SessionRow()).with_output_types(SessionTotal)
            | WriteToDatabase(postgresql_url, unique_table())
        )


def test_a_partitioned_read_reads_every_row_once(database_url):
    table = unique_table()
    q = dialect_of(database_url).quote
    values = ", ".join("(%d, 'r%d')" % (i, i) for i in range(1, 501))
    execute(
        database_url,
        "CREATE TABLE %s (id INT, name VARCHAR(10))" % q(table),
        "INSERT INTO %s VALUES %s, (NULL, 'null id'), (-40, 'below'), (9000, 'above')" % (q(table), values),
    )
    try:
        with _batch() as p:
            rows = p | ReadFromDatabase(
                database_url, table=table, partition_column="id", num_partitions=7, lower_bound=1, upper_bound=500
            )
            assert_that(
                rows | beam.Map(lambda r: (r.id, r.name)),
                equal_to(
                    [(i, "r%d" % i) for i in range(1, 501)] + [(None, "null id"), (-40, "below"), (9000, "above")]
                ),
            )
    finally:
        _drop(database_url, table)


_PG_TYPES = (
    "CREATE TABLE {t} (b BOOLEAN, s SMALLINT, i INTEGER, l BIGINT, f REAL, d DOUBLE PRECISION, "
    "n NUMERIC(10, 2), txt TEXT, v VARCHAR(5), bin BYTEA, day DATE, ts TIMESTAMPTZ)"
)
_MARIADB_TYPES = (
    "CREATE TABLE {t} (b BOOLEAN, s SMALLINT, i INT, l BIGINT, f FLOAT, d DOUBLE, "
    "n DECIMAL(10, 2), txt TEXT, v VARCHAR(5), bin BLOB, day DATE, ts DATETIME(6))"
)
_TYPED_ROW = (
    True,
    -3,
    70000,
    2**40,
    1.5,
    2.25,
    decimal.Decimal("12.34"),
    "text é",
    "short",
    b"\x00\x01",
    datetime.date(2026, 11, 27),
    Timestamp(micros=1_764_201_600_123_456),
)


def test_every_mapped_column_type_round_trips_read_then_write(database_url):
    source, copy = unique_table(), unique_table()
    dialect = dialect_of(database_url)
    create = (_PG_TYPES if dialect.name == "PostgreSQL" else _MARIADB_TYPES).format(t=dialect.quote(source))
    insert = "INSERT INTO %s VALUES (%s)" % (dialect.quote(source), ", ".join(["%s"] * len(_TYPED_ROW)))
    ts = dialect.to_db("timestamp")
    execute(database_url, create, (insert, _TYPED_ROW[:-1] + (ts(_TYPED_ROW[-1]),)))
    try:
        with _batch() as p:
            rows = p | ReadFromDatabase(database_url, table=source)
            assert_that(rows | beam.Map(tuple), equal_to([_TYPED_ROW]))
            _ = rows | WriteToDatabase(database_url, copy)
        assert execute(database_url, "SELECT * FROM %s" % dialect.quote(copy)) == execute(
            database_url, "SELECT * FROM %s" % dialect.quote(source)
        )
    finally:
        _drop(database_url, source)
        _drop(database_url, copy)


def test_every_mapped_column_type_and_null_round_trips_through_a_streaming_write(database_url):
    """The streaming sink (rows staged under the checkpoint, decoded and
    written by the commit): every mapped type, and a row of NULLs, arrive
    as a plain INSERT of the same values wrote them."""
    source, copy = unique_table(), unique_table()
    dialect = dialect_of(database_url)
    create = (_PG_TYPES if dialect.name == "PostgreSQL" else _MARIADB_TYPES).format(t=dialect.quote(source))
    insert = "INSERT INTO %s VALUES (%s)" % (dialect.quote(source), ", ".join(["%s"] * len(_TYPED_ROW)))
    ts = dialect.to_db("timestamp")
    nulls = (None,) * len(_TYPED_ROW)
    execute(database_url, create, (insert, _TYPED_ROW[:-1] + (ts(_TYPED_ROW[-1]),)), (insert, nulls))
    try:
        with _streaming() as p:
            _ = p | ReadFromDatabase(database_url, table=source) | WriteToDatabase(database_url, copy)
        order = " ORDER BY %s" % dialect.quote("b")
        written = execute(database_url, "SELECT * FROM %s%s" % (dialect.quote(copy), order))
        assert written == execute(database_url, "SELECT * FROM %s%s" % (dialect.quote(source), order))
        # Both rows, the typed one holding its values.
        assert sorted(tuple(r) == nulls for r in written) == [False, True]
    finally:
        _drop(database_url, source)
        _drop(database_url, copy)


def test_a_column_type_no_row_can_hold_is_refused_naming_the_column(database_url):
    odd = "INTERVAL '1 day'" if dialect_of(database_url).name == "PostgreSQL" else "CAST('10:00' AS TIME)"
    with pytest.raises(DatabaseError, match="column 'span' has type"):
        _ = _batch() | ReadFromDatabase(database_url, query="SELECT 1 AS id, %s AS span" % odd)


def test_bad_input_gets_errors_naming_the_problem(postgresql_url):
    with pytest.raises(ValueError, match="scheme must be one of"):
        WriteToDatabase("oracle://h/db", "t")
    rows = _batch() | beam.Create([_score(1)]).with_output_types(Score)
    with pytest.raises(DatabaseError, match=r"cannot connect to postgresql://postgres@127.0.0.1:1/test"):
        _ = rows | "unreachable" >> WriteToDatabase("postgresql://postgres@127.0.0.1:1/test", "t")
    with pytest.raises(UnsupportedPipelineError, match="have no schema"):
        _ = rows | beam.Map(lambda r: 1) | WriteToDatabase(postgresql_url, "t")
    with pytest.raises(UnsupportedPipelineError, match="key_columns names columns its rows do not have"):
        _ = rows | "nokey" >> WriteToDatabase(postgresql_url, "t", key_columns=["missing"])
    table = unique_table()
    execute(postgresql_url, 'CREATE TABLE "%s" (id BIGINT, "user" TEXT)' % table)
    try:
        with pytest.raises(DatabaseError, match=r"table %s at .* has no column 'score'" % table):
            _ = rows | "nocolumn" >> WriteToDatabase(postgresql_url, table)
        execute(postgresql_url, 'ALTER TABLE "%s" ADD COLUMN score DOUBLE PRECISION' % table)
        with pytest.raises(DatabaseError, match="has no unique key or primary key on exactly id"):
            _ = rows | "nounique" >> WriteToDatabase(postgresql_url, table, key_columns=["id"])
    finally:
        _drop(postgresql_url, table)
    with pytest.raises(ValueError, match="give a query or a table, not both"):
        ReadFromDatabase(postgresql_url, query="SELECT 1", table="t")
    with pytest.raises(UnsupportedPipelineError, match="partition_column 'nope' is not a column"):
        _ = _batch() | ReadFromDatabase(
            postgresql_url, query="SELECT 1 AS id", partition_column="nope", num_partitions=2
        )


def test_wrong_credentials_and_missing_tables_are_named_without_the_password(postgresql_url, mariadb_url):
    rows = _batch() | beam.Create([_score(1)]).with_output_types(Score)
    with pytest.raises(DatabaseError, match=r'cannot connect to postgresql://nobody@127.0.0.1:5432/test: .*"nobody"'):
        _ = rows | "role" >> WriteToDatabase("postgresql://nobody@127.0.0.1:5432/test", "t")
    with pytest.raises(
        DatabaseError, match=r"cannot connect to mysql://root@127.0.0.1:3306/test: .*Access denied"
    ) as e:
        _ = rows | "password" >> WriteToDatabase("mysql://root:not-the-password@127.0.0.1:3306/test", "t")
    assert "not-the-password" not in str(e.value)
    for url in (postgresql_url, mariadb_url):
        with pytest.raises(DatabaseError, match=r"cannot describe the query: .*no_such_table"):
            _ = _batch() | "missing %s" % url >> ReadFromDatabase(url, table="no_such_table")


def test_a_partitioned_read_of_a_million_rows_equals_a_plain_select(postgresql_url):
    table = unique_table()
    execute(
        postgresql_url,
        'CREATE TABLE "%s" AS SELECT i AS id, i %% 97 AS bucket FROM generate_series(1, 1000000) AS i' % table,
    )
    expected = execute(postgresql_url, 'SELECT COUNT(*), SUM(id), SUM(bucket * id) FROM "%s"' % table)[0]
    try:
        with _batch() as p:
            rows = p | ReadFromDatabase(postgresql_url, table=table, partition_column="id", num_partitions=8)
            totals = rows | beam.Map(lambda r: (1, r.id, r.bucket * r.id)) | beam.CombineGlobally(_sum_triples)
            assert_that(totals, equal_to([tuple(int(v) for v in expected)]))
    finally:
        _drop(postgresql_url, table)


def _sum_triples(triples):
    triples = list(triples)
    return tuple(sum(t[i] for t in triples) for i in range(3))
