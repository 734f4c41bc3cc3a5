"""Faults outside the runner: the database kills the runner's connections
(`pg_terminate_backend` on every session named `beam_spark_runner`) again
and again while a streaming pipeline reads a Redis stream into a
PostgreSQL table. Staging in a task fails and the task is retried; a
commit whose connection is lost is tried again on a new one, and when
every try is killed the run fails naming the sink, the table and the
database's message, and a run started again with the same checkpoint
commits what was pending. The table has a statement trigger that sleeps
0.3 s, so a commit holds its connection long enough to be killed. Either
way every entry ends in the table once."""

import threading
import time
import typing
import uuid

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.runner import PipelineState

from beam_spark_runner import SparkRunner
from beam_spark_runner.io import ReadFromRedisStreams, WriteToDatabase
from tests import services


class Entry(typing.NamedTuple):
    entry_id: str
    n: int


def _terminate_sessions(url, stop, killed):
    """Terminates the runner's database sessions every 0.4 s until `stop`."""
    while not stop.is_set():
        rows = services.execute(
            url,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'beam_spark_runner' AND pid <> pg_backend_pid()",
        )
        killed.append(sum(1 for (ok,) in rows if ok))
        time.sleep(0.4)


def test_connections_killed_by_the_server_lose_and_duplicate_nothing(tmp_path, request, postgresql_url):
    import redis

    services.require(request, services.REDIS)
    client = redis.Redis.from_url(services.REDIS, decode_responses=True)
    stream, table = "beam-faults-%s" % uuid.uuid4().hex[:8], services.unique_table("faults")
    services.create_slow_insert_table(postgresql_url, table, 0.3)
    expected = [(client.xadd(stream, {"n": str(i)}), i) for i in range(200)]
    checkpoint = str(tmp_path / "checkpoint")
    result = _run(stream, postgresql_url, table, checkpoint)
    stop, killed = threading.Event(), []
    killer = threading.Thread(target=_terminate_sessions, args=(postgresql_url, stop, killed), daemon=True)
    try:
        deadline = time.time() + 180
        while services.row_count(postgresql_url, table) == 0:  # the first micro-batch committed
            assert result.state not in (PipelineState.FAILED, PipelineState.DONE), result.state
            assert time.time() < deadline, "nothing reached the table"
            time.sleep(0.2)
        killer.start()
        for i in range(200, 400):
            expected.append((client.xadd(stream, {"n": str(i)}), i))
            if i % 10 == 0:
                time.sleep(0.4)
        time.sleep(4)
        stop.set()
        killer.join()
        assert sum(killed) > 0, "no session of the runner was terminated"
        if result.state == PipelineState.FAILED:
            # Every try of a commit was killed: the run failed, naming it.
            with pytest.raises(
                Exception, match=r"cannot commit micro-batch \d+ into table %s at postgresql://" % table
            ):
                result.wait_until_finish()
            result = _run(stream, postgresql_url, table, checkpoint)
        services.wait_for_rows(postgresql_url, table, len(expected), result)
        result.drain()
        assert result.wait_until_finish(120 * 1000) == PipelineState.DRAINED
        rows = services.execute(postgresql_url, "SELECT entry_id, n FROM %s" % table)
        assert sorted(map(tuple, rows)) == sorted(expected)
    finally:
        stop.set()
        if result.state not in (PipelineState.DRAINED, PipelineState.DONE, PipelineState.FAILED):
            result.cancel()
        client.delete(stream)
        services.drop_table(postgresql_url, table)


def _run(stream, url, table, checkpoint):
    p = beam.Pipeline(
        runner=SparkRunner(),
        options=PipelineOptions(["--streaming", "--tolerable_failed_batches=50", "--checkpoint_dir=%s" % checkpoint]),
    )
    _ = (
        p
        | ReadFromRedisStreams(services.REDIS, stream, poll_interval=0.2, max_entries_per_read=40)
        | beam.Map(lambda e: Entry(e.id, int(e.fields["n"]))).with_output_types(Entry)
        | WriteToDatabase(url, table)
    )
    return p.run()


pytestmark = pytest.mark.timeout(600)
