"""A Beam Java pipeline (examples/java/wordcount) built with Maven and
submitted to the job service by Beam Java's own PortableRunner: every
stage runs in Beam's Java SDK harness on this runner."""

import collections
import glob
import os
import re
import subprocess
import time

import pytest

from tests import java_example


pytestmark = pytest.mark.timeout(900)

TEXT = """The quick brown fox jumps over the lazy dog.
The dog sleeps; the fox runs!
It's a dog's life, isn't it?
"""


@pytest.fixture(scope="module")
def built_example(tmp_path_factory):
    return java_example.build(tmp_path_factory.mktemp("java-wordcount"))


@pytest.mark.parametrize(
    "main_class",
    [
        "org.example.WordCount",
        # A stateful DoFn: a ValueState per word and an event-time timer,
        # served by the runner's state API and timer streams.
        "org.example.StatefulWordCount",
    ],
)
def test_a_java_word_count_through_beams_java_portable_runner(built_example, job_endpoint, tmp_path, main_class):
    text = tmp_path / "text.txt"
    text.write_text(TEXT)
    output = tmp_path / "out" / "counts"
    done = subprocess.run(
        java_example.java_command(
            built_example,
            main_class,
            "--runner=PortableRunner",
            "--jobEndpoint=" + job_endpoint,
            "--input=" + str(text),
            "--output=" + str(output),
        ),
        cwd=built_example,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    expected = collections.Counter(w for w in re.split(r"[^a-z']+", TEXT.lower()) if w)
    counted = collections.Counter()
    for path in glob.glob(str(output) + "*"):
        with open(path) as f:
            for line in f:
                word, n = line.rstrip("\n").split("\t")
                counted[word] += int(n)
    assert counted == expected


def test_a_java_pipeline_reading_kafka_counts_every_message_of_each_wave(
    built_example, job_endpoint, tmp_path, request
):
    """KafkaCounts (Beam Java 2.65.0's KafkaIO, its unbounded read a Java
    splittable DoFn) in streaming, through Beam Java's PortableRunner: the
    messages there before it starts and two waves produced while it runs,
    over two partitions, each counted once per key and 10-second window of
    its create time (the producer's clock; KafkaIO's watermark of an idle
    partition follows the clock, so each window closes once the read is
    idle past its end)."""
    from confluent_kafka import Producer

    from tests import kafka_topics, services

    servers = services.require(request, services.KAFKA)
    output = tmp_path / "counts"
    produced = []

    def produce(topic, n):
        def delivered(error, message):
            assert error is None, error
            produced.append((message.key().decode(), message.timestamp()[1]))

        producer = Producer({"bootstrap.servers": servers})
        for i in range(n):
            producer.produce(topic, key=b"k%d" % (i % 3), value=b"1", partition=i % 2, on_delivery=delivered)
            producer.poll(0)
            time.sleep(0.05)
        assert producer.flush(30) == 0

    def counted():
        counts = {}
        for path in glob.glob(str(output / "*.txt")):
            key, start = os.path.basename(path)[: -len(".txt")].rsplit("-", 1)
            with open(path) as f:
                counts[(key, int(start))] = int(f.read())
        return counts

    with kafka_topics.created_topic(servers, "java-kafka-counts-", 2) as topic:
        produce(topic, 40)
        client = subprocess.Popen(
            java_example.java_command(
                built_example,
                "org.example.KafkaCounts",
                "--runner=PortableRunner",
                "--jobEndpoint=" + job_endpoint,
                "--streaming",
                "--bootstrapServers=" + servers,
                "--topic=" + topic,
                "--output=" + str(output),
            ),
            cwd=built_example,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            for wave in range(3):
                if wave:
                    produce(topic, 40)
                want = dict(collections.Counter((key, ts // 10_000 * 10_000) for key, ts in produced))
                deadline = time.time() + 240
                while counted() != want:
                    assert client.poll() is None, client.stdout.read()[-3000:]
                    assert time.time() < deadline, "wave %d: counted %s, expected %s" % (wave, counted(), want)
                    time.sleep(0.5)
        finally:
            client.kill()
            client.wait(30)
            _cancel_running_jobs(job_endpoint)


def _cancel_running_jobs(job_endpoint):
    """Cancels the streaming jobs still running on the job service (a Java
    client killed leaves its job running)."""
    import grpc
    from apache_beam.portability.api import beam_job_api_pb2, beam_job_api_pb2_grpc

    with grpc.insecure_channel(job_endpoint) as channel:
        stub = beam_job_api_pb2_grpc.JobServiceStub(channel)
        for job in stub.GetJobs(beam_job_api_pb2.GetJobsRequest()).job_info:
            if job.state == beam_job_api_pb2.JobState.RUNNING:
                stub.Cancel(beam_job_api_pb2.CancelJobRequest(job_id=job.job_id))
