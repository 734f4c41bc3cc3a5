"""The streaming database sink's staging of a micro-batch (the Spark glue
in execution/database_io.py): each run of a batch stages into the batch's
own directory under the checkpoint, replacing what an earlier run of it
staged. A batch the query replays after a restart may spread its rows over
tasks differently (and read further); were an earlier run's staged files
kept beside the replay's, rows would be doubled or stale rows published."""

import pickle

from apache_beam import coders
from apache_beam.internal import pickler
from apache_beam.runners import pipeline_context

from beam_spark_runner.connectors.database_sink import DatabaseWriteConfig
from beam_spark_runner.execution.checkpoint_files import open_checkpoint_files
from beam_spark_runner.execution.database_io import MicroBatchStaging, StagedEpochPublication
from beam_spark_runner.plans import Dest, SparkSink
from beam_spark_runner.translation.database_io import WRITE_DATABASE_URN
from beam_spark_runner.translation.spark_io import encode_payload


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


def _publication(row):
    _, blob = pickle.loads(row.payload)
    (publication,) = pickler.loads(blob)
    return publication


def test_each_run_of_a_batch_replaces_what_an_earlier_run_staged(tmp_path):
    config = DatabaseWriteConfig("postgresql://u@h/db", "t", (), {"type": "struct", "fields": []}, "sink")
    ctx = pipeline_context.PipelineContext()
    coder = coders.WindowedValueCoder(coders.VarIntCoder())
    coder_id = ctx.coders.get_id(coder)
    components = ctx.to_runner_api().SerializeToString()
    sink = SparkSink("w", "Write", encode_payload(config), Dest.materialized("pc"), coder_id, urn=WRITE_DATABASE_URN)
    staging = MicroBatchStaging("run1", components, open_checkpoint_files(None, str(tmp_path)))
    frame = _Frame()
    first = _publication(staging.stage(frame, sink, 7))
    replay = _publication(staging.stage(frame, sink, 7))
    later = _publication(staging.stage(frame, sink, 8))
    assert isinstance(first, StagedEpochPublication)
    assert first == replay
    assert first.coder == coder  # the commit decodes the staged query rows with it
    assert (first.sink, first.epoch, first.root) == ("run1-" + first.sink.split("-")[1], 7, str(tmp_path))
    assert later.relative != first.relative
    uri = str(tmp_path) + "/" + first.relative
    assert frame.writes[:2] == [("overwrite", uri), ("overwrite", uri)]
