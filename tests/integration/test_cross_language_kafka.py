"""Beam's cross-language Kafka transforms (apache_beam.io.kafka), with their
API unchanged, on SparkRunner: expanded by the runner's Java expansion
service, their Java stages run by Beam's Java SDK harness beside Spark's
Python workers, against the real broker the services script starts."""

import collections
import time
import typing
import uuid

import apache_beam as beam
import pytest
from apache_beam.io.kafka import ReadFromKafka, WriteToKafka
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.runner import PipelineState
from apache_beam.testing.util import assert_that, equal_to

from beam_spark_runner import SparkRunner, describe_plan
from beam_spark_runner.io import WriteToDatabase
from tests import services

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(autouse=True)
def kafka(request):
    return services.require(request, services.KAFKA)


def _options():
    return PipelineOptions(["--spark_master=local[2,4]"])


def _consume_all(topic, expected):
    """Every message of `topic` (key, value), read with a Kafka client of
    our own, committed transactions only."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": services.KAFKA,
            "group.id": "check-" + uuid.uuid4().hex,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=30)
        partitions = [TopicPartition(topic, p, 0) for p in metadata.topics[topic].partitions]
        consumer.assign(partitions)
        messages = []
        idle = 0
        while idle < 5:
            message = consumer.poll(1.0)
            if message is None:
                idle = idle + 1 if len(messages) >= expected else 0
                continue
            assert message.error() is None, message.error()
            messages.append((message.key(), message.value()))
        return messages
    finally:
        consumer.close()


def _produce(topic, records):
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": services.KAFKA})
    for key, value in records:
        producer.produce(topic, key=key, value=value)
    assert producer.flush(30) == 0


def test_write_to_kafka_publishes_every_record_once():
    topic = "xlang-write-" + uuid.uuid4().hex[:8]
    records = [(b"user-%d" % (i % 7), b"event-%d" % i) for i in range(500)]
    with beam.Pipeline(runner=SparkRunner(), options=_options()) as p:
        (
            p
            | beam.Create(records).with_output_types(tuple[bytes, bytes])
            | WriteToKafka(producer_config={"bootstrap.servers": services.KAFKA}, topic=topic)
        )
    assert sorted(_consume_all(topic, len(records))) == sorted(records)


def test_read_from_kafka_counts_every_message_once_in_python():
    topic = "xlang-read-" + uuid.uuid4().hex[:8]
    records = [(b"k%d" % (i % 5), b"%d" % i) for i in range(300)]
    _produce(topic, records)
    expected = collections.Counter(k.decode() for k, _ in records)
    with beam.Pipeline(runner=SparkRunner(), options=_options()) as p:
        counts = (
            p
            | ReadFromKafka(
                consumer_config={"bootstrap.servers": services.KAFKA, "auto.offset.reset": "earliest"},
                topics=[topic],
                max_num_records=len(records),
            )
            | beam.Map(lambda kv: (kv[0].decode(), 1))
            | beam.CombinePerKey(sum)
        )
        assert_that(counts, equal_to(sorted(expected.items())))


class WindowCount(typing.NamedTuple):
    key: str
    window_start: int
    n: int


def _create_topic(topic, partitions):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": services.KAFKA})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(30)


def test_a_streaming_read_from_kafka_counts_every_message_once_per_window(postgresql_url):
    """KafkaIO's unbounded read (a Java splittable DoFn) in a streaming
    pipeline: messages produced before and while it runs, over two
    partitions, counted per key in 10-second event-time windows (the
    messages' create times) into a table keyed by (key, window_start):
    every window's count once. Then it is drained: KafkaIO's restrictions
    are truncated by its own Java code, in the JVM (to nothing: they are
    unbounded), the read ends and the run ends DRAINED, each count still
    once."""
    topic, table = "xlang-stream-" + uuid.uuid4().hex[:8], services.unique_table()
    _create_topic(topic, 2)
    base_ms = (int(time.time()) - 600) // 10 * 10 * 1000  # recent: KafkaIO's idle watermark follows the clock
    records = [("k%d" % (i % 3), base_ms + i * 1000) for i in range(120)]

    def produce(part):
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": services.KAFKA})
        for i, (key, ts) in enumerate(part):
            # Both partitions get messages: KafkaIO's create-time watermark
            # of a partition that never had one stays at its start.
            producer.produce(topic, key=key.encode(), value=b"1", timestamp=ts, partition=i % 2)
        assert producer.flush(30) == 0

    produce(records[:60])
    p = beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(["--spark_master=local[2,4]", "--streaming"]))
    _ = (
        p
        | ReadFromKafka(
            consumer_config={"bootstrap.servers": services.KAFKA, "auto.offset.reset": "earliest"},
            topics=[topic],
            timestamp_policy=ReadFromKafka.create_time_policy,
        )
        | beam.Map(lambda kv: (kv[0].decode(), 1))
        | beam.WindowInto(beam.window.FixedWindows(10))
        | beam.CombinePerKey(sum)
        | beam.ParDo(_AsWindowCount()).with_output_types(WindowCount)
        | WriteToDatabase(postgresql_url, table, key_columns=["key", "window_start"])
    )
    expected = collections.Counter((key, ts // 1000 // 10 * 10) for key, ts in records)
    result = p.run()
    try:
        produce(records[60:])
        services.wait_for_rows(postgresql_url, table, len(expected), result)
        time.sleep(3)  # a window counted twice would show as a changed count
        assert result.drain() == PipelineState.DRAINING
        assert result.wait_until_finish(300 * 1000) == PipelineState.DRAINED
    finally:
        if not PipelineState.is_terminal(result.state):
            result.cancel()
    try:
        rows = services.execute(postgresql_url, "SELECT key, window_start, n FROM %s" % table)
        assert sorted(map(tuple, rows)) == sorted((k, w, n) for (k, w), n in expected.items())
    finally:
        services.drop_table(postgresql_url, table)


class _AsWindowCount(beam.DoFn):
    def process(self, element, window=beam.DoFn.WindowParam):
        yield WindowCount(element[0], int(window.start), element[1])


def test_the_plan_names_each_stages_environment():
    p = beam.Pipeline(runner=SparkRunner(), options=_options())
    (
        p
        | ReadFromKafka(consumer_config={"bootstrap.servers": services.KAFKA}, topics=["never-read"], max_num_records=1)
        | "Decode" >> beam.Map(lambda kv: kv[1].decode())
    )
    plan = describe_plan(p)
    java_lines = [line for line in plan.splitlines() if line.strip().startswith("environment java")]
    assert java_lines, plan
    assert "apache/beam_java" in java_lines[0]
    # The Python step is a stage of its own, in the Python SDK.
    decode_stage = [block for block in plan.split("Stage ") if "runs   Decode" in block]
    assert decode_stage and "environment java" not in decode_stage[0], plan


def test_a_broker_that_is_down_fails_the_run_with_kafkas_error():
    from beam_spark_runner.result import PipelineExecutionError

    p = beam.Pipeline(runner=SparkRunner(), options=_options())
    (
        p
        | ReadFromKafka(
            # Nothing listens on port 1; Kafka's client gives up after 1 s.
            consumer_config={"bootstrap.servers": "127.0.0.1:1", "default.api.timeout.ms": "1000"},
            topics=["unreachable"],
            max_num_records=10,
        )
        | beam.Map(lambda kv: kv)
    )
    result = p.run()
    with pytest.raises(PipelineExecutionError, match="Timeout expired while fetching topic metadata"):
        result.wait_until_finish()
    assert result.state == "FAILED"
