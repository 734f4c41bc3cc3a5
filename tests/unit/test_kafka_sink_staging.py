"""The Kafka sink without a broker: its config's checks, and its streaming
staging (io/kafka/spark_glue.py over execution/staged_query_rows.py): a
replay of a batch replaces what an earlier run staged, the records come
back in task order, and a staged file of another format is refused
naming the sink."""

import pyarrow as pa
import pytest
from apache_beam import coders
from apache_beam.runners import pipeline_context
from apache_beam.transforms import window
from apache_beam.utils.windowed_value import WindowedValue

from beam_spark_runner.execution import staged_query_rows
from beam_spark_runner.execution.checkpoint_files import open_checkpoint_files
from beam_spark_runner.io.kafka.config import DEFAULT_TRANSACTION_TIMEOUT_MS, write_config
from beam_spark_runner.io.kafka.planning import WRITE_KAFKA_URN
from beam_spark_runner.io.kafka.spark_glue import MicroBatchStaging, StagedEpochPublication
from beam_spark_runner.io.kafka.transactions import marker_group, transactional_id
from beam_spark_runner.io.spark.planning import encode_payload
from beam_spark_runner.plans import Dest, SparkSink
from beam_spark_runner.streaming import rows as query_rows

_CONFIG = write_config({"bootstrap.servers": "broker:9092"}, "totals")
_CODER = coders.WindowedValueCoder(coders.TupleCoder([coders.BytesCoder(), coders.BytesCoder()]))


def test_the_config_keeps_the_users_settings_and_refuses_the_sinks_own():
    assert _CONFIG.label == "WriteToKafka(totals) at broker:9092"
    assert _CONFIG.producer_settings() == {
        "bootstrap.servers": "broker:9092",
        "transaction.timeout.ms": str(DEFAULT_TRANSACTION_TIMEOUT_MS),
    }
    mine = write_config({"bootstrap.servers": "b:1", "transaction.timeout.ms": 60000, "acks": "all"}, "t")
    assert mine.producer_settings()["transaction.timeout.ms"] == "60000"
    for owned in ("transactional.id", "enable.idempotence"):
        with pytest.raises(ValueError, match="WriteToKafka\\(t\\): producer_config sets %s" % owned):
            write_config({"bootstrap.servers": "b:1", owned: "x"}, "t")
    with pytest.raises(ValueError, match="with bootstrap.servers"):
        write_config({"acks": "all"}, "t")
    with pytest.raises(ValueError, match="topic must be a topic name"):
        write_config({"bootstrap.servers": "b:1"}, "")
    assert transactional_id("run-ab") != marker_group("run-ab")


def _staging(tmp_path):
    ctx = pipeline_context.PipelineContext()
    coder_id = ctx.coders.get_id(_CODER)
    components = ctx.to_runner_api().SerializeToString()
    sink = SparkSink("w", "Write", encode_payload(_CONFIG), Dest.materialized("pc"), coder_id, urn=WRITE_KAFKA_URN)
    return MicroBatchStaging("run1", components, open_checkpoint_files(None, str(tmp_path))), sink


def _collected(records):
    """What the driver collected for the sink: (part, (key, value)) query
    rows in collect order."""
    impl = _CODER.get_impl()
    payloads = [impl.encode_nested(WindowedValue(r, 0, (window.GlobalWindow(),))) for _, r in records]
    return pa.table(
        {
            "kind": pa.array([query_rows.DATA] * len(records), pa.int32()),
            "payload": pa.array(payloads, pa.binary()),
            "part": pa.array([p for p, _ in records], pa.int32()),
        }
    )


def test_a_replayed_batch_replaces_its_staged_records_which_come_back_in_task_order(tmp_path):
    staging, sink = _staging(tmp_path)
    files = open_checkpoint_files(None, str(tmp_path))
    first = staging.stage_collected(_collected([(1, (b"k", b"c")), (0, (b"k", b"a")), (0, (b"k", b"b"))]), sink, 7)
    assert isinstance(first, StagedEpochPublication) and (first.epoch, first.config) == (7, _CONFIG)
    assert first.sink.startswith("run1-") and first.relative.startswith("beam/kafka_staging/")
    values = staged_query_rows.staged_values(files, first.relative, _CONFIG.label, first.coder)
    assert list(values) == [(b"k", b"c"), (b"k", b"a"), (b"k", b"b")]  # one file: collect order
    replay = staging.stage_collected(_collected([(0, (b"k", b"a"))]), sink, 7)
    assert replay == first
    assert list(staged_query_rows.staged_values(files, first.relative, _CONFIG.label, first.coder)) == [(b"k", b"a")]
    # Files of several tasks (Spark's writer): task order.
    files.delete(first.relative)
    for part, value in ((3, b"late"), (0, b"early")):
        table = pa.table(
            {
                "format": pa.array([staged_query_rows.RAW_FORMAT], pa.int32()),
                "part": pa.array([part], pa.int32()),
                "kind": pa.array([query_rows.DATA], pa.int32()),
                "payload": _collected([(part, (b"k", value))]).column("payload"),
            }
        )
        out = pa.BufferOutputStream()
        with pa.ipc.new_file(out, table.schema) as writer:
            writer.write_table(table)
        files.write("%s/part-%05d.arrow" % (first.relative, part), out.getvalue())
    values = staged_query_rows.staged_values(files, first.relative, _CONFIG.label, first.coder)
    assert list(values) == [(b"k", b"early"), (b"k", b"late")]


def test_staged_rows_of_another_format_are_refused_naming_the_sink(tmp_path):
    files = open_checkpoint_files(None, str(tmp_path))
    table = pa.table({"format": pa.array([1], pa.int32()), "part": pa.array([0], pa.int32())})
    out = pa.BufferOutputStream()
    with pa.ipc.new_file(out, table.schema) as writer:
        writer.write_table(table)
    files.write("staged/part-00000.arrow", out.getvalue())
    with pytest.raises(ValueError, match=r"WriteToKafka\(totals\) at broker:9092: staged rows under .* have format 1"):
        list(staged_query_rows.staged_values(files, "staged", _CONFIG.label, _CODER))
