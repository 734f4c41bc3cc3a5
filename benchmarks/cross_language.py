"""Cross-language transforms on this runner, against the machine's Kafka
broker (tools/services.sh up kafka):

- `kafka_read` (the headline): messages/s of `--messages` Kafka messages
  (1,000 keys, one partition) counted per key by a batch pipeline
  ReadFromKafka (Beam's cross-language KafkaIO, in Beam's Java SDK
  harness) -> CombinePerKey(sum) -> WriteToText, timed from `run()` to
  its end after a warm-up run (so the harness JVMs and the expansion are
  warm, as in a long-lived session), against a Kafka client of our own
  (confluent-kafka) counting the same messages per key in this process.
  The pipeline's counts are checked against the messages produced.
  Target >= 0.5.
- `boundary`: `--elements` rows through Python -> a Java step -> Python
  (SqlTransform's `SELECT * FROM PCOLLECTION`, a projection in Java)
  against the same pipeline with a Python identity step instead; the
  ratio of the two runs' times and the extra microseconds per element
  (reported).
- `harness_start`: seconds from launching Beam's Java SDK harness to its
  control stream opening, as each Python worker of an executor pays once
  (median of 3; reported).

    .venv/bin/python benchmarks/cross_language.py
    .venv/bin/python benchmarks/cross_language.py --messages 200000
"""

import argparse
import collections
import glob
import os
import statistics
import sys
import tempfile
import time
import typing
import uuid

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import apache_beam as beam  # noqa: E402
from apache_beam.options.pipeline_options import PipelineOptions  # noqa: E402

from benchmarks.headline import headline  # noqa: E402

KAFKA = os.environ.get("BEAM_SPARK_TEST_KAFKA") or "127.0.0.1:9092"
KEYS = 1000


class Item(typing.NamedTuple):
    id: int
    name: str


beam.coders.registry.register_coder(Item, beam.coders.RowCoder)


def _options():
    return PipelineOptions(["--runner=beam_spark_runner.SparkRunner", "--spark_master=local[2]"])


def produce(topic, messages):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": KAFKA})
    for future in admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": KAFKA, "linger.ms": 20, "batch.num.messages": 10000})
    expected = collections.Counter()
    for i in range(messages):
        key = b"key-%d" % (i % KEYS)
        expected[key.decode()] += 1
        while True:
            try:
                producer.produce(topic, key=key, value=b"value-%08d" % i)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(60) == 0
    return expected


def consume(topic, messages):
    """(seconds, counts): our own client counting `messages` per key."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": KAFKA, "group.id": "bench-" + uuid.uuid4().hex, "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in (0,)])
    counts = collections.Counter()
    seen = 0
    start = time.perf_counter()
    while seen < messages:
        for message in consumer.consume(10000, 1.0):
            if message.error() is None:
                counts[message.key().decode()] += 1
                seen += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    return elapsed, counts


def read_with_beam(topic, messages):
    """(seconds, counts) of the cross-language pipeline."""
    from apache_beam.io.kafka import ReadFromKafka

    out = tempfile.mkdtemp(prefix="bench-xlang-")
    p = beam.Pipeline(options=_options())
    (
        p
        | ReadFromKafka(
            consumer_config={"bootstrap.servers": KAFKA, "auto.offset.reset": "earliest"},
            topics=[topic],
            max_num_records=messages,
        )
        | beam.Map(lambda kv: (kv[0].decode(), 1))
        | beam.CombinePerKey(sum)
        | beam.MapTuple(lambda key, n: "%s\t%d" % (key, n))
        | beam.io.WriteToText(os.path.join(out, "counts"))
    )
    start = time.perf_counter()
    p.run().wait_until_finish()
    elapsed = time.perf_counter() - start
    counts = collections.Counter()
    for path in glob.glob(os.path.join(out, "counts*")):
        with open(path) as f:
            for line in f:
                key, n = line.rstrip("\n").split("\t")
                counts[key] += int(n)
    return elapsed, counts


def boundary(elements, java):
    """Seconds of Create -> Python -> (Java or Python) step -> Python count."""
    from apache_beam.transforms.sql import SqlTransform

    p = beam.Pipeline(options=_options())
    items = (
        p
        | beam.Create(list(range(elements)), reshuffle=False)
        | "Items" >> beam.Map(lambda i: Item(i, "n%d" % (i % 97))).with_output_types(Item)
    )
    step = SqlTransform("SELECT * FROM PCOLLECTION") if java else beam.Map(lambda r: r).with_output_types(Item)
    (
        items
        | "Step" >> step
        | "Digit" >> beam.Map(lambda r: r.id % 10)
        | beam.combiners.Count.PerElement()
        | "Drop" >> beam.Map(lambda kv: None)
    )
    start = time.perf_counter()
    p.run().wait_until_finish()
    return time.perf_counter() - start


def harness_start():
    from beam_spark_runner.cross_language.java_sdk import BEAM_JAVA_VERSION, harness_jars
    from beam_spark_runner.maven_jars import resolve
    from beam_spark_runner.worker.java_harness import JavaWorker

    classpath = resolve(harness_jars(BEAM_JAVA_VERSION))
    times = []
    for _ in range(3):
        start = time.perf_counter()
        worker = JavaWorker(classpath)
        times.append(time.perf_counter() - start)
        worker.close()
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=500_000)
    parser.add_argument("--elements", type=int, default=200_000)
    args = parser.parse_args()

    warm = "bench-warm-" + uuid.uuid4().hex[:8]
    produce(warm, 2000)
    read_with_beam(warm, 2000)

    topic = "bench-xlang-" + uuid.uuid4().hex[:8]
    expected = produce(topic, args.messages)
    consumer_s, consumer_counts = consume(topic, args.messages)
    beam_s, beam_counts = read_with_beam(topic, args.messages)
    ok = consumer_counts == expected and beam_counts == expected
    print(
        "kafka_read: %d messages; consumer %.2f s (%.0f msg/s), ReadFromKafka pipeline %.2f s (%.0f msg/s); counts %s"
        % (
            args.messages,
            consumer_s,
            args.messages / consumer_s,
            beam_s,
            args.messages / beam_s,
            "match" if ok else "DIFFER",
        ),
        flush=True,
    )

    boundary(1000, True)  # warm: the SQL expansion service's jars and JVMs
    python_s = boundary(args.elements, False)
    java_s = boundary(args.elements, True)
    print(
        "boundary: %d elements; Python step %.2f s, Java step %.2f s: ratio %.2f, %.1f us more per element"
        % (args.elements, python_s, java_s, java_s / python_s, (java_s - python_s) / args.elements * 1e6),
        flush=True,
    )
    print("harness_start: %.2f s (median of 3)" % harness_start(), flush=True)
    headline("cross_language_kafka", consumer_s / beam_s, 0.5, at_most=False, results_ok=ok)


if __name__ == "__main__":
    main()
