"""Databases and brokers, in one process against the machine's PostgreSQL,
Redis and NATS:

- `streaming_write`: a running streaming pipeline (ReadFromRedisStreams ->
  Map -> WriteToDatabase, exactly once) into a PostgreSQL table gets a
  burst of `--rows` entries; rows/s from the first entry added to the last
  row visible in the table (the pipeline's start-up left out), against
  `copy`: the same rows written by psycopg's COPY from this process in
  one transaction. Headline: streaming_write / copy, target >= 0.5.
- `epoch_commit`: what one micro-batch's commit costs in the database
  (DatabasePublication: the marker row, moving the staged rows, deleting
  them), for an empty epoch and for one of `--epoch_rows` rows (median of
  5).
- `nats_read`: `--rows` messages of a JetStream stream counted by a batch
  pipeline through ReadFromNats (after a warm-up run; the whole run
  timed), against nats-py's own pull consumer fetching them in this
  process (reported).

    .venv/bin/python benchmarks/database_io.py               # 200k rows
    .venv/bin/python benchmarks/database_io.py --rows 50000
"""

import argparse
import asyncio
import os
import statistics
import sys
import time
import typing
import uuid

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import apache_beam as beam  # noqa: E402
from apache_beam.options.pipeline_options import PipelineOptions  # noqa: E402

from benchmarks.headline import headline  # noqa: E402

POSTGRESQL = "postgresql://postgres@127.0.0.1:5432/test"
REDIS = "redis://127.0.0.1:6379/0"
NATS = "nats://127.0.0.1:4222"


class Event(typing.NamedTuple):
    id: int
    user: str
    amount: float


def _event(i):
    return Event(i, "u%d" % (i % 1000), i * 0.25)


def _execute(*statements):
    from beam_spark_runner.connectors.sql_dialects import dialect_of

    with dialect_of(POSTGRESQL).connect() as conn:
        cursor = conn.cursor()
        for s in statements:
            cursor.execute(s)
        result = cursor.fetchall() if cursor.description else None
        conn.commit()
        return result


def _drop(table):
    from beam_spark_runner.connectors.database_sink import staging_table

    _execute('DROP TABLE IF EXISTS "%s"' % table, 'DROP TABLE IF EXISTS "%s"' % staging_table(table))


def copy_rate(rows):
    import psycopg

    table = "bench_copy_%s" % uuid.uuid4().hex[:8]
    _execute('CREATE TABLE "%s" (id BIGINT, "user" TEXT, amount DOUBLE PRECISION)' % table)
    try:
        start = time.perf_counter()
        with psycopg.connect(POSTGRESQL) as conn:
            with conn.cursor().copy('COPY "%s" (id, "user", amount) FROM STDIN' % table) as copy:
                for i in range(rows):
                    copy.write_row(_event(i))
        return rows / (time.perf_counter() - start)
    finally:
        _drop(table)


def _count(table):
    if _execute("SELECT to_regclass('\"%s\"')" % table) == [(None,)]:
        return 0
    return _execute('SELECT COUNT(*) FROM "%s"' % table)[0][0]


def _add(client, stream, first, count):
    pipe = client.pipeline(transaction=False)
    for i in range(first, first + count):
        e = _event(i)
        pipe.xadd(stream, {"id": e.id, "user": e.user, "amount": e.amount})
        if i % 10000 == 9999:
            pipe.execute()
    pipe.execute()


def streaming_write_rate(rows, warm_up=1000):
    """Rows/s of a burst of `rows` entries, from the first added to the
    last visible in the table, once the pipeline committed `warm_up`."""
    import redis

    from beam_spark_runner import SparkRunner
    from beam_spark_runner.io import ReadFromRedisStreams, WriteToDatabase

    stream, table = "bench-%s" % uuid.uuid4().hex[:8], "bench_sink_%s" % uuid.uuid4().hex[:8]
    client = redis.Redis.from_url(REDIS)
    _add(client, stream, 0, warm_up)
    p = beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(["--streaming"]))
    _ = (
        p
        | ReadFromRedisStreams(REDIS, stream, poll_interval=0.2)
        | beam.Map(lambda e: Event(int(e.fields["id"]), e.fields["user"], float(e.fields["amount"]))).with_output_types(
            Event
        )
        | WriteToDatabase(POSTGRESQL, table)
    )
    result = p.run()
    try:
        while _count(table) < warm_up:
            time.sleep(0.1)
        start = time.perf_counter()
        _add(client, stream, warm_up, rows)
        while _count(table) < warm_up + rows:
            time.sleep(0.05)
        elapsed = time.perf_counter() - start
        assert _count(table) == warm_up + rows, "%d rows in the table, %d sent" % (_count(table), warm_up + rows)
        return rows / elapsed
    finally:
        result.cancel()
        client.delete(stream)
        _drop(table)


