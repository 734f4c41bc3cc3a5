"""ReadFromRedisStreams against the machine's Redis over a real connection:
a batch read up to each stream's end, event times from a field, a
consumer group that a later run continues from, a streaming read into a
PostgreSQL table while entries keep arriving (each entry in the table
once), and the errors bad input gets."""

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
from beam_spark_runner.io.redis_streams.client import RedisStreamsError
from beam_spark_runner.io import ReadFromRedisStreams, WriteToDatabase
from tests import services

URL = services.REDIS


@pytest.fixture
def redis_client(request):
    import redis

    services.require(request, URL)
    client = redis.Redis.from_url(URL, decode_responses=True)
    made = []
    yield client, made.append
    if made:
        client.delete(*made)


def _stream(register):
    name = "beam-test-%s" % uuid.uuid4().hex[:10]
    register(name)
    return name


def _batch():
    return beam.Pipeline(runner=SparkRunner(), options=PipelineOptions([]))


def test_a_batch_read_reads_every_entry_of_each_stream_once(redis_client):
    client, register = redis_client
    a, b = _stream(register), _stream(register)
    for i in range(250):
        client.xadd(a if i % 5 else b, {"n": str(i)})
    with _batch() as p:
        entries = p | ReadFromRedisStreams(URL, [a, b], max_entries_per_read=100)
        assert_that(
            entries | beam.Map(lambda e: (e.stream, int(e.fields["n"]))),
            equal_to([(a if i % 5 else b, i) for i in range(250)]),
        )


class _WithTimestamp(beam.DoFn):
    def process(self, entry, ts=beam.DoFn.TimestampParam):
        yield entry.fields["n"], ts


def test_event_times_come_from_the_entry_id_or_a_field(redis_client):
    client, register = redis_client
    stream = _stream(register)
    first = client.xadd(stream, {"n": "0", "at": "1700000000.5"})
    client.xadd(stream, {"n": "1", "at": "2026-11-27T10:00:00Z"})
    with _batch() as p:
        by_field = p | "field" >> ReadFromRedisStreams(URL, stream, timestamp_field="at")
        assert_that(
            by_field | "f" >> beam.ParDo(_WithTimestamp()),
            equal_to([("0", Timestamp.of(1700000000.5)), ("1", Timestamp.from_rfc3339("2026-11-27T10:00:00Z"))]),
            label="field times",
        )
        by_id = p | "id" >> ReadFromRedisStreams(URL, stream) | "i" >> beam.ParDo(_WithTimestamp())
        millis = int(first.split("-")[0])
        assert_that(
            by_id | beam.Filter(lambda kv: kv[0] == "0"),
            equal_to([("0", Timestamp(micros=millis * 1000))]),
            label="id times",
        )


def test_a_run_with_a_consumer_group_continues_where_the_last_one_ended(redis_client):
    client, register = redis_client
    stream = _stream(register)
    for i in range(10):
        client.xadd(stream, {"n": str(i)})
    with _batch() as p:
        got = p | ReadFromRedisStreams(URL, stream, consumer_group="report") | beam.Map(lambda e: int(e.fields["n"]))
        assert_that(got, equal_to(list(range(10))))
    (group,) = client.xinfo_groups(stream)
    assert group["last-delivered-id"] == client.xrevrange(stream, count=1)[0][0]
    for i in range(10, 15):
        client.xadd(stream, {"n": str(i)})
    with _batch() as p:
        got = p | ReadFromRedisStreams(URL, stream, consumer_group="report") | beam.Map(lambda e: int(e.fields["n"]))
        assert_that(got, equal_to(list(range(10, 15))))


class Entry(typing.NamedTuple):
    stream: str
    entry_id: str
    n: int


def test_a_streaming_read_into_a_table_keeps_every_entry_once_and_acknowledges_it(redis_client, postgresql_url):
    client, register = redis_client
    a, b = _stream(register), _stream(register)
    table = services.unique_table()
    expected = []
    for i in range(100):
        stream = a if i % 2 else b
        expected.append((stream, client.xadd(stream, {"n": str(i)}), i))
    p = beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(["--streaming"]))
    _ = (
        p
        | ReadFromRedisStreams(URL, [a, b], consumer_group="sink", poll_interval=0.2)
        | beam.Map(lambda e: Entry(e.stream, e.id, int(e.fields["n"]))).with_output_types(Entry)
        | WriteToDatabase(postgresql_url, table)
    )
    result = p.run()
    try:
        for i in range(100, 200):
            stream = a if i % 2 else b
            expected.append((stream, client.xadd(stream, {"n": str(i)}), i))
            if i % 25 == 0:
                time.sleep(0.5)
        services.wait_for_rows(postgresql_url, table, len(expected), result)
        result.drain()
        assert result.wait_until_finish(120 * 1000) == PipelineState.DRAINED
        rows = services.execute(postgresql_url, "SELECT stream, entry_id, n FROM %s" % table)
        assert sorted(map(tuple, rows)) == sorted(expected)
        for stream in (a, b):
            (group,) = client.xinfo_groups(stream)
            assert group["last-delivered-id"] == client.xrevrange(stream, count=1)[0][0]
    finally:
        if result.state not in (PipelineState.DRAINED, PipelineState.DONE, PipelineState.FAILED):
            result.cancel()
        services.drop_table(postgresql_url, table)


def test_bad_input_gets_errors_naming_the_problem(redis_client):
    client, register = redis_client
    not_a_stream = _stream(register)
    client.set(not_a_stream, "x")
    with pytest.raises(RedisStreamsError, match="stream %r: the key holds a string" % not_a_stream):
        _ = _batch() | ReadFromRedisStreams(URL, not_a_stream)
    with pytest.raises(RedisStreamsError, match="cannot reach Redis at redis://127.0.0.1:1/0"):
        _ = _batch() | ReadFromRedisStreams("redis://127.0.0.1:1/0", "s")
    with pytest.raises(ValueError, match="name at least one stream"):
        ReadFromRedisStreams(URL, [])
    stream = _stream(register)
    client.xadd(stream, {"n": "1", "at": "yesterday"})
    with pytest.raises(Exception, match=r"has no readable 'at' field .*'yesterday'"):
        with _batch() as p:
            _ = p | ReadFromRedisStreams(URL, stream, timestamp_field="at")
