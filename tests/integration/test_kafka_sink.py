"""The runner's exactly-once Kafka sink (`beam_spark_runner.io.WriteToKafka`)
against the real broker the services script starts: its epoch publisher
when the process publishing is SIGKILLed mid-transaction and after a
commit, a publication repeated, a broker that cannot be reached; batch
jobs with a retried task and with a failing one; what it refuses when the
pipeline is built. (The streaming sink under driver kills is in
tests/faults/test_spark_io_faults.py.)"""

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import window

import triggers
from beam_spark_runner import SparkRunner
from beam_spark_runner.errors import UnsupportedPipelineError
from beam_spark_runner.io import WriteToKafka
from beam_spark_runner.io.kafka.config import write_config
from beam_spark_runner.io.kafka.transactions import NO_EPOCH, EpochPublisher, KafkaPublishError
from tests import kafka_topics, services

pytestmark = pytest.mark.timeout(600)
PARTITIONS = 2


@pytest.fixture
def topic(request):
    with kafka_topics.created_topic(services.require(request, services.KAFKA), "eos-", PARTITIONS) as name:
        yield name


def _values(topic, committed=True, settle_s=3.0):
    return kafka_topics.committed_values(services.KAFKA, topic, committed, settle_s)


def _records(prefix, n):
    return [(b"k%d" % (i % 5), b"%s-%d" % (prefix, i)) for i in range(n)]


# --- the epoch publisher ------------------------------------------------------


def test_an_epoch_published_again_is_not_published_twice(topic):
    config = write_config({"bootstrap.servers": services.KAFKA}, topic)
    sink = uuid.uuid4().hex[:12]
    first = EpochPublisher(config, sink)
    assert first.published_through() == NO_EPOCH
    assert first.publish(0, _records(b"e0", 50)) is True
    assert first.publish(0, _records(b"e0", 50)) is False
    first.close()
    # A new process's publisher (a restarted driver re-running the commit).
    second = EpochPublisher(config, sink)
    assert second.published_through() == 0
    assert second.publish(0, _records(b"e0", 50)) is False
    assert second.publish(1, _records(b"e1", 30)) is True
    second.close()
    expected = sorted(v for _, v in _records(b"e0", 50) + _records(b"e1", 30))
    assert _values(topic) == expected


_KILLED_PUBLISHER = textwrap.dedent(
    """
    import sys, time
    from beam_spark_runner.io.kafka.config import write_config
    from beam_spark_runner.io.kafka.transactions import EpochPublisher

    servers, topic, sink, stop = sys.argv[1:5]

    def records():
        for i in range(200):
            yield b"k", b"zombie-%d" % i
        if stop == "mid":
            sys.stdout.write("mid\\n")
            sys.stdout.flush()
            time.sleep(600)  # killed here, its transaction open

    EpochPublisher(write_config({"bootstrap.servers": servers}, topic), sink).publish(0, records())
    sys.stdout.write("published\\n")
    sys.stdout.flush()
    time.sleep(600)  # killed here, before the runner would remove the staged records
    """
)


