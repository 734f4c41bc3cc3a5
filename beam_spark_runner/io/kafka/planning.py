"""Kafka writes as a runner primitive: what `beam_spark_runner.io.WriteToKafka`
expands to, and what the runner runs for it (io/kafka/spark_glue.py: a
batch stage, and the staging of a streaming query's micro-batches).

`WRITE_KAFKA_URN`: (key, value) records published into a Kafka topic
exactly once (io/kafka/transactions.py); its output is the topic written.
The payload is the pickled `io/kafka/config.KafkaWriteConfig`.
"""

from beam_spark_runner.io.spark.planning import SparkWrite, decode_payload
from beam_spark_runner.translation import runner_io
from triggers.driver import RETRACTING

WRITE_KAFKA_URN = "beam_spark_runner:transform:write_kafka:v1"


class KafkaWrite(SparkWrite):
    """The write primitive (its config a KafkaWriteConfig); its output is
    the topic written."""

    urn = WRITE_KAFKA_URN


def _check_write(name, transform, pipeline, streaming):
    """A published record cannot be taken back: RETRACTING panes are refused."""
    strategies = runner_io.input_windowing_strategies(transform, pipeline)
    if any(s.accumulation_mode == RETRACTING for s in strategies):
        return [
            "%s: its input has RETRACTING panes, and a record published into Kafka cannot be retracted: "
            "use DISCARDING or ACCUMULATING panes" % name
        ]
    return []


runner_io.register(
    runner_io.RunnerIO(
        WRITE_KAFKA_URN, runner_io.IORole.SINK, lambda payload: decode_payload(payload).label, check=_check_write
    )
)