def epoch_commit_seconds(epoch_rows):
    from beam_spark_runner.connectors.database_sink import (
        DatabasePublication,
        DatabaseWriteConfig,
        prepare_tables,
        stage_rows,
    )
    from beam_spark_runner.worker import spark_rows

    table = "bench_epoch_%s" % uuid.uuid4().hex[:8]
    config = DatabaseWriteConfig(POSTGRESQL, table, (), spark_rows.spark_schema_of(Event), "bench")
    prepare_tables(config)
    try:
        empty, full = [], []
        for epoch in range(10):
            if epoch % 2:
                stage_rows(config, table, "w", epoch, 0, 1, [_event(i) for i in range(epoch_rows)])
            start = time.perf_counter()
            DatabasePublication(config, table, epoch, "w")()
            (full if epoch % 2 else empty).append(time.perf_counter() - start)
        return statistics.median(empty), statistics.median(full)
    finally:
        _drop(table)


async def _nats(action):
    import nats

    nc = await nats.connect(NATS)
    try:
        return await action(nc.jetstream())
    finally:
        await nc.close()


def nats_rates(rows):
    from beam_spark_runner import SparkRunner
    from beam_spark_runner.io import ReadFromNats

    stream = "BENCH_%s" % uuid.uuid4().hex[:8].upper()

    async def fill(js):
        await js.add_stream(name=stream, subjects=[stream.lower() + ".>"])
        for start in range(0, rows, 1000):
            await asyncio.gather(*(js.publish(stream.lower() + ".e", b"%d" % i) for i in range(start, start + 1000)))

    async def consume(js):
        from nats.js.api import AckPolicy, ConsumerConfig

        start = time.perf_counter()
        pull = await js.pull_subscribe("", stream=stream, config=ConsumerConfig(ack_policy=AckPolicy.NONE))
        got = 0
        while got < rows:
            got += len(await pull.fetch(10000, timeout=2))
        await pull.unsubscribe()
        return rows / (time.perf_counter() - start)

    def count_with_beam():
        start = time.perf_counter()
        with beam.Pipeline(runner=SparkRunner(), options=PipelineOptions([])) as p:
            counted = p | ReadFromNats(NATS, stream) | beam.combiners.Count.Globally()
            counted | beam.Map(_check_count, rows)
        return rows / (time.perf_counter() - start)

    asyncio.run(_nats(fill))
    try:
        count_with_beam()  # warm-up: the session and the workers
        return count_with_beam(), asyncio.run(_nats(consume))
    finally:
        asyncio.run(_nats(lambda js: js.delete_stream(stream)))


def _check_count(n, rows):
    assert n == rows, (n, rows)


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--epoch_rows", type=int, default=10_000)
    args = parser.parse_args(argv)
    copy = copy_rate(args.rows)
    print("copy: %.0f rows/s (psycopg COPY, one process, one transaction)" % copy)
    empty, full = epoch_commit_seconds(args.epoch_rows)
    print("epoch_commit: %.1f ms empty, %.1f ms for %d rows" % (empty * 1000, full * 1000, args.epoch_rows))
    beam_nats, nats_py = nats_rates(args.rows)
    print(
        "nats_read: %.0f msgs/s through ReadFromNats (whole batch run), %.0f msgs/s nats-py alone: %.2fx"
        % (beam_nats, nats_py, beam_nats / nats_py)
    )
    written = streaming_write_rate(args.rows)
    print("streaming_write: %.0f rows/s through WriteToDatabase (a burst: first added to last in the table)" % written)
    headline("database_io", written / copy, 0.5, at_most=False)


if __name__ == "__main__":
    main()
