"""What a `WriteToKafka` is, as its pipeline carries it: `KafkaWriteConfig`
(pickled into the runner primitive's payload, and with the commits of a
streaming checkpoint), checked when the pipeline is built."""

import dataclasses
from typing import Dict, Tuple

# The producer settings the sink sets itself: each publication is one
# Kafka transaction of the sink's own transactional id.
SINK_OWNED = ("transactional.id", "enable.idempotence", "transactional.id.prefix")
# Librdkafka's default (60 s) bounds a whole transaction; a batch job's
# publication is one transaction, so the sink asks for the broker's
# default maximum (`transaction.max.timeout.ms`, 15 minutes).
DEFAULT_TRANSACTION_TIMEOUT_MS = 900_000
FORMAT_VERSION = 1


@dataclasses.dataclass(frozen=True)
class KafkaWriteConfig:
    """One WriteToKafka: records to `topic` through a producer with
    `producer_config` (librdkafka's settings, `bootstrap.servers` among
    them), as `(key, value)` pairs. `label`: the user's name for it in
    messages."""

    topic: str
    producer_config: Tuple[Tuple[str, str], ...]
    label: str
    format_version: int = FORMAT_VERSION

    @property
    def servers(self) -> str:
        return dict(self.producer_config)["bootstrap.servers"]

    def producer_settings(self) -> Dict[str, str]:
        settings = {"transaction.timeout.ms": str(DEFAULT_TRANSACTION_TIMEOUT_MS)}
        settings.update(self.producer_config)
        return settings


def write_config(producer_config, topic) -> KafkaWriteConfig:
    """The config of a WriteToKafka, or ValueError naming what is wrong:
    no `bootstrap.servers`, a setting the sink owns, an empty topic."""
    label = "WriteToKafka(%s)" % topic
    if not isinstance(topic, str) or not topic:
        raise ValueError("WriteToKafka: topic must be a topic name, got %r" % (topic,))
    if not isinstance(producer_config, dict) or not producer_config.get("bootstrap.servers"):
        raise ValueError("%s: producer_config must be a dict with bootstrap.servers, got %r" % (label, producer_config))
    owned = sorted(k for k in producer_config if k in SINK_OWNED)
    if owned:
        raise ValueError(
            "%s: producer_config sets %s, which the sink sets itself (each publication is one Kafka "
            "transaction of the sink's own transactional id)" % (label, ", ".join(owned))
        )
    pairs = tuple(sorted((str(k), str(v)) for k, v in producer_config.items()))
    return KafkaWriteConfig(topic, pairs, "%s at %s" % (label, producer_config["bootstrap.servers"]))
