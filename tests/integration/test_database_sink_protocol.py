"""The database sink's staging and publication (io/database/sink_protocol.py)
driven step by step against the machine's PostgreSQL and MariaDB, without
Spark: the cases a pipeline run reaches only by luck (a task attempt that
committed its staging and was retried anyway, a release run twice, an
earlier driver's staged rows for a replayed batch, retractions of rows
published by an earlier micro-batch). Each case for the rows as they
are, and for PostgreSQL as the COPY text blocks its sink stages."""

import dataclasses

import pytest

import triggers
from beam_spark_runner.io.database import sink_protocol as database_sink
from beam_spark_runner.io.database.sink_protocol import DatabasePublication, RowEncoding, prepare_tables
from beam_spark_runner.io.database.postgresql_copy import CopyTextEncoder
from tests import services
from tests.integration import database_sink_tables
from tests.integration.database_sink_tables import Total, staged_count, table_rows
from tests.services import drop_table

_CASES = [
    ("postgresql", RowEncoding.ROWS),
    ("mariadb", RowEncoding.ROWS),
    ("postgresql", RowEncoding.POSTGRESQL_COPY_TEXT),
]


def pytest_generate_tests(metafunc):
    if "encoding" in metafunc.fixturenames:
        metafunc.parametrize(
            ("database_url", "encoding"),
            _CASES,
            indirect=["database_url"],
            ids=["%s-%s" % (db, encoding.value) for db, encoding in _CASES],
        )


@pytest.fixture
def database_url(request):
    """The database of the case (`pytest_generate_tests`)."""
    return services.require(request, services.POSTGRESQL if request.param == "postgresql" else services.MARIADB)


@pytest.fixture
def sink_config(encoding):
    def make(url, keys=()):
        return dataclasses.replace(database_sink_tables.sink_config(url, keys), row_encoding=encoding)

    return make


def stage_rows(config, sink, writer, epoch, part, attempt, values):
    """Stages `values` as a task attempt hands them to the sink: the rows,
    or COPY text blocks of up to two rows each (a block per row pair, so
    the rows' order across blocks counts)."""
    if config.row_encoding is RowEncoding.POSTGRESQL_COPY_TEXT:
        values = _blocks(CopyTextEncoder(config.schema, keyed=bool(config.key_columns)), values)
    return database_sink.stage_rows(config, sink, writer, epoch, part, attempt, values)


def _blocks(encoder, values, rows=2):
    held = []
    for value in values:
        held.append(value)
        if len(held) == rows:
            yield encoder.block(held)
            held = []
    if held:
        yield encoder.block(held)


@pytest.fixture
def drop_after(request):
    made = []
    yield made.append
    for config in made:
        drop_table(config.url, config.table)


def test_a_partition_staged_by_two_attempts_is_published_once_however_often_released(
    database_url, sink_config, drop_after
):
    config = sink_config(database_url)
    drop_after(config)
    prepare_tables(config)
    part0 = [Total("a", i, i) for i in range(100)]
    stage_rows(config, config.table, "w1", 7, 0, 11, part0)  # committed, then the task was retried
    stage_rows(config, config.table, "w1", 7, 0, 12, part0)
    stage_rows(config, config.table, "w1", 7, 1, 13, [Total("b", 0, 1)])
    publication = DatabasePublication(config, config.table, 7, "w1")
    publication()
    publication()  # a release the coordinator runs again after a restart
    assert table_rows(config) == sorted(map(tuple, part0 + [Total("b", 0, 1)]))


def test_rows_an_earlier_driver_staged_for_a_replayed_batch_are_not_published(database_url, sink_config, drop_after):
    config = sink_config(database_url)
    drop_after(config)
    prepare_tables(config)
    stage_rows(config, config.table, "first-driver", 3, 0, 1, [Total("lost", 0, 1)])
    stage_rows(config, config.table, "replay", 3, 0, 1, [Total("a", 0, 1)])
    DatabasePublication(config, config.table, 3, "replay")()
    assert table_rows(config) == [("a", 0, 1)]
    assert staged_count(config) == 0


def test_an_epoch_committed_after_a_later_one_keeps_its_rows(database_url, sink_config, drop_after):
    """The runner commits epochs in order, but a commit never removes
    another epoch's staged rows whatever the order."""
    config = sink_config(database_url)
    drop_after(config)
    prepare_tables(config)
    stage_rows(config, config.table, "w", 1, 0, 1, [Total("a", 0, 1)])
    stage_rows(config, config.table, "w", 2, 0, 2, [Total("b", 0, 2)])
    DatabasePublication(config, config.table, 2, "w")()
    DatabasePublication(config, config.table, 1, "w")()
    assert table_rows(config) == [("a", 0, 1), ("b", 0, 2)]
    assert staged_count(config) == 0


def test_a_failing_input_stages_nothing(database_url, sink_config, drop_after):
    config = sink_config(database_url)
    drop_after(config)
    prepare_tables(config)

    def values():
        yield Total("a", 0, 1)
        raise RuntimeError("the stage failed")

    with pytest.raises(RuntimeError, match="the stage failed"):
        stage_rows(config, config.table, "w", 0, 0, 1, values())
    assert staged_count(config) == 0


def test_retractions_delete_rows_published_by_earlier_micro_batches(database_url, sink_config, drop_after):
    config = sink_config(database_url, keys=("user", "start"))
    drop_after(config)
    prepare_tables(config)
    stage_rows(config, config.table, "w", 1, 0, 1, [Total("k", 1, 5), Total("k", 10, 7), Total("j", 1, 1)])
    DatabasePublication(config, config.table, 1, "w")()
    assert table_rows(config) == [("j", 1, 1), ("k", 1, 5), ("k", 10, 7)]
    # The sessions [1, 6) and [10, 15) merged into [1, 15): both retracted,
    # the merged one added; j's pane replaced by a later one.
    R = triggers.Retraction
    stage_rows(config, config.table, "w", 2, 0, 1, [R(Total("k", 10, 7)), R(Total("k", 1, 5)), Total("k", 1, 15)])
    stage_rows(config, config.table, "w", 2, 1, 2, [R(Total("j", 1, 1)), Total("j", 1, 2)])
    DatabasePublication(config, config.table, 2, "w")()
    assert table_rows(config) == [("j", 1, 2), ("k", 1, 15)]
    stage_rows(config, config.table, "w", 3, 0, 1, [R(Total("k", 1, 15))])
    DatabasePublication(config, config.table, 3, "w")()
    assert table_rows(config) == [("j", 1, 2)]
