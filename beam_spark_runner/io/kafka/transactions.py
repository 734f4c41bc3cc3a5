"""Publishing a sink's epochs into Kafka exactly once, with Kafka's
transactions (no Spark here; io/kafka/spark_glue.py calls it on the
driver).

An epoch (a micro-batch) is published by `EpochPublisher.publish(epoch,
records)` in ONE transaction of the sink's own transactional id, and the
same transaction commits the epoch as the offset of the sink's marker
group (`marker_group`) on the topic's partition 0 (Kafka's
`sendOffsetsToTransaction`, the mechanism of its consume-transform-produce
loops): the records and the marker become visible together, to a
`read_committed` consumer, or not at all. Before each transaction the
publisher reads the marker, so an epoch already published is not
published again. A publisher is created with `init_transactions`, which
ends whatever transaction an earlier producer of the same transactional
id left open: one the driver was killed in before it committed is
aborted, one whose commit had begun completes; only then is the marker
read. Hence, with the checkpoint coordinator calling a publication at
least once per epoch, in ascending epoch order (an interrupted one again
after a restart), each record is published once.

A batch job's publication (`publish_once`) is one transaction without a
marker: the job's records appear together when it succeeds, none if it
fails.
"""

import logging
import threading
from typing import Dict, Iterable, Optional, Tuple

from beam_spark_runner.io.kafka.config import KafkaWriteConfig

_LOG = logging.getLogger(__name__)
# Seconds a call to the broker may take (init, offsets, commit, flush)
# before the publication fails naming the broker.
BROKER_TIMEOUT_S = 60.0
NO_EPOCH = -1  # the marker of a sink that published nothing yet
_UNSET_OFFSET = -1001  # librdkafka's OFFSET_INVALID: no committed offset


class KafkaPublishError(RuntimeError):
    """A publication failed; nothing of it is visible to a read_committed
    consumer, and the next call publishes it again."""


def transactional_id(sink_id: str) -> str:
    """The transactional id of a streaming sink (`sink_id`: the same for
    every restart of its checkpoint)."""
    return "beam-spark-runner-%s" % sink_id


def marker_group(sink_id: str) -> str:
    """The consumer group whose offset on the topic's partition 0 is the
    sink's last published epoch + 1."""
    return "beam-spark-runner-sink-%s" % sink_id


Record = Tuple[Optional[bytes], bytes]


class EpochPublisher:
    """Publishes the epochs of one sink (`config`, `sink_id`), each once.
    Thread-safe; one per process and sink (`publisher_for`)."""

    def __init__(self, config: KafkaWriteConfig, sink_id: str, timeout_s: float = BROKER_TIMEOUT_S):
        self._config = config
        self._sink_id = sink_id
        self._timeout = timeout_s
        self._lock = threading.Lock()
        self._producer = None
        self._marker = None  # a consumer of the marker group (never subscribed)

    def published_through(self) -> int:
        """The last epoch published (NO_EPOCH: none)."""
        with self._lock:
            return self._call("reading the published epoch", lambda: (self._ready(), self._last_epoch())[1])

    def publish(self, epoch: int, records: Iterable[Record]) -> bool:
        """Publishes `records` as epoch `epoch` unless it (or a later epoch)
        is already published; returns whether it published. Raises
        KafkaPublishError naming the sink and the broker when Kafka refuses
        or does not answer; nothing of the epoch is then visible."""
        with self._lock:
            return self._call("publishing batch %d" % epoch, lambda: self._publish(epoch, records))

    def _publish(self, epoch, records):
        from confluent_kafka import TopicPartition

        producer = self._ready()
        last = self._last_epoch()
        if last >= epoch:
            _LOG.info("%s: batch %d is already published (through batch %d)", self._config.label, epoch, last)
            return False
        producer.begin_transaction()
        produce(producer, self._config.topic, records)
        marker = [TopicPartition(self._config.topic, 0, epoch + 1)]
        producer.send_offsets_to_transaction(marker, self._marker.consumer_group_metadata(), self._timeout)
        producer.commit_transaction(self._timeout)
        return True

    def _ready(self):
        from confluent_kafka import Consumer

        if self._producer is None:
            settings = self._config.producer_settings()
            settings["transactional.id"] = transactional_id(self._sink_id)
            producer = new_producer(self._config, settings)
            # Ends the transaction an earlier producer of this id left open
            # (aborted, or completed if its commit had begun), so the
            # marker read next is final.
            producer.init_transactions(self._timeout)
            self._producer = producer
        if self._marker is None:
            servers = self._config.servers
            self._marker = Consumer(
                {
                    "bootstrap.servers": servers,
                    "group.id": marker_group(self._sink_id),
                    "enable.auto.commit": False,
                    "isolation.level": "read_committed",
                }
            )
        return self._producer

    def _last_epoch(self) -> int:
        from confluent_kafka import TopicPartition

        (committed,) = self._marker.committed([TopicPartition(self._config.topic, 0)], self._timeout)
        if committed.error is not None:
            raise RuntimeError(str(committed.error))
        return NO_EPOCH if committed.offset == _UNSET_OFFSET else committed.offset - 1

    def _call(self, what, action):
        try:
            return action()
        except Exception as e:  # noqa: BLE001 -- every failure of the client is the publication's
            self._reset()
            raise KafkaPublishError(
                "%s: %s into topic %s failed (Kafka at %s, transactional id %s): %s"
                % (
                    self._config.label,
                    what,
                    self._config.topic,
                    self._config.servers,
                    transactional_id(self._sink_id),
                    e,
                )
            ) from e

    def _reset(self):
        """Drops the producer after a failure: its transaction's state is not
        known; the next call's `init_transactions` ends it."""
        producer, self._producer = self._producer, None
        if producer is not None:
            try:
                producer.abort_transaction(1.0)
            except Exception:  # noqa: BLE001 -- none open, or the broker gone: init_transactions ends it
                pass

    def close(self):
        with self._lock:
            self._reset()
            if self._marker is not None:
                self._marker.close()
                self._marker = None


