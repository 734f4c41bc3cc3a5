"""Faults outside the runner: a server restarted while a streaming pipeline
runs against it, each on a server of the test's own
(tests/private_servers.py).

- The broker: the NATS server a `ReadFromNats` reads is killed and started
  again on the same store while messages keep coming.
- The database: the PostgreSQL server a `WriteToDatabase` commits into is
  stopped as a crash would (`pg_ctl stop -m immediate`) while a commit
  runs, and started again.

The run recovers (with `--tolerable_failed_batches`), or fails naming the
sink, the table and the database's message and a run started again from
the checkpoint finishes the work. Either way the table ends with every
message once."""

import asyncio
import re
import threading
import time
import typing
import uuid

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.runner import PipelineState

from beam_spark_runner import SparkRunner
from beam_spark_runner.io import ReadFromNats, ReadFromRedisStreams, WriteToDatabase
from tests import services
from tests.private_servers import PrivateNats, PrivatePostgres


class Entry(typing.NamedTuple):
    entry_id: str
    n: int


def _options(checkpoint):
    return PipelineOptions(["--streaming", "--tolerable_failed_batches=50", "--checkpoint_dir=%s" % checkpoint])


def _finish(result, url, table, expected, run_again):
    """Waits for every expected row, restarting from the checkpoint once if
    the run failed (naming the sink), drains, and checks the table."""
    if result.state == PipelineState.FAILED:
        with pytest.raises(Exception, match=r"cannot commit micro-batch \d+ into table %s at postgresql://" % table):
            result.wait_until_finish()
        result = run_again()
    services.wait_for_rows(url, table, len(expected), result)
    result.drain()
    assert result.wait_until_finish(120 * 1000) == PipelineState.DRAINED
    rows = services.execute(url, "SELECT entry_id, n FROM %s" % table)
    assert sorted(map(tuple, rows)) == sorted(expected)
    return result


def _wait_for_first_commit(result, url, table):
    deadline = time.time() + 180
    while services.row_count(url, table) == 0:
        assert result.state not in (PipelineState.FAILED, PipelineState.DONE), result.state
        assert time.time() < deadline, "nothing reached the table"
        time.sleep(0.2)


async def _publish(url, stream, first, count, create=False):
    """Publishes n = first .. first+count-1; returns the rows they become."""
    import nats

    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        if create:
            await js.add_stream(name=stream, subjects=[stream.lower() + ".*"])
        published = []
        for n in range(first, first + count):
            ack = await js.publish(stream.lower() + ".n", str(n).encode())
            published.append(("%s-%d" % (stream, ack.seq), n))
        return published
    finally:
        await nc.close()


def test_a_broker_restarted_mid_run_loses_and_duplicates_nothing(tmp_path, request, postgresql_url):
    nats_server = PrivateNats(request)
    stream, table = "RESTARTS%s" % uuid.uuid4().hex[:6].upper(), services.unique_table("broker_restart")
    expected = asyncio.run(_publish(nats_server.url, stream, 0, 100, create=True))
    checkpoint = str(tmp_path / "checkpoint")

    def run():
        p = beam.Pipeline(runner=SparkRunner(), options=_options(checkpoint))
        _ = (
            p
            | ReadFromNats(nats_server.url, stream, poll_interval=0.2, max_messages_per_read=40)
            | beam.Map(lambda m, s=stream: Entry("%s-%d" % (s, m.sequence), int(m.data))).with_output_types(Entry)
            | WriteToDatabase(postgresql_url, table)
        )
        return p.run()

    result = run()
    try:
        _wait_for_first_commit(result, postgresql_url, table)
        for wave in range(1, 3):
            nats_server.kill()
            time.sleep(3)  # micro-batches run while the broker is down
            assert result.state not in (PipelineState.FAILED, PipelineState.DONE), result.state
            nats_server.start()
            expected += asyncio.run(_publish(nats_server.url, stream, wave * 100, 100))
            time.sleep(2)
        result = _finish(result, postgresql_url, table, expected, run)
    finally:
        if result.state not in (PipelineState.DRAINED, PipelineState.DONE, PipelineState.FAILED):
            result.cancel()
        nats_server.close()
        services.drop_table(postgresql_url, table)


