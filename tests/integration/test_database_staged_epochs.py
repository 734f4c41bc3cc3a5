"""The streaming database sink's publication of a micro-batch staged under
the checkpoint (io/database/spark_glue.StagedEpochPublication), driven step
by step against the machine's PostgreSQL and MariaDB with staged files
written as the runner writes them, without Spark, in each staged form:
the sink's query rows of encoded rows in Parquet (Spark's writer), the
pickled blocks earlier versions staged, and for PostgreSQL the query rows
of COPY text blocks in an Arrow file (the driver's). Each case: a release
run twice, a commit that landed before the driver died (its files still
there), retractions of rows published by earlier batches, a database that
refuses, staged files of another format."""

import dataclasses
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam import coders
from apache_beam.transforms import window
from apache_beam.utils.windowed_value import WindowedValue

import triggers
from beam_spark_runner.io.database.sink_protocol import EpochCommit, RowEncoding, prepare_tables
from beam_spark_runner.io.database.postgresql_copy import CopyTextEncoder
from beam_spark_runner.io.database.sql_dialects import DatabaseError, dialect_of
from beam_spark_runner.execution import checkpoint_files
from beam_spark_runner.io.database import spark_glue as database_io
from beam_spark_runner.worker.sink_commits import CommitContext
from beam_spark_runner.io.database.spark_glue import StagedEpochPublication, StagedRows, staged_epoch_dir
from beam_spark_runner.streaming import rows as query_rows
from tests.integration.database_sink_tables import Total, sink_config, staged_count, table_rows
from tests import services
from tests.services import drop_table, execute
from triggers.retraction_coder import RetractionAwareCoder


@pytest.fixture
def config_of(request, tmp_path):
    made = []
    staged_format = request.getfixturevalue("staged_format")

    def make(url, keys=()):
        config = sink_config(url, keys)
        if staged_format == COPY_BLOCKS:
            config = dataclasses.replace(config, row_encoding=RowEncoding.POSTGRESQL_COPY_TEXT)
        made.append(config)
        prepare_tables(config)
        return config

    yield make
    for config in made:
        drop_table(config.url, config.table)


# The element coder of a sink reading a retracting PCollection of Totals,
# and of one reading the COPY text blocks made of them.
CODER = coders.WindowedValueCoder(RetractionAwareCoder(coders.RowCoder.from_type_hint(Total, None)))
BLOCKS_CODER = coders.WindowedValueCoder(coders.BytesCoder())
QUERY_ROWS, PICKLED_BLOCKS, COPY_BLOCKS = "query-rows", "pickled-blocks", "copy-blocks"
_FORMATS = {QUERY_ROWS: database_io.RAW_FORMAT, PICKLED_BLOCKS: database_io.PICKLED_FORMAT}


def pytest_generate_tests(metafunc):
    """Each staged form against each database that takes it: COPY blocks
    are PostgreSQL's only."""
    if "staged_format" in metafunc.fixturenames:
        cases = [
            (db, staged)
            for db in ("postgresql", "mariadb")
            for staged in (QUERY_ROWS, PICKLED_BLOCKS, COPY_BLOCKS)
            if staged != COPY_BLOCKS or db == "postgresql"
        ]
        metafunc.parametrize(
            ("database_url", "staged_format"), cases, indirect=["database_url"], ids=["-".join(c) for c in cases]
        )


@pytest.fixture
def database_url(request):
    """The database of the case (`pytest_generate_tests`)."""
    return services.require(request, services.POSTGRESQL if request.param == "postgresql" else services.MARIADB)


def _encoded_elements(config, values, staged_format):
    """The sink's elements as the stage before it encodes them: the rows,
    or one block of COPY text lines."""
    if staged_format == COPY_BLOCKS:
        block = CopyTextEncoder(config.schema, keyed=bool(config.key_columns)).block(values)
        return [BLOCKS_CODER.get_impl().encode_nested(WindowedValue(block, 0, (window.GlobalWindow(),)))]
    impl = CODER.get_impl()
    return [impl.encode_nested(WindowedValue(v, 0, (window.GlobalWindow(),))) for v in values]


