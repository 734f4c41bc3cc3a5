"""The streaming database sink's publication of a micro-batch staged under
the checkpoint (execution/database_io.StagedEpochPublication), driven step
by step against the machine's PostgreSQL and MariaDB with staged files
written as the staging tasks write them, without Spark, in both staged
formats (the query rows the runner stages, and the pickled blocks earlier
versions staged): a release run twice, a commit that landed before the
driver died (its files still there), retractions of rows published by
earlier batches, a database that refuses, staged files of another format."""

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam import coders
from apache_beam.transforms import window
from apache_beam.utils.windowed_value import WindowedValue

import triggers
from beam_spark_runner.connectors.database_sink import EpochCommit, prepare_tables
from beam_spark_runner.connectors.sql_dialects import DatabaseError, dialect_of
from beam_spark_runner.execution import database_io
from beam_spark_runner.execution.database_io import StagedEpochPublication, StagedRows, staged_epoch_dir
from beam_spark_runner.streaming import rows as query_rows
from tests.integration.database_sink_tables import Total, sink_config, staged_count, table_rows
from tests.services import drop_table, execute
from triggers.retraction_coder import RetractionAwareCoder


@pytest.fixture
def config_of(request, tmp_path):
    made = []

    def make(url, keys=()):
        config = sink_config(url, keys)
        made.append(config)
        prepare_tables(config)
        return config

    yield make
    for config in made:
        drop_table(config.url, config.table)


# The element coder of a sink reading a retracting PCollection of Totals.
CODER = coders.WindowedValueCoder(RetractionAwareCoder(coders.RowCoder.from_type_hint(Total, None)))
FORMATS = [database_io.RAW_FORMAT, database_io.PICKLED_FORMAT]


@pytest.fixture(params=FORMATS, ids=["query-rows", "pickled-blocks"])
def staged_format(request):
    return request.param


def _raw_batches(values, part, block_rows, fmt):
    """The query rows a task of the batch holds for the sink: DATA rows of
    `block_rows` encoded elements each, every other one a KEYED row (a keyed
    reader beside the sink)."""
    impl = CODER.get_impl()
    rows = []
    for i in range(0, len(values), block_rows):
        elements = [
            impl.encode_nested(WindowedValue(v, 0, (window.GlobalWindow(),))) for v in values[i : i + block_rows]
        ]
        if len(rows) % 2:
            (row,) = query_rows.keyed("d", 0, 0, [part for e in elements for part in (b"k", e)])
            rows.append((row.kind, row.payload))
        else:
            rows.append((query_rows.DATA, b"".join(elements)))
    if not rows:
        return []
    schema = pa.schema([("format", pa.int32()), ("part", pa.int32()), ("kind", pa.int32()), ("payload", pa.binary())])
    return [
        pa.RecordBatch.from_pydict(
            {
                "format": [fmt] * len(rows),
                "part": [part] * len(rows),
                "kind": [k for k, _ in rows],
                "payload": [p for _, p in rows],
            },
            schema=schema,
        )
    ]


def _pickled_batches(config, values, part, block_rows, fmt):
    batches = list(database_io.staged_blocks(config, values, part, block_rows))
    return [b.set_column(0, "format", pa.array([fmt] * b.num_rows, pa.int32())) for b in batches]


def _stage(root, config, epoch, parts, staged_format, block_rows=2, fmt=None):
    """Writes what the staging tasks of batch `epoch` write in
    `staged_format`: per part (a list of values), one Parquet file (its
    `format` column `fmt`, if given); returns the batch's publication."""
    relative = staged_epoch_dir(config.table, epoch)
    directory = os.path.join(root, *relative.split("/"))
    os.makedirs(directory, exist_ok=True)
    for part, values in enumerate(parts):
        if staged_format == database_io.RAW_FORMAT:
            batches = _raw_batches(values, part, block_rows, fmt or staged_format)
        else:
            batches = _pickled_batches(config, values, part, block_rows, fmt or staged_format)
        if batches:
            pq.write_table(pa.Table.from_batches(batches), os.path.join(directory, "part-%05d-x.snappy.parquet" % part))
    open(os.path.join(directory, "_SUCCESS"), "w").close()
    return StagedEpochPublication(config, config.table, epoch, root, relative, CODER), directory


