"""The streaming database sink's staging of a micro-batch (the Spark glue
in execution/database_io.py): every run of a batch stages under a writer
of its own. A batch the query replays after a restart may spread its rows
over partitions differently (and read further); were its staged partitions
taken for an earlier run's, rows would be lost or doubled."""

import pickle

from apache_beam.internal import pickler

from beam_spark_runner.connectors.database_sink import DatabaseWriteConfig
from beam_spark_runner.execution.database_io import MicroBatchStaging
from beam_spark_runner.plans import Dest, SparkSink
from beam_spark_runner.translation.database_io import WRITE_DATABASE_URN
from beam_spark_runner.translation.spark_io import encode_payload


class _Frame:
    """What `stage` asks of the batch's DataFrame: a select, a mapInArrow
    and a collect, whose staging body it records instead of running."""

    def __init__(self):
        self.bodies = []

    def select(self, *columns):
        return self

    def mapInArrow(self, body, schema):
        self.bodies.append(body)
        return self

    def collect(self):
        return []


def _publication(row):
    _, blob = pickle.loads(row.payload)
    (publication,) = pickler.loads(blob)
    return publication


def test_each_run_of_a_batch_stages_and_publishes_under_a_writer_of_its_own():
    config = DatabaseWriteConfig("postgresql://u@h/db", "t", (), {"type": "struct", "fields": []}, "sink")
    sink = SparkSink("w", "Write", encode_payload(config), Dest.materialized("pc"), "coder", urn=WRITE_DATABASE_URN)
    staging = MicroBatchStaging("run1", b"")
    frame = _Frame()
    first = _publication(staging.stage(frame, sink, 7))
    replay = _publication(staging.stage(frame, sink, 7))
    assert (first.sink, first.epoch) == (replay.sink, replay.epoch) == ("run1-" + first.sink.split("-")[1], 7)
    assert first.writer != replay.writer
    # Each staging body stages under its own publication's writer.
    assert [body.args[2] for body in frame.bodies] == [first.writer, replay.writer]
