"""Databases and brokers, in one process against the machine's PostgreSQL,
Redis and NATS:

- `streaming_write` (the headline): rows/s into a PostgreSQL table through
  a running streaming pipeline's `WriteToDatabase` (exactly once). A
  `PeriodicImpulse` ticks every 0.25 s; once the pipeline committed a
  warm-up tick's rows, each tick makes `--rows`/`TICKS` rows (spread over
  `CHUNKS` tasks), more than the pipeline can take, so the rate is the
  pipeline's; timed from the first such tick's due time to the last row
  visible in the table. Against `copy`: the same rows made and written
  by psycopg's COPY from this process in one transaction. Target >= 0.5.
- `pipeline_ceiling`: the headline's pipeline with the sink replaced by a
  DoFn that only counts the rows it gets (into Redis, once per bundle), fed
  `--ceiling_rows` rows (the burst's ticks span 1.25 s, so a burst of N
  rows cannot show more than N / 1.25 s rows/s): how fast the pipeline
  runs without a database (reported: what is left of the headline's time
  is the sink's).
- `protocol`: the streaming exactly-once protocol alone, without Spark:
  the rows made into COPY text blocks and staged as one staging task
  stages them (the sink's encoded query rows in a Parquet file under a
  checkpoint directory), then committed (`StagedEpochPublication`: the
  blocks read, marker row and rows in one transaction, then the files
  removed); beside it the batch protocol (`stage_rows`: the blocks
  copied into the staging table, then `DatabasePublication`: marker row,
  move, delete). Reported: what the database's side costs.
- `broker_write`: a burst of `--rows` entries into a running streaming
  pipeline ReadFromRedisStreams -> Map -> WriteToDatabase (one stream: one
  reading task), from the first entry added to the last row visible
  (reported).
- `epoch_commit`: what one micro-batch's commit costs (its staged files
  read, the transaction, the files removed), for an epoch staged with no
  rows and for one of `--epoch_rows` rows (median of 5).
- `nats_read`: `--rows` messages of a JetStream stream counted by a batch
  pipeline through ReadFromNats (after a warm-up run; the whole run
  timed), against nats-py's own pull consumer fetching them in this
  process (reported).

    .venv/bin/python benchmarks/database_io.py               # 2M rows
    .venv/bin/python benchmarks/database_io.py --rows 200000
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
    from beam_spark_runner.io.database.sql_dialects import dialect_of

    with dialect_of(POSTGRESQL).connect() as conn:
        cursor = conn.cursor()
        for s in statements:
            cursor.execute(s)
        result = cursor.fetchall() if cursor.description else None
        conn.commit()
        return result


def _drop(table):
    from beam_spark_runner.io.database.sink_protocol import staging_table

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


class _TableRows:
    """How many rows a WriteToDatabase sink's table holds, cheap enough to
    poll every few milliseconds while the pipeline runs: one connection,
    and the table counted only when a new commit landed (the sink's marker
    table gained a row; every streaming commit writes one in the
    transaction that writes its rows). Counting a table of millions of
    rows every 20 ms kept a core busy scanning it, beside the pipeline
    being measured."""

    def __init__(self, table):
        from beam_spark_runner.io.database.sink_protocol import MARKER_TABLE
        from beam_spark_runner.io.database.sql_dialects import dialect_of

        self._table, self._markers = table, MARKER_TABLE
        self._conn = dialect_of(POSTGRESQL).connect()
        self._conn.autocommit = True
        self._seen, self._rows = None, 0

    def __call__(self):
        cursor = self._conn.cursor()
        cursor.execute("SELECT to_regclass(%s), to_regclass(%s)", ('"%s"' % self._table, self._markers))
        table, markers = cursor.fetchone()
        if table is None or markers is None:
            return 0
        commits = cursor.execute("SELECT COUNT(*) FROM %s" % self._markers).fetchone()[0]
        if commits != self._seen:
            self._rows = cursor.execute('SELECT COUNT(*) FROM "%s"' % self._table).fetchone()[0]
            self._seen = commits
        return self._rows

    def close(self):
        self._conn.close()


def _add(client, stream, first, count):
    pipe = client.pipeline(transaction=False)
    for i in range(first, first + count):
        e = _event(i)
        pipe.xadd(stream, {"id": e.id, "user": e.user, "amount": e.amount})
        if i % 10000 == 9999:
            pipe.execute()
    pipe.execute()


TICK_S = 0.25
TICKS = 6
CHUNKS = 4
# 60 s for the query to start and commit the warm-up (on a busy 2-core
# machine the first micro-batch alone can take 30 s).
WARM_UP_TICKS = 240


def _tick_chunks(timestamp, start, per_tick):
    """A tick's chunks of rows to make: none while warming up, but one
    row at the first tick."""
    k = int(round((float(timestamp) - start) / TICK_S))
    if k == 0:
        return [(0, 0, 1)]
    if k < WARM_UP_TICKS:
        return []
    size = per_tick // CHUNKS
    return [((k - WARM_UP_TICKS) * per_tick + c * size + 1, c, size) for c in range(CHUNKS)]


def _chunk_events(chunk):
    first, _, size = chunk
    return [_event(i) for i in range(first, first + size)]


def _burst_rate(rows, sink, landed):
    """Rows/s of a burst of `rows` rows through the headline's pipeline
    ending in `sink` (a PTransform), from the first burst tick's due time
    until `landed()` (how many rows reached the sink) counts them all."""
    from apache_beam.transforms.periodicsequence import PeriodicImpulse

    from beam_spark_runner import SparkRunner

    per_tick = rows // TICKS // CHUNKS * CHUNKS
    start = time.time() + 2
    burst_start = start + WARM_UP_TICKS * TICK_S
    p = beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(["--streaming"]))
    _ = (
        p
        | PeriodicImpulse(
            start_timestamp=start, stop_timestamp=burst_start + TICKS * TICK_S - TICK_S / 2, fire_interval=TICK_S
        )
        | "Chunks" >> beam.FlatMap(_tick_chunks, start, per_tick)
        | beam.Reshuffle()
        | "Rows" >> beam.FlatMap(_chunk_events).with_output_types(Event)
        | sink
    )
    result = p.run()
    try:
        while landed() < 1:
            time.sleep(0.05)
        if time.time() >= burst_start:
            raise RuntimeError("the pipeline took more than %.0f s to start: run again" % (burst_start - start))
        while landed() < 1 + per_tick * TICKS:
            time.sleep(0.02)
        elapsed = time.time() - burst_start
        assert landed() == 1 + per_tick * TICKS, "%d rows landed, %d made" % (landed(), 1 + per_tick * TICKS)
        return per_tick * TICKS / elapsed
    finally:
        result.cancel()


def streaming_write_rate(rows):
    """Rows/s through WriteToDatabase in a running streaming pipeline fed
    more rows than it can take (the module's docstring)."""
    from beam_spark_runner.io import WriteToDatabase

    table = "bench_sink_%s" % uuid.uuid4().hex[:8]
    landed = _TableRows(table)
    try:
        return _burst_rate(rows, WriteToDatabase(POSTGRESQL, table), landed)
    finally:
        landed.close()
        _drop(table)


class _CountRows(beam.DoFn):
    """Counts its rows into a Redis key, once per bundle."""

    def __init__(self, key):
        self._key = key

    def start_bundle(self):
        self._rows = 0

    def process(self, row):
        self._rows += 1

    def finish_bundle(self):
        import redis

        redis.Redis.from_url(REDIS).incrby(self._key, self._rows)


def pipeline_ceiling_rate(rows):
    """Rows/s of the headline's pipeline without a database (the module's
    docstring)."""
    import redis

    client = redis.Redis.from_url(REDIS)
    key = "bench-ceiling-%s" % uuid.uuid4().hex[:8]
    try:
        return _burst_rate(rows, "Count" >> beam.ParDo(_CountRows(key)), lambda: int(client.get(key) or 0))
    finally:
        client.delete(key)


def _stage_files(config, root, epoch, rows):
    """Stages `rows` rows for micro-batch `epoch` under the checkpoint
    `root` as one staging task does: the rows made into COPY text blocks
    (as the sink's step in the producing stage makes them), the blocks
    encoded as the sink's elements, one query row per block, in a Parquet
    file. Returns the batch's publication."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from apache_beam import coders
    from apache_beam.transforms import window
    from apache_beam.utils.windowed_value import WindowedValue

    from beam_spark_runner.io.database.postgresql_copy import BLOCK_ROWS, CopyTextEncoder
    from beam_spark_runner.io.database.spark_glue import RAW_FORMAT, StagedEpochPublication, staged_epoch_dir
    from beam_spark_runner.streaming import rows as query_rows

    encoder = CopyTextEncoder(config.schema, keyed=bool(config.key_columns))
    coder = coders.WindowedValueCoder(coders.BytesCoder())
    encode, windows = coder.get_impl().encode_nested, (window.GlobalWindow(),)
    relative = staged_epoch_dir(config.table, epoch)
    directory = os.path.join(root, *relative.split("/"))
    os.makedirs(directory)
    payloads = [
        encode(
            WindowedValue(
                encoder.block([_event(i) for i in range(first, min(rows, first + BLOCK_ROWS))]),
                0,
                windows,
            )
        )
        for first in range(0, rows, BLOCK_ROWS)
    ]
    if payloads:
        n = len(payloads)
        table = pa.table(
            {
                "format": pa.array([RAW_FORMAT] * n, pa.int32()),
                "part": pa.array([0] * n, pa.int32()),
                "kind": pa.array([query_rows.DATA] * n, pa.int32()),
                "payload": pa.array(payloads, pa.binary()),
            }
        )
        pq.write_table(table, os.path.join(directory, "part-00000.parquet"))
    return StagedEpochPublication(config, config.table, epoch, root, relative, coder)


def _sink_config(prefix):
    from beam_spark_runner.io.database.sink_protocol import DatabaseWriteConfig, RowEncoding, prepare_tables
    from beam_spark_runner.worker import spark_rows

    table = "%s_%s" % (prefix, uuid.uuid4().hex[:8])
    config = DatabaseWriteConfig(
        POSTGRESQL, table, (), spark_rows.spark_schema_of(Event), "bench", RowEncoding.POSTGRESQL_COPY_TEXT
    )
    prepare_tables(config)
    return config


def protocol_rates(rows):
    """Rows/s of the exactly-once protocols alone, without Spark (median of
    3 each): streaming (staged as files, then one commit transaction
    writing them with the marker row) and batch (staged by COPY into the
    staging table, then moved by the commit)."""
    import tempfile

    from beam_spark_runner.io.database.sink_protocol import DatabasePublication, stage_rows
    from beam_spark_runner.io.database.postgresql_copy import BLOCK_ROWS, CopyTextEncoder

    config = _sink_config("bench_protocol")
    encoder = CopyTextEncoder(config.schema, keyed=False)

    def blocks():
        for first in range(0, rows, BLOCK_ROWS):
            yield encoder.block([_event(i) for i in range(first, min(rows, first + BLOCK_ROWS))])

    try:
        streaming, batch = [], []
        with tempfile.TemporaryDirectory() as root:
            for epoch in range(3):
                start = time.perf_counter()
                _stage_files(config, root, epoch, rows)()
                streaming.append(rows / (time.perf_counter() - start))
        for epoch in range(3, 6):
            start = time.perf_counter()
            stage_rows(config, config.table, "w", epoch, 0, 1, blocks())
            DatabasePublication(config, config.table, epoch, "w")()
            batch.append(rows / (time.perf_counter() - start))
        return statistics.median(streaming), statistics.median(batch)
    finally:
        _drop(config.table)


def broker_write_rate(rows, warm_up=1000):
    """Rows/s of a burst of `rows` Redis entries, from the first added to
    the last visible in the table, once the pipeline committed `warm_up`."""
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
    """What committing one micro-batch staged under the checkpoint costs:
    with no rows and with `epoch_rows` rows (median of 5 each)."""
    import tempfile

    config = _sink_config("bench_epoch")
    try:
        empty, full = [], []
        with tempfile.TemporaryDirectory() as root:
            for epoch in range(10):
                publication = _stage_files(config, root, epoch, epoch_rows if epoch % 2 else 0)
                start = time.perf_counter()
                publication()
                (full if epoch % 2 else empty).append(time.perf_counter() - start)
        return statistics.median(empty), statistics.median(full)
    finally:
        _drop(config.table)


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
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--epoch_rows", type=int, default=10_000)
    parser.add_argument("--ceiling_rows", type=int, default=6_000_000)
    args = parser.parse_args(argv)
    copy = copy_rate(args.rows)
    print("copy: %.0f rows/s (psycopg COPY, one process, one transaction)" % copy)
    protocol, batch_protocol = protocol_rates(args.rows)
    print(
        "protocol: %.0f rows/s staged as files then committed, without Spark: %.2fx copy "
        "(batch's staging table: %.0f rows/s, %.2fx)"
        % (protocol, protocol / copy, batch_protocol, batch_protocol / copy)
    )
    empty, full = epoch_commit_seconds(args.epoch_rows)
    print("epoch_commit: %.1f ms empty, %.1f ms for %d rows" % (empty * 1000, full * 1000, args.epoch_rows))
    beam_nats, nats_py = nats_rates(min(args.rows, 200_000))
    print(
        "nats_read: %.0f msgs/s through ReadFromNats (whole batch run), %.0f msgs/s nats-py alone: %.2fx"
        % (beam_nats, nats_py, beam_nats / nats_py)
    )
    broker = broker_write_rate(min(args.rows, 200_000))
    print(
        "broker_write: %.0f rows/s ReadFromRedisStreams -> WriteToDatabase (one stream; a burst: first added to "
        "last in the table): %.3fx copy" % (broker, broker / copy)
    )
    ceiling = pipeline_ceiling_rate(args.ceiling_rows)
    print(
        "pipeline_ceiling: %.0f rows/s through the same pipeline without a database (%d rows): %.3fx copy"
        % (ceiling, args.ceiling_rows, ceiling / copy)
    )
    written = streaming_write_rate(args.rows)
    print("streaming_write: %.0f rows/s through WriteToDatabase in a streaming pipeline" % written)
    headline("database_io", written / copy, 0.5, at_most=False)


if __name__ == "__main__":
    main()
