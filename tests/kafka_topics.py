"""Kafka topics of the tests, with a client of their own (confluent-kafka):
what a read_committed (or read_uncommitted) consumer sees of a topic."""

import contextlib
import time
import uuid


@contextlib.contextmanager
def created_topic(servers, prefix, partitions):
    """A new topic named `prefix` and a random suffix, of `partitions`
    partitions, deleted afterwards."""
    from confluent_kafka.admin import AdminClient, NewTopic

    name = prefix + uuid.uuid4().hex[:10]
    admin = AdminClient({"bootstrap.servers": servers})
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[name].result(30)
    try:
        yield name
    finally:
        admin.delete_topics([name])[name].result(30)


def committed_values(servers, topic, committed=True, settle_s=3.0):
    """Every record value of `topic`, sorted, as a consumer with
    isolation.level read_committed (or read_uncommitted) sees it, from the
    beginning to each partition's end (once no transaction is open there;
    else what it saw within `settle_s`)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": "check-" + uuid.uuid4().hex,
            "enable.auto.commit": False,
            "isolation.level": "read_committed" if committed else "read_uncommitted",
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        ends = {}
        for p in partitions:
            _, end = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
            if end > 0:
                ends[p] = end
        if not ends:
            return []
        consumer.assign([TopicPartition(topic, p, 0) for p in ends])
        values, deadline = [], time.time() + settle_s
        while time.time() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value())
            if all(
                tp.offset >= ends[tp.partition] for tp in consumer.position([TopicPartition(topic, p) for p in ends])
            ):
                break
        return sorted(values)
    finally:
        consumer.close()