_RAW_SCHEMA = pa.schema([("format", pa.int32()), ("part", pa.int32()), ("kind", pa.int32()), ("payload", pa.binary())])


def _raw_batches(config, values, part, block_rows, fmt, staged_format):
    """The query rows a task of the batch holds for the sink: DATA rows of
    `block_rows` encoded elements each, every other one a KEYED row (a keyed
    reader beside the sink)."""
    rows = []
    for i in range(0, len(values), block_rows):
        elements = _encoded_elements(config, values[i : i + block_rows], staged_format)
        if len(rows) % 2:
            (row,) = query_rows.keyed("d", 0, 0, [part for e in elements for part in (b"k", e)])
            rows.append((row.kind, row.payload))
        else:
            rows.append((query_rows.DATA, b"".join(elements)))
    if not rows:
        return []
    return [
        pa.RecordBatch.from_pydict(
            {
                "format": [fmt] * len(rows),
                "part": [part] * len(rows),
                "kind": [k for k, _ in rows],
                "payload": [p for _, p in rows],
            },
            schema=_RAW_SCHEMA,
        )
    ]


def _pickled_batches(config, values, part, block_rows, fmt):
    batches = list(database_io.staged_blocks(config, values, part, block_rows))
    return [b.set_column(0, "format", pa.array([fmt] * b.num_rows, pa.int32())) for b in batches]


def _stage(root, config, epoch, parts, staged_format, block_rows=2, fmt=None):
    """Writes what the runner stages for batch `epoch` in `staged_format`:
    per part (a list of values), one Parquet file as Spark's writer writes
    it, or for COPY blocks one Arrow file holding every part as the driver
    writes it (its `format` column `fmt`, if given); returns the batch's
    publication."""
    relative = staged_epoch_dir(config.table, epoch)
    directory = os.path.join(root, *relative.split("/"))
    os.makedirs(directory, exist_ok=True)
    fmt = fmt or _FORMATS.get(staged_format, database_io.RAW_FORMAT)
    collected = []
    for part, values in enumerate(parts):
        if staged_format == PICKLED_BLOCKS:
            batches = _pickled_batches(config, values, part, block_rows, fmt)
        else:
            batches = _raw_batches(config, values, part, block_rows, fmt, staged_format)
        if staged_format == COPY_BLOCKS:
            collected.extend(batches)
        elif batches:
            pq.write_table(pa.Table.from_batches(batches), os.path.join(directory, "part-%05d-x.snappy.parquet" % part))
    if staged_format == COPY_BLOCKS:
        with pa.ipc.new_file(os.path.join(directory, "part-00000.arrow"), _RAW_SCHEMA) as writer:
            for batch in collected:
                writer.write_batch(batch)
        return StagedEpochPublication(config, config.table, epoch, root, relative, BLOCKS_CODER), directory
    open(os.path.join(directory, "_SUCCESS"), "w").close()
    return StagedEpochPublication(config, config.table, epoch, root, relative, CODER), directory


def test_a_staged_batch_is_published_once_however_often_released(database_url, config_of, tmp_path, staged_format):
    config = config_of(database_url)
    parts = [[Total("a", i, i) for i in range(25)], [Total("b", 0, 1)], []]
    publication, directory = _stage(str(tmp_path), config, 7, parts, staged_format)
    publication.commit(_context())
    assert table_rows(config) == sorted(map(tuple, parts[0] + parts[1]))
    assert not os.path.exists(directory)
    publication.commit(_context())  # a release the coordinator runs again after a restart
    assert table_rows(config) == sorted(map(tuple, parts[0] + parts[1]))