def new_producer(config: KafkaWriteConfig, settings: Dict[str, str]):
    """A confluent-kafka Producer; a setting librdkafka refuses raises
    ValueError naming the sink and the setting."""
    from confluent_kafka import KafkaException, Producer

    try:
        return Producer(settings)
    except KafkaException as e:
        raise ValueError("%s: producer_config refused: %s" % (config.label, e.args[0].str())) from None


def produce(producer, topic: str, records: Iterable[Record]) -> int:
    """Hands every record to `producer` (waiting while its queue is full);
    returns how many. Delivery errors surface at the transaction's commit."""
    count = 0
    for key, value in records:
        while True:
            try:
                producer.produce(topic, value=value, key=key)
                break
            except BufferError:
                producer.poll(0.1)  # the local queue is full: let it drain
        count += 1
        if count % 10_000 == 0:
            producer.poll(0)
    return count


def publish_once(config: KafkaWriteConfig, records: Iterable[Record], name: str, timeout_s=BROKER_TIMEOUT_S) -> int:
    """A batch job's publication: every record in one transaction of a
    transactional id of its own (`name`); returns how many. On any failure
    the transaction is aborted and KafkaPublishError raised, naming the
    sink and the broker."""
    settings = config.producer_settings()
    settings["transactional.id"] = transactional_id(name)
    producer = new_producer(config, settings)
    try:
        producer.init_transactions(timeout_s)
        producer.begin_transaction()
        count = produce(producer, config.topic, records)
        producer.commit_transaction(timeout_s)
        return count
    except Exception as e:  # noqa: BLE001 -- records' errors and Kafka's alike end the transaction
        try:
            producer.abort_transaction(timeout_s)
        except Exception:  # noqa: BLE001 -- never begun, or the broker gone: it times out unseen
            pass
        if isinstance(e, KafkaPublishError) or not _is_kafka_error(e):
            raise
        raise KafkaPublishError(
            "%s: publishing into topic %s failed (Kafka at %s): %s" % (config.label, config.topic, config.servers, e)
        ) from e


def _is_kafka_error(e) -> bool:
    from confluent_kafka import KafkaException

    return isinstance(e, KafkaException)


_PUBLISHERS: Dict[Tuple[KafkaWriteConfig, str], EpochPublisher] = {}
_PUBLISHERS_LOCK = threading.Lock()


def publisher_for(config: KafkaWriteConfig, sink_id: str) -> EpochPublisher:
    """This process's publisher of the sink (one producer per transactional
    id: a second one would fence the first)."""
    with _PUBLISHERS_LOCK:
        publisher = _PUBLISHERS.get((config, sink_id))
        if publisher is None:
            publisher = _PUBLISHERS[(config, sink_id)] = EpochPublisher(config, sink_id)
        return publisher