def test_a_staged_batch_is_published_once_however_often_released(database_url, config_of, tmp_path, staged_format):
    config = config_of(database_url)
    parts = [[Total("a", i, i) for i in range(25)], [Total("b", 0, 1)], []]
    publication, directory = _stage(str(tmp_path), config, 7, parts, staged_format)
    publication()
    assert table_rows(config) == sorted(map(tuple, parts[0] + parts[1]))
    assert not os.path.exists(directory)
    publication()  # a release the coordinator runs again after a restart
    assert table_rows(config) == sorted(map(tuple, parts[0] + parts[1]))


def test_a_commit_that_landed_before_its_files_were_removed_is_not_written_again(
    database_url, config_of, tmp_path, staged_format
):
    config = config_of(database_url)
    publication, directory = _stage(str(tmp_path), config, 3, [[Total("a", 0, 1), Total("b", 0, 2)]], staged_format)
    # The driver committed, then died before removing the batch's files.
    EpochCommit(config, config.table, 3)(StagedRows(_files(tmp_path), publication.relative, config, CODER).rows)
    assert os.path.exists(directory)
    publication()
    assert table_rows(config) == [("a", 0, 1), ("b", 0, 2)]
    assert not os.path.exists(directory)


def _files(tmp_path):
    from beam_spark_runner.execution import checkpoint_files

    return checkpoint_files.open_checkpoint_files(None, str(tmp_path))


def test_batches_published_out_of_order_each_keep_their_rows(database_url, config_of, tmp_path, staged_format):
    config = config_of(database_url)
    first, _ = _stage(str(tmp_path), config, 1, [[Total("a", 0, 1)]], staged_format)
    second, _ = _stage(str(tmp_path), config, 2, [[Total("b", 0, 2)]], staged_format)
    second()
    first()
    assert table_rows(config) == [("a", 0, 1), ("b", 0, 2)]


def test_retractions_delete_rows_published_by_earlier_batches(database_url, config_of, tmp_path, staged_format):
    config = config_of(database_url, keys=("user", "start"))
    root = str(tmp_path)
    _stage(root, config, 1, [[Total("k", 1, 5), Total("k", 10, 7), Total("j", 1, 1)]], staged_format)[0]()
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
    )[0]()
    assert table_rows(config) == [("j", 1, 2), ("k", 1, 15)]
    _stage(root, config, 3, [[R(Total("k", 1, 15))]], staged_format)[0]()
    assert table_rows(config) == [("j", 1, 2)]
    assert staged_count(config) == 0


def test_a_refused_commit_names_the_sink_and_keeps_the_staged_rows(database_url, config_of, tmp_path, staged_format):
    config = config_of(database_url)
    publication, directory = _stage(str(tmp_path), config, 5, [[Total("a", 0, 1)]], staged_format)
    q = dialect_of(config.url).quote
    execute(config.url, "ALTER TABLE %s DROP COLUMN %s" % (q(config.table), q("total")))
    with pytest.raises(DatabaseError, match="test sink: cannot commit micro-batch 5 into table %s" % config.table):
        publication()
    assert os.path.exists(directory)
    execute(config.url, "ALTER TABLE %s ADD COLUMN %s BIGINT" % (q(config.table), q("total")))
    publication()  # the next run publishes them, once
    assert table_rows(config) == [("a", 0, 1)]


def test_staged_rows_of_another_format_are_refused_and_nothing_is_written(
    database_url, config_of, tmp_path, staged_format
):
    config = config_of(database_url)
    publication, directory = _stage(str(tmp_path), config, 4, [[Total("a", 0, 1)]], staged_format, fmt=99)
    with pytest.raises(DatabaseError, match=r"format \[99\]; this runner reads formats 1 and 2"):
        publication()
    assert table_rows(config) == []
    assert os.path.exists(directory)
