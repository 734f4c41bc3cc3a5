"""The streaming database sink's staging of a micro-batch (the Spark glue
in io/database/spark_glue.py), by a Spark write job or by the driver from
the rows it collected: each run of a batch stages into the batch's own
directory under the checkpoint, replacing what an earlier run of it
staged. A batch the query replays after a restart may spread its rows over
tasks differently (and read further); were an earlier run's staged files
kept beside the replay's, rows would be doubled or stale rows published."""

import pyarrow as pa
from apache_beam import coders
from apache_beam.runners import pipeline_context
from apache_beam.transforms import window
from apache_beam.utils.windowed_value import WindowedValue

from beam_spark_runner.io.database.sink_protocol import DatabaseWriteConfig, RowEncoding
from beam_spark_runner.execution.checkpoint_files import open_checkpoint_files
from beam_spark_runner.io.database.spark_glue import MicroBatchStaging, StagedEpochPublication, StagedRows
from beam_spark_runner.plans import Dest, SparkSink
from beam_spark_runner.streaming import rows as query_rows
from beam_spark_runner.io.database.planning import WRITE_DATABASE_URN
from beam_spark_runner.io.spark.planning import encode_payload


class _Frame:
    """What `stage` asks of the batch's DataFrame: a selectExpr and a
    Parquet write, which it records instead of running."""

    def __init__(self):
        self.writes = []

    def selectExpr(self, *columns):
        return self

    @property
    def write(self):
        return self

    def mode(self, mode):
        self._mode = mode
        return self

    def parquet(self, uri):
        self.writes.append((self._mode, uri))


_CONFIG = DatabaseWriteConfig(
    "postgresql://u@h/db", "t", (), {"type": "struct", "fields": []}, "sink", RowEncoding.POSTGRESQL_COPY_TEXT
)
_CODER = coders.WindowedValueCoder(coders.BytesCoder())


def _staging(tmp_path):
    ctx = pipeline_context.PipelineContext()
    coder_id = ctx.coders.get_id(_CODER)
    components = ctx.to_runner_api().SerializeToString()
    sink = SparkSink("w", "Write", encode_payload(_CONFIG), Dest.materialized("pc"), coder_id, urn=WRITE_DATABASE_URN)
    return MicroBatchStaging("run1", components, open_checkpoint_files(None, str(tmp_path))), sink


def test_each_run_of_a_batch_replaces_what_an_earlier_run_staged(tmp_path):
    coder = _CODER
    staging, sink = _staging(tmp_path)
    frame = _Frame()
    first = staging.stage(frame, sink, 7)
    replay = staging.stage(frame, sink, 7)
    later = staging.stage(frame, sink, 8)
    assert isinstance(first, StagedEpochPublication)
    assert first == replay
    assert first.coder == coder  # the commit decodes the staged query rows with it
    assert (first.sink, first.epoch, first.root) == ("run1-" + first.sink.split("-")[1], 7, str(tmp_path))
    assert later.relative != first.relative
    uri = str(tmp_path) + "/" + first.relative
    assert frame.writes[:2] == [("overwrite", uri), ("overwrite", uri)]


def _collected(blocks):
    """What the driver collected for the sink: (part, block) query rows in
    collect order."""
    impl = _CODER.get_impl()
    payloads = [impl.encode_nested(WindowedValue(b, 0, (window.GlobalWindow(),))) for _, b in blocks]
    return pa.table(
        {
            "kind": pa.array([query_rows.DATA] * len(blocks), pa.int32()),
            "payload": pa.array(payloads, pa.binary()),
            "part": pa.array([p for p, _ in blocks], pa.int32()),
        }
    )


def test_rows_the_driver_collected_are_staged_in_collect_order_and_a_replay_replaces_them(tmp_path):
    staging, sink = _staging(tmp_path)
    files = open_checkpoint_files(None, str(tmp_path))
    first = staging.stage_collected(_collected([(0, b"a\n"), (0, b"b\n"), (1, b"c\n")]), sink, 7)
    assert isinstance(first, StagedEpochPublication) and first.epoch == 7
    assert list(StagedRows(files, first.relative, _CONFIG, first.coder).rows()) == [b"a\n", b"b\n", b"c\n"]
    # A replay of the batch after a restart, its rows spread differently.
    replay = staging.stage_collected(_collected([(0, b"c\n"), (1, b"a\n")]), sink, 7)
    assert replay == first
    assert files.list(first.relative) == ["part-00000.arrow"]
    assert list(StagedRows(files, replay.relative, _CONFIG, replay.coder).rows()) == [b"c\n", b"a\n"]