def test_a_commit_that_landed_before_its_files_were_removed_is_not_written_again(
    database_url, config_of, tmp_path, staged_format
):
    config = config_of(database_url)
    publication, directory = _stage(str(tmp_path), config, 3, [[Total("a", 0, 1), Total("b", 0, 2)]], staged_format)
    # The driver committed, then died before removing the batch's files.
    staged = StagedRows(_files(tmp_path), publication.relative, config, publication.coder)
    EpochCommit(config, config.table, 3)(staged.rows)
    assert os.path.exists(directory)
    publication.commit(_context())
    assert table_rows(config) == [("a", 0, 1), ("b", 0, 2)]
    assert not os.path.exists(directory)


def _context():
    """What the driver's execution gives a commit: the checkpoint's files."""
    return CommitContext(lambda root: checkpoint_files.open_checkpoint_files(None, root))


def _files(tmp_path):
    return checkpoint_files.open_checkpoint_files(None, str(tmp_path))


def test_batches_published_out_of_order_each_keep_their_rows(database_url, config_of, tmp_path, staged_format):
    config = config_of(database_url)
    first, _ = _stage(str(tmp_path), config, 1, [[Total("a", 0, 1)]], staged_format)
    second, _ = _stage(str(tmp_path), config, 2, [[Total("b", 0, 2)]], staged_format)
    second.commit(_context())
    first.commit(_context())
    assert table_rows(config) == [("a", 0, 1), ("b", 0, 2)]


def test_retractions_delete_rows_published_by_earlier_batches(database_url, config_of, tmp_path, staged_format):
    config = config_of(database_url, keys=("user", "start"))
    root = str(tmp_path)
    _stage(root, config, 1, [[Total("k", 1, 5), Total("k", 10, 7), Total("j", 1, 1)]], staged_format)[0].commit(
        _context()
    )
    assert table_rows(config) == [("j", 1, 1), ("k", 1, 5), ("k", 10, 7)]
    # The sessions [1, 6) and [10, 15) merged into [1, 15): both retracted,
    # the merged one added; j's pane replaced by a later one (a later block
    # of the same part, then a later part, decides).
    R = triggers.Retraction
    _stage(
        root,
        config,
        2,
        [[R(Total("k", 10, 7)), R(Total("k", 1, 5)), Total("k", 1, 15)], [R(Total("j", 1, 1)), Total("j", 1, 2)]],
        staged_format,
    )[0].commit(_context())
    assert table_rows(config) == [("j", 1, 2), ("k", 1, 15)]
    _stage(root, config, 3, [[R(Total("k", 1, 15))]], staged_format)[0].commit(_context())
    assert table_rows(config) == [("j", 1, 2)]
    assert staged_count(config) == 0


def test_a_refused_commit_names_the_sink_and_keeps_the_staged_rows(database_url, config_of, tmp_path, staged_format):
    config = config_of(database_url)
    publication, directory = _stage(str(tmp_path), config, 5, [[Total("a", 0, 1)]], staged_format)
    q = dialect_of(config.url).quote
    execute(config.url, "ALTER TABLE %s DROP COLUMN %s" % (q(config.table), q("total")))
    with pytest.raises(DatabaseError, match="test sink: cannot commit micro-batch 5 into table %s" % config.table):
        publication.commit(_context())
    assert os.path.exists(directory)
    execute(config.url, "ALTER TABLE %s ADD COLUMN %s BIGINT" % (q(config.table), q("total")))
    publication.commit(_context())  # the next run publishes them, once
    assert table_rows(config) == [("a", 0, 1)]


def test_staged_rows_of_another_format_are_refused_and_nothing_is_written(
    database_url, config_of, tmp_path, staged_format
):
    config = config_of(database_url)
    publication, directory = _stage(str(tmp_path), config, 4, [[Total("a", 0, 1)]], staged_format, fmt=99)
    with pytest.raises(DatabaseError, match=r"format 99; this runner reads formats 1 and 2"):
        publication.commit(_context())
    assert table_rows(config) == []
    assert os.path.exists(directory)
