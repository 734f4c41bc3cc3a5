"""ReadFromNats against the machine's NATS server with JetStream over a real
connection: a batch read of two subject filters up to the stream's end,
event times from a header, a durable consumer that a later run continues
from (acknowledged only after the checkpoint), a streaming read into a
MariaDB table while messages keep arriving (each message in the table
once), and the errors bad input gets."""

import asyncio
import time
import typing
import uuid

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.runner import PipelineState
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.utils.timestamp import Timestamp

from beam_spark_runner import SparkRunner
from beam_spark_runner.io.nats.client import NatsError
from beam_spark_runner.io import ReadFromNats, WriteToDatabase
from tests import services

URL = services.NATS


class _Stream:
    """A JetStream stream of its own for one test (subjects `<name>.*`),
    deleted afterwards."""

    def __init__(self):
        self.name = "BEAM_TEST_%s" % uuid.uuid4().hex[:10].upper()
        self.subjects = "%s.*" % self.name.lower()
        asyncio.run(self._call(lambda js: js.add_stream(name=self.name, subjects=[self.subjects])))

    def subject(self, tail):
        return "%s.%s" % (self.name.lower(), tail)

    async def _call(self, action):
        import nats

        nc = await nats.connect(URL)
        try:
            return await action(nc.jetstream())
        finally:
            await nc.close()

    def publish(self, messages):
        """[(subject tail, payload, headers)] -> their sequences."""

        async def send(js):
            acks = [await js.publish(self.subject(tail), data, headers=headers) for tail, data, headers in messages]
            return [ack.seq for ack in acks]

        return asyncio.run(self._call(send))

    def consumer(self, durable):
        return asyncio.run(self._call(lambda js: js.consumer_info(self.name, durable)))

    def delete(self):
        asyncio.run(self._call(lambda js: js.delete_stream(self.name)))


@pytest.fixture
def stream(request):
    services.require(request, URL)
    made = _Stream()
    yield made
    made.delete()


def _batch():
    return beam.Pipeline(runner=SparkRunner(), options=PipelineOptions([]))


def test_a_batch_read_of_two_subjects_reads_every_message_once(stream):
    stream.publish([("a" if i % 4 else "b", str(i).encode(), None) for i in range(240)])
    with _batch() as p:
        got = p | ReadFromNats(URL, stream.name, subjects=[stream.subject("a"), stream.subject("b")])
        assert_that(
            got | beam.Map(lambda m: (m.subject, int(m.data))),
            equal_to([(stream.subject("a" if i % 4 else "b"), i) for i in range(240)]),
        )


def test_a_batch_read_of_more_messages_than_one_fetch_returns_at_once_reads_them_all(stream):
    """30,000 messages: a fetch hands over what arrived so far, so a short
    page is no proof the end was reached (the broker's pending count is)."""

    async def fill(js):
        for start in range(0, 30000, 1000):
            await asyncio.gather(*(js.publish(stream.subject("a"), b"%d" % i) for i in range(start, start + 1000)))

    asyncio.run(stream._call(fill))
    with _batch() as p:
        got = p | ReadFromNats(URL, stream.name) | beam.Map(lambda m: int(m.data))
        assert_that(got | beam.combiners.Count.Globally(), equal_to([30000]))
        assert_that(got | "sum" >> beam.CombineGlobally(sum), equal_to([sum(range(30000))]), label="sum")


class _WithTimestamp(beam.DoFn):
    def process(self, message, ts=beam.DoFn.TimestampParam):
        yield int(message.data), ts


def test_event_times_come_from_a_header_or_the_publish_time(stream):
    before = Timestamp.now()
    stream.publish([("a", b"0", {"at": "1700000000.25"}), ("a", b"1", {"at": "2026-11-27T10:00:00Z"})])
    after = Timestamp.now()
    with _batch() as p:
        by_header = p | "header" >> ReadFromNats(URL, stream.name, timestamp_header="at")
        assert_that(
            by_header | "h" >> beam.ParDo(_WithTimestamp()),
            equal_to([(0, Timestamp.of(1700000000.25)), (1, Timestamp.from_rfc3339("2026-11-27T10:00:00Z"))]),
            label="header times",
        )
        published = p | "published" >> ReadFromNats(URL, stream.name) | "p" >> beam.ParDo(_WithTimestamp())
        assert_that(
            published | beam.Map(lambda kv, lo, hi: lo - 1 <= kv[1] <= hi + 1, before, after),
            equal_to([True, True]),
            label="publish times",
        )