def test_a_broker_gone_fails_a_run_without_tolerance_naming_it(tmp_path, request, postgresql_url):
    nats_server = PrivateNats(request)
    stream, table = "GONE%s" % uuid.uuid4().hex[:6].upper(), services.unique_table("broker_gone")
    asyncio.run(_publish(nats_server.url, stream, 0, 10, create=True))
    p = beam.Pipeline(
        runner=SparkRunner(), options=PipelineOptions(["--streaming", "--checkpoint_dir=%s" % (tmp_path / "c")])
    )
    _ = (
        p
        | ReadFromNats(nats_server.url, stream, poll_interval=0.2)
        | beam.Map(lambda m: Entry(str(m.sequence), int(m.data))).with_output_types(Entry)
        | WriteToDatabase(postgresql_url, table)
    )
    result = p.run()
    try:
        _wait_for_first_commit(result, postgresql_url, table)
        nats_server.kill()
        with pytest.raises(Exception, match=r"ReadFromNats\(%s\): .*NATS at %s" % (stream, re.escape(nats_server.url))):
            result.wait_until_finish(120 * 1000)
        assert result.state == PipelineState.FAILED
    finally:
        if not PipelineState.is_terminal(result.state):
            result.cancel()
        nats_server.close()
        services.drop_table(postgresql_url, table)


def _restart_during_commits(server, table, stop, restarts):
    """Stops `server` as a crash would whenever the runner's session writes
    rows into `table` (a commit: COPY in streaming, INSERT in batch), and
    starts it again after 1 s; twice."""
    while not stop.is_set() and len(restarts) < 2:
        try:
            rows = services.execute(
                server.url,
                "SELECT query FROM pg_stat_activity WHERE application_name = 'beam_spark_runner' "
                "AND state = 'active' AND (query LIKE 'INSERT INTO %%%s%%' OR query LIKE 'COPY %%%s%%')"
                % (table, table),
            )
        except Exception:  # noqa: BLE001 -- the server is starting
            rows = None
        if rows:
            server.stop("immediate")
            restarts.append(rows[0][0])
            time.sleep(1)
            server.start()
        time.sleep(0.05)


def test_a_database_restarted_mid_commit_loses_and_duplicates_nothing(tmp_path, request):
    import redis

    services.require(request, services.REDIS)
    database = PrivatePostgres(request)
    client = redis.Redis.from_url(services.REDIS, decode_responses=True)
    stream, table = "beam-restarts-%s" % uuid.uuid4().hex[:8], services.unique_table("database_restart")
    services.create_slow_insert_table(database.url, table, 0.5)
    expected = [(client.xadd(stream, {"n": str(i)}), i) for i in range(100)]
    checkpoint = str(tmp_path / "checkpoint")

    def run():
        p = beam.Pipeline(runner=SparkRunner(), options=_options(checkpoint))
        _ = (
            p
            | ReadFromRedisStreams(services.REDIS, stream, poll_interval=0.2, max_entries_per_read=40)
            | beam.Map(lambda e: Entry(e.id, int(e.fields["n"]))).with_output_types(Entry)
            | WriteToDatabase(database.url, table)
        )
        return p.run()

    result = run()
    stop, restarts = threading.Event(), []
    restarter = threading.Thread(target=_restart_during_commits, args=(database, table, stop, restarts), daemon=True)
    try:
        _wait_for_first_commit(result, database.url, table)
        restarter.start()
        for i in range(100, 300):
            expected.append((client.xadd(stream, {"n": str(i)}), i))
            if i % 10 == 0:
                time.sleep(0.4)
        restarter.join(timeout=120)
        assert len(restarts) == 2, "the database was restarted %d times during a commit" % len(restarts)
        result = _finish(result, database.url, table, expected, run)
    finally:
        stop.set()
        if result.state not in (PipelineState.DRAINED, PipelineState.DONE, PipelineState.FAILED):
            result.cancel()
        client.delete(stream)
        database.close()


pytestmark = pytest.mark.timeout(600)
