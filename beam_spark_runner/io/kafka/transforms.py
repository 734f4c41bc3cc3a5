"""`WriteToKafka`: a Kafka topic as an exactly-once sink (docs/io.md,
"Kafka"), on this runner only (another runner refuses its URN).

It expands to a check of each element (a `(key, value)` pair of bytes,
the key may be None; anything else fails the stage naming the transform
and the element's types, before anything is staged) and the runner's
write primitive (io/kafka/planning.py), which publishes in Kafka
transactions (io/kafka/transactions.py).
"""

import typing

import apache_beam as beam

from beam_spark_runner.errors import UnsupportedPipelineError
from beam_spark_runner.io.kafka.config import write_config
from beam_spark_runner.io.kafka.planning import KafkaWrite
from triggers.driver import RETRACTING

KafkaRecord = typing.Tuple[typing.Optional[bytes], bytes]


class WriteToKafka(beam.PTransform):
    """Publishes `(key, value)` pairs (bytes; a None key lets the producer
    pick the partition) into Kafka `topic` exactly once, as Beam's
    `apache_beam.io.kafka.WriteToKafka` takes them, through a producer with
    `producer_config` (librdkafka's settings; `bootstrap.servers` required;
    the sink sets `transactional.id` and idempotence itself). A
    `read_committed` consumer sees each record once: in batch every record
    appears when the job succeeds (one transaction), none if it fails; in
    streaming each micro-batch's records appear in one transaction once the
    batch is a completed checkpoint, also across driver restarts with the
    same `--checkpoint_dir`. RETRACTING input is refused. The records'
    timestamps are the producer's. The output is the topic's name."""

    def __init__(self, producer_config, topic):
        super().__init__()
        self._config = write_config(producer_config, topic)  # ValueError naming what is wrong

    def expand(self, pcoll):
        config = self._config
        if pcoll.windowing.accumulation_mode == RETRACTING:
            raise UnsupportedPipelineError(
                "%s: its input has RETRACTING panes, and a record published into Kafka cannot be retracted: "
                "use DISCARDING or ACCUMULATING panes" % config.label
            )
        records = pcoll | "Records" >> beam.Map(_checked_record, config.label).with_output_types(KafkaRecord)
        return records | KafkaWrite(config)


def _checked_record(element, label):
    """`element` as a (key, value) record, or TypeError naming the sink."""
    if isinstance(element, tuple) and len(element) == 2:
        key, value = element
        if (key is None or isinstance(key, bytes)) and isinstance(value, bytes):
            return element
        raise TypeError(
            "%s: a record's key must be bytes or None and its value bytes, got (%s, %s)"
            % (label, type(key).__name__, type(value).__name__)
        )
    raise TypeError("%s: elements must be (key, value) pairs of bytes, got a %s" % (label, type(element).__name__))
