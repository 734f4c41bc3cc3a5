"""The pipeline test_spark_io_faults kills and restarts: one branch per
(SOURCE, OUT) pair, each reading SOURCE, counting per user in fixed
10-second windows and writing OUT. SOURCE is a JSON directory read with
`ReadFromSpark`, a Redis stream read with `ReadFromRedisStreams`
(`redis://...#STREAM`), a NATS JetStream stream read with `ReadFromNats`
(`nats://...#STREAM`) or a Kafka topic read with `ReadFromSpark(format=
"kafka")` (`kafka://HOST:PORT#TOPIC`: Spark's own connector, its jars named
by $BEAM_SPARK_TEST_SPARK_JARS), event time from the data every way; OUT is a
directory `WriteToSpark` writes Parquet into, a table `WriteToDatabase`
writes (`URL#TABLE`), a Kafka topic `WriteToKafka` publishes each total
into exactly once as JSON [user, window_start, total] keyed by its user
(`kafka-eos://HOST:PORT#TOPIC`), or a directory the test-only connector
tests/toy_connector.py writes JSON lines into (`lines://DIR`); a SOURCE
`lines://FILE` is a file of JSON lines that connector reads. Run as a script, in its own process group (the test
SIGKILLs the group: this driver and its Spark JVM):

    python spark_io_pipeline.py CHECKPOINT SOURCE OUT [SOURCE OUT ...]

It runs until killed: the test appends to every SOURCE between kills, and
ends the last run once every OUT is complete.
"""

import json
import os
import sys

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import window

from tests.window_totals import Total, WindowTotal

SCHEMA = "user string, score long, ts timestamp"
WINDOW_S = 10


def _user_and_score(message):
    """A NATS message's payload: JSON [user, score]."""
    user, score = json.loads(message.data)
    return user, score


def _kafka_user_and_score(row):
    """A Kafka message's value: JSON [user, score]."""
    user, score = json.loads(row.value)
    return user, score


def _kafka_record(total):
    return total.user.encode(), json.dumps([total.user, total.window_start, total.total]).encode()


class _Branch(beam.PTransform):
    """SOURCE -> windowed sum per user -> OUT."""

    def __init__(self, source, out):
        super().__init__()
        self._source, self._out = source, out

    def expand(self, pbegin):
        from beam_spark_runner.io import (
            ReadFromNats,
            ReadFromRedisStreams,
            ReadFromSpark,
            WriteToDatabase,
            WriteToSpark,
        )

        source, out = self._source, self._out
        if source.startswith("redis://"):
            url, stream = source.split("#")
            scores = (
                pbegin
                | "Read" >> ReadFromRedisStreams(url, stream, timestamp_field="ts", poll_interval=0.2)
                | beam.Map(lambda e: (e.fields["user"], int(e.fields["score"])))
            )
        elif source.startswith("nats://"):
            url, stream = source.split("#")
            scores = (
                pbegin
                | "Read" >> ReadFromNats(url, stream, timestamp_header="ts", poll_interval=0.2)
                | beam.Map(_user_and_score)
            )
        elif source.startswith("lines://"):
            from tests.toy_connector import ReadLines

            scores = (
                pbegin
                | "Read" >> ReadLines(source[len("lines://") :], timestamp_field="ts")
                | beam.Map(lambda v: (v["user"], v["score"]))
            )
        elif source.startswith("kafka://"):
            servers, topic = source[len("kafka://") :].split("#")
            scores = (
                pbegin
                | "Read"
                >> ReadFromSpark(
                    format="kafka",
                    options={"kafka.bootstrap.servers": servers, "subscribe": topic, "startingOffsets": "earliest"},
                    timestamp_column="timestamp",  # the producer sets each message's to its event time
                )
                | beam.Map(_kafka_user_and_score)
            )
        else:
            scores = (
                pbegin
                | "Read" >> ReadFromSpark(format="json", path=source, schema=SCHEMA, timestamp_column="ts")
                | beam.Map(lambda r: (r.user, r.score))
            )
        if out.startswith("lines://"):
            from tests.toy_connector import WriteLines

            write = WriteLines(out[len("lines://") :])
        elif out.startswith("kafka-eos://"):
            from beam_spark_runner.io import WriteToKafka

            servers, topic = out[len("kafka-eos://") :].split("#")
            write = beam.Map(_kafka_record) | WriteToKafka({"bootstrap.servers": servers}, topic)
        elif "#" in out:
            write = WriteToDatabase(*out.split("#"))
        else:
            write = WriteToSpark(format="parquet", path=out)
        return (
            scores
            | beam.WindowInto(window.FixedWindows(WINDOW_S))
            | beam.CombinePerKey(sum)
            | beam.ParDo(WindowTotal()).with_output_types(Total)
            | "Write" >> write
        )


def main(checkpoint, *ends):
    flags = ["--runner=beam_spark_runner.SparkRunner", "--streaming", "--checkpoint_dir=%s" % checkpoint]
    if os.environ.get("BEAM_SPARK_TEST_SPARK_JARS"):
        flags.append("--spark_conf=spark.jars=%s" % os.environ["BEAM_SPARK_TEST_SPARK_JARS"])
    options = PipelineOptions(flags)
    p = beam.Pipeline(options=options)
    for i in range(0, len(ends), 2):
        _ = p | "Branch%d" % (i // 2) >> _Branch(ends[i], ends[i + 1])
    p.run().wait_until_finish()


if __name__ == "__main__":
    main(*sys.argv[1:])