def _killed_publisher(topic, sink, stop):
    """Runs a publisher of epoch 0 in another process and SIGKILLs it when
    it is mid-transaction ("mid") or once the epoch is published ("after")."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLED_PUBLISHER, services.KAFKA, topic, sink, stop],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p)),
    )
    try:
        line = proc.stdout.readline().strip()
        assert line == {"mid": "mid", "after": "published"}[stop], proc.stderr.read()[-3000:]
        if stop == "mid":
            # Everything produced has reached the broker, uncommitted.
            deadline = time.time() + 60
            while len(_values(topic, committed=False, settle_s=1.0)) < 200:
                assert time.time() < deadline, "the killed publisher's records never reached the broker"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


def test_a_publisher_killed_mid_transaction_leaves_nothing_visible_and_its_epoch_is_published_once(topic):
    sink = uuid.uuid4().hex[:12]
    _killed_publisher(topic, sink, "mid")
    assert _values(topic) == []  # its transaction is open: nothing committed
    config = write_config({"bootstrap.servers": services.KAFKA}, topic)
    publisher = EpochPublisher(config, sink)
    assert publisher.published_through() == NO_EPOCH
    assert publisher.publish(0, _records(b"e0", 40)) is True
    publisher.close()
    assert _values(topic) == sorted(v for _, v in _records(b"e0", 40))
    assert len(_values(topic, committed=False)) == 240  # the aborted records are in the log, never read committed


def test_a_publisher_killed_after_its_commit_is_not_published_again(topic):
    sink = uuid.uuid4().hex[:12]
    _killed_publisher(topic, sink, "after")
    publisher = EpochPublisher(write_config({"bootstrap.servers": services.KAFKA}, topic), sink)
    assert publisher.publish(0, _records(b"again", 200)) is False
    publisher.close()
    assert _values(topic) == sorted(b"zombie-%d" % i for i in range(200))


def test_a_broker_that_cannot_be_reached_fails_the_publication_naming_it(topic):
    config = write_config({"bootstrap.servers": "127.0.0.1:1"}, topic)
    publisher = EpochPublisher(config, uuid.uuid4().hex[:12], timeout_s=3)
    with pytest.raises(KafkaPublishError, match=r"WriteToKafka\(%s\).*Kafka at 127\.0\.0\.1:1" % topic):
        publisher.publish(0, _records(b"e0", 5))
    publisher.close()


# --- batch jobs ---------------------------------------------------------------


class _FailOnce(beam.DoFn):
    def __init__(self, marker):
        self._marker = marker

    def process(self, i):
        if i == 777:
            try:
                os.close(os.open(self._marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                pass
            else:
                raise RuntimeError("injected transient failure")
        yield b"k%d" % (i % 5), b"%d" % i


def _options():
    return PipelineOptions(["--spark_master=local[2,4]"])


def test_a_batch_job_publishes_every_record_once_despite_a_retried_task(topic, tmp_path):
    marker = str(tmp_path / "failed")
    with beam.Pipeline(runner=SparkRunner(), options=_options()) as p:
        _ = (
            p
            | beam.Create(range(2000))
            | beam.ParDo(_FailOnce(marker))
            | WriteToKafka({"bootstrap.servers": services.KAFKA}, topic)
        )
    assert os.path.exists(marker), "no task failed: the test shows nothing"
    assert _values(topic) == sorted(b"%d" % i for i in range(2000))


def _fail_at_the_last(i):
    if i == 1999:
        raise ValueError("the last element fails")
    return b"k", b"%d" % i


def test_a_failed_batch_job_publishes_nothing(topic):
    with pytest.raises(Exception, match="the last element fails"):
        with beam.Pipeline(runner=SparkRunner(), options=_options()) as p:
            _ = (
                p
                | beam.Create(range(2000))
                | beam.Reshuffle()
                | beam.Map(_fail_at_the_last)
                | WriteToKafka({"bootstrap.servers": services.KAFKA}, topic)
            )
    assert _values(topic) == []


def test_a_batch_job_hands_the_driver_its_input_in_bounded_partitions(topic, monkeypatch):
    """A task's records reach the driver whole (a result larger than its
    heap stalls Spark's job): the input of one partition is spread over
    partitions of about PARTITION_BYTES (here 4 KiB) before the driver
    takes them, and every record is still published once."""
    from pyspark import RDD

    from beam_spark_runner.io.kafka import spark_glue

    monkeypatch.setattr(spark_glue, "PARTITION_BYTES", 4096)
    partitions = []
    original = RDD.toLocalIterator

    def counted(rdd, *args, **kwargs):
        partitions.append(rdd.getNumPartitions())
        return original(rdd, *args, **kwargs)

    monkeypatch.setattr(RDD, "toLocalIterator", counted)
    with beam.Pipeline(runner=SparkRunner(), options=_options()) as p:
        _ = (
            p
            | beam.Create(range(3000), reshuffle=False)
            | beam.Map(lambda i: (None, b"%06d" % i + b"x" * 60))
            | WriteToKafka({"bootstrap.servers": services.KAFKA}, topic)
        )
    (spread,) = partitions
    assert spread >= 3000 * 60 // 4096 // 2, spread  # the ~200 KB input in about 4 KiB partitions
    assert _values(topic) == sorted(b"%06d" % i + b"x" * 60 for i in range(3000))


# --- what it refuses ----------------------------------------------------------


def test_bad_input_is_refused_naming_the_sink(topic):
    with pytest.raises(ValueError, match="transactional.id, which the sink sets itself"):
        WriteToKafka({"bootstrap.servers": services.KAFKA, "transactional.id": "mine"}, topic)
    with pytest.raises(ValueError, match="bootstrap.servers"):
        WriteToKafka({}, topic)
    with pytest.raises(Exception, match=r"WriteToKafka\(%s\).*value bytes, got \(bytes, str\)" % topic):
        with beam.Pipeline(runner=SparkRunner(), options=_options()) as p:
            _ = p | beam.Create([(b"k", "text")]) | WriteToKafka({"bootstrap.servers": services.KAFKA}, topic)
    with pytest.raises(UnsupportedPipelineError, match="RETRACTING panes.*cannot be retracted"):
        with beam.Pipeline(runner=SparkRunner(), options=_options()) as p:
            _ = (
                p
                | beam.Create([(b"k", b"v")])
                | beam.WindowInto(window.Sessions(5), accumulation_mode=triggers.RETRACTING)
                | WriteToKafka({"bootstrap.servers": services.KAFKA}, topic)
            )
    assert _values(topic) == []
