"""Spark glue of WriteToKafka (io/kafka/transactions.py has the protocol):
the driver publishes, in Kafka transactions.

- Batch (`write_kafka_rdd`): the driver takes the input's records task by
  task (`toLocalIterator`: one successful attempt of each task reaches it),
  in partitions of about PARTITION_BYTES, and publishes them all in one
  transaction, committed once every task is in: a retried task never
  publishes twice, a failed job publishes nothing.
- Streaming (`MicroBatchStaging`): the sink's query rows of a batch are
  staged under the checkpoint (execution/staged_query_rows.py; a replay of
  the batch overwrites them), and the batch's `StagedEpochPublication`,
  which the checkpoint coordinator runs once the batch is a completed
  checkpoint (and again after a restart that interrupted it), publishes
  them as the batch's epoch (`EpochPublisher`), then removes them.
"""

import dataclasses
import uuid
from typing import Any

from apache_beam.transforms import window
from apache_beam.utils.timestamp import MAX_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

from beam_spark_runner.execution import checkpoint_files, runner_io_glue, staged_query_rows
from beam_spark_runner.execution.naming import spark_call_site
from beam_spark_runner.io.kafka import transactions
from beam_spark_runner.io.kafka.config import KafkaWriteConfig
from beam_spark_runner.io.kafka.planning import WRITE_KAFKA_URN, decode_payload
from beam_spark_runner.worker import context
from beam_spark_runner.worker.runs import RunCodec
from beam_spark_runner.worker.sink_commits import SinkCommit
from beam_spark_runner.worker.transactional_files import digest

STAGED_DIR = checkpoint_files.join(checkpoint_files.BEAM_DIR, "kafka_staging")
# About how much of the input one task hands the driver in batch.
PARTITION_BYTES = 16 << 20


# --- batch --------------------------------------------------------------------


def write_kafka_rdd(execution, stage):
    from pyspark import StorageLevel

    config = decode_payload(stage.native.payload)
    sc = execution.sc
    (port,) = stage.inputs
    execution.check_not_cancelled()
    sc.setJobDescription("Beam: %s" % stage.display_name)
    name = "batch-%s-%s" % (uuid.uuid4().hex[:16], digest(stage.name)[:8])
    # A task's records reach the driver whole, as its result: the input is
    # computed once onto the executors' disks, measured, and spread over
    # partitions of about PARTITION_BYTES, so no result outgrows the
    # driver's heap (a result the driver cannot hold stalls Spark's job).
    inputs = execution.input_rdd(stage).persist(StorageLevel.DISK_ONLY)
    try:
        with spark_call_site(sc, stage.display_name):
            total = inputs.map(_encoded_bytes).sum()
            parts = max(1, -(-int(total) // PARTITION_BYTES))
            if parts > inputs.getNumPartitions():
                spread = inputs.repartition(parts)
            else:
                spread = inputs
            records = spread.mapPartitions(_records_of(execution.plan.components, port.coder_id))
            transactions.publish_once(config, records.toLocalIterator(prefetchPartitions=False), name)
    finally:
        inputs.unpersist()
    execution.after_spark_job()
    final = WindowedValue(None, MAX_TIMESTAMP, (window.GlobalWindow(),))
    ctx = context.components_context(execution.plan.components)
    blocks = [
        (i, RunCodec(ctx.coders[p.coder_id]).encode([(final, [config.topic])])) for i, p in enumerate(stage.outputs)
    ]
    return sc.parallelize(blocks, 1)


def _encoded_bytes(pair):
    _, block = pair
    return len(block) if isinstance(block, (bytes, bytearray, memoryview)) else 0


def _records_of(components, coder_id):
    def records(pairs):
        codec = RunCodec(context.components_context(components).coders[coder_id])
        return (value for _, block in pairs for _, run in codec.decode(block) for value in run)

    return records


runner_io_glue.register_batch_stage(WRITE_KAFKA_URN, write_kafka_rdd)


# --- streaming ----------------------------------------------------------------


def staged_epoch_dir(sink_id: str, batch_id: int) -> str:
    """Where a streaming sink stages a batch's records, relative to the
    checkpoint."""
    return staged_query_rows.staged_epoch_dir(STAGED_DIR, sink_id, batch_id)


class MicroBatchStaging(staged_query_rows.CheckpointStaging):
    """A streaming query's Kafka sinks: `prepare()` at the query's start
    (each sink's broker is reached: one that is down fails the start naming
    it), then each batch staged (staged_query_rows.CheckpointStaging) with
    its `StagedEpochPublication`."""

    STAGED_DIR = STAGED_DIR

    def prepare(self, sinks):
        for sink in sinks:
            sink_id, _ = self._where(sink, 0)
            transactions.publisher_for(decode_payload(sink.payload), sink_id).published_through()

    def publication(self, sink, sink_id, batch_id, relative):
        coder = context.components_context(self._components).coders[sink.coder_id]
        config = decode_payload(sink.payload)
        return StagedEpochPublication(config, sink_id, batch_id, self._files.root, relative, coder)


runner_io_glue.register_micro_batch_staging(WRITE_KAFKA_URN, MicroBatchStaging.of_query)


@dataclasses.dataclass(frozen=True)
class StagedEpochPublication(SinkCommit):
    """Publishes the records a streaming sink staged for one batch under the
    checkpoint (`root`, `relative`) as epoch `epoch`, exactly once
    (`EpochPublisher`), then removes them. Run again after a restart that
    interrupted it: the sink's marker says the epoch is published, and only
    the removal is done again. Raises KafkaPublishError naming the sink and
    the broker when Kafka refuses, leaving the staged records for the next
    call."""

    config: KafkaWriteConfig
    sink: str
    epoch: int
    root: str
    relative: str
    coder: Any

    def commit(self, context):
        files = context.open_files(self.root)
        records = staged_query_rows.staged_values(files, self.relative, self.config.label, self.coder)
        transactions.publisher_for(self.config, self.sink).publish(self.epoch, records)
        files.delete(self.relative)
