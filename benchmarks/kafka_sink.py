"""The runner's exactly-once Kafka sink (`beam_spark_runner.io.WriteToKafka`)
against the machine's Kafka broker (tools/services.sh up kafka):

- `kafka_sink` (the headline): records/s of `--records` records (100-byte
  values, 1,000 keys, a topic of two partitions) published by a batch
  pipeline Create -> WriteToKafka, timed from `run()` to its end after a
  warm-up run, against a transactional confluent-kafka producer of our own
  making and publishing the same records in one transaction from this
  process. What
  the pipeline published is read back by a read_committed consumer and
  checked (every record once). Target >= 0.5.

    .venv/bin/python benchmarks/kafka_sink.py
    .venv/bin/python benchmarks/kafka_sink.py --records 2000000
"""

import argparse
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import apache_beam as beam  # noqa: E402
from apache_beam.options.pipeline_options import PipelineOptions  # noqa: E402

from benchmarks.headline import headline  # noqa: E402

KAFKA = os.environ.get("BEAM_SPARK_TEST_KAFKA") or "127.0.0.1:9092"
KEYS = 1000
PARTITIONS = 2


def records(n):
    return [(b"key-%d" % (i % KEYS), b"%09d" % i + b"x" * 91) for i in range(n)]


def with_beam(topic, n):
    from beam_spark_runner import SparkRunner
    from beam_spark_runner.io import WriteToKafka

    p = beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(["--spark_master=local[2,4]"]))
    _ = (
        p
        | beam.Create(list(range(n)), reshuffle=False)
        | beam.Map(lambda i: (b"key-%d" % (i % KEYS), b"%09d" % i + b"x" * 91))
        | WriteToKafka({"bootstrap.servers": KAFKA}, topic)
    )
    started = time.perf_counter()
    p.run().wait_until_finish()
    return time.perf_counter() - started


def with_client(topic, n):
    from beam_spark_runner.io.kafka.config import write_config
    from beam_spark_runner.io.kafka.transactions import publish_once

    started = time.perf_counter()
    data = records(n)  # made here as the pipeline makes its own
    publish_once(write_config({"bootstrap.servers": KAFKA}, topic), data, "bench-" + uuid.uuid4().hex[:8])
    return time.perf_counter() - started


def published(topic, n):
    """The values a read_committed consumer sees in `topic`, as a sorted list."""
    from tests.kafka_topics import committed_values

    deadline = time.time() + 120
    values = committed_values(KAFKA, topic, settle_s=30)
    while len(values) < n and time.time() < deadline:
        values = committed_values(KAFKA, topic, settle_s=30)
    return values


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    args = parser.parse_args()
    n = args.records
    from tests.kafka_topics import created_topic

    with created_topic(KAFKA, "bench-warm-", PARTITIONS) as warm:
        with_beam(warm, 2000)
    with (
        created_topic(KAFKA, "bench-beam-", PARTITIONS) as beam_topic,
        created_topic(KAFKA, "bench-client-", PARTITIONS) as client_topic,
    ):
        beam_s = with_beam(beam_topic, n)
        client_s = with_client(client_topic, n)
        got = published(beam_topic, n)
    ok = got == sorted(v for _, v in records(n))
    print("WriteToKafka on this runner: %d records in %.2f s (%.0f records/s)" % (n, beam_s, n / beam_s))
    print("confluent-kafka, one transaction: %d records in %.2f s (%.0f records/s)" % (n, client_s, n / client_s))
    print("published records checked: %s" % ("every record once" if ok else "WRONG (%d read)" % len(got)))
    headline("kafka_sink", client_s / beam_s, 0.5, at_most=False, results_ok=ok)


if __name__ == "__main__":
    main()