def test_a_run_with_a_durable_consumer_continues_after_what_was_acknowledged(stream):
    stream.publish([("a", str(i).encode(), None) for i in range(10)])
    with _batch() as p:
        got = p | ReadFromNats(URL, stream.name, durable="report") | beam.Map(lambda m: int(m.data))
        assert_that(got, equal_to(list(range(10))))
    info = stream.consumer("report")
    assert (info.ack_floor.stream_seq, info.num_ack_pending) == (10, 0)
    stream.publish([("a", str(i).encode(), None) for i in range(10, 15)])
    with _batch() as p:
        got = p | ReadFromNats(URL, stream.name, durable="report") | beam.Map(lambda m: int(m.data))
        assert_that(got, equal_to(list(range(10, 15))))


class Message(typing.NamedTuple):
    subject: str
    sequence: int
    n: int


def test_a_streaming_read_into_a_table_keeps_every_message_once_and_acknowledges_it(stream, mariadb_url):
    table = services.unique_table()
    expected = []
    first = stream.publish([("a", str(i).encode(), None) for i in range(60)])
    expected += [(stream.subject("a"), seq, i) for i, seq in enumerate(first)]
    p = beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(["--streaming"]))
    _ = (
        p
        | ReadFromNats(URL, stream.name, durable="sink", poll_interval=0.2)
        | beam.Map(lambda m: Message(m.subject, m.sequence, int(m.data))).with_output_types(Message)
        | WriteToDatabase(mariadb_url, table)
    )
    result = p.run()
    try:
        for start in range(60, 150, 30):
            sequences = stream.publish([("b", str(i).encode(), None) for i in range(start, start + 30)])
            expected += [(stream.subject("b"), seq, start + i) for i, seq in enumerate(sequences)]
            time.sleep(0.5)
        services.wait_for_rows(mariadb_url, table, len(expected), result)
        result.drain()
        assert result.wait_until_finish(120 * 1000) == PipelineState.DRAINED
        rows = services.execute(mariadb_url, "SELECT subject, sequence, n FROM %s" % table)
        assert sorted(map(tuple, rows)) == sorted(expected)
        assert stream.consumer("sink").ack_floor.stream_seq == max(seq for _, seq, _ in expected)
    finally:
        if result.state not in (PipelineState.DRAINED, PipelineState.DONE, PipelineState.FAILED):
            result.cancel()
        services.drop_table(mariadb_url, table)


def test_bad_input_gets_errors_naming_the_problem(stream):
    with pytest.raises(NatsError, match="has no JetStream stream 'NO_SUCH_STREAM'"):
        _ = _batch() | ReadFromNats(URL, "NO_SUCH_STREAM")
    with pytest.raises(NatsError, match="cannot connect to NATS at nats://127.0.0.1:1"):
        _ = _batch() | ReadFromNats("nats://127.0.0.1:1", "S")
    with pytest.raises(ValueError, match="start_sequence must be a sequence number"):
        ReadFromNats(URL, "S", start_sequence=0)
    stream.publish([("a", b"1", {"at": "yesterday"})])
    with pytest.raises(Exception, match=r"has no readable 'at' header .*'yesterday'"):
        with _batch() as p:
            _ = p | ReadFromNats(URL, stream.name, timestamp_header="at")


def test_a_read_is_built_where_the_thread_runs_an_event_loop(stream):
    """A notebook's kernel runs an event loop in the thread that builds the
    pipeline: the reader's own loop runs beside it, not in it."""
    stream.publish([("a", b"%d" % i, None) for i in range(5)])

    async def build_and_run():
        with _batch() as p:
            got = p | ReadFromNats(URL, stream.name) | beam.Map(lambda m: int(m.data))
            assert_that(got, equal_to(list(range(5))))

    asyncio.run(build_and_run())
