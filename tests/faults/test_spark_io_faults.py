"""One streaming pipeline with five branches, each a source -> windowed
count -> sink: ReadFromSpark (files) -> WriteToSpark (Parquet),
a source and a sink the runner does not ship, written only against the
I/O contract (tests/toy_connector.py: JSON lines in, JSON lines out), NATS
JetStream -> WriteToDatabase (PostgreSQL), Redis Streams ->
WriteToDatabase (MariaDB), ReadFromSpark (files) -> WriteToKafka (each
total a record, checked by a read_committed consumer); the same without
the files branches, a query whose sinks all stage on the driver (the
databases and Kafka, the last read from the test-only connector); and Spark's
own Kafka source (ReadFromSpark(format="kafka")) -> WriteToSpark, where
Maven Central serves Spark's connector for the installed Spark. The driver
is SIGKILLed at seeded random moments while input keeps arriving (twice;
once in the driver-staged query), each restart a fresh process in
another working directory given only the checkpoint URI: what each sink
published equals the batch answer, no row lost or written twice, and
nothing staged is left behind. (One driver serves the pairs: each kill
cuts all of them at whatever point of the batch each had reached, for
the driver starts of one run.)"""

import asyncio
import collections
import datetime
import glob
import json
import os
import random
import time

import pytest

from beam_spark_runner.io.database.sink_protocol import staging_table
from beam_spark_runner import versions
from tests import kafka_topics, services, spark_kafka, toy_connector
from tests.faults import drivers, spark_io_pipeline as pipeline

EPOCH = datetime.datetime(2026, 1, 1)
FILES = 6
# Driver kills per run: two where every kind of sink is in the query (a
# restart that is itself killed); one where the sinks are all databases
# (the driver stages their rows: one kill shows that path recovers, the
# first variant the property under repeated kills), since every kill costs
# a driver start. Also the Kafka source test below: two.
KILLS = {"files-and-databases": 2, "driver-staged": 1}
RUN_TIMEOUT_S = 600  # a hung run, not a slow one: every wait ends as soon as its condition holds


def _events(i):
    """File i: 20 events of users a-d, event times i*10 .. i*10+19 s; the
    last file also carries a sentinel an hour later, so every window before
    it closes without a drain."""
    events = [
        {"user": "abcd"[(i + j) % 4], "score": i * 100 + j, "ts": (EPOCH + datetime.timedelta(seconds=i * 10 + j))}
        for j in range(20)
    ]
    if i == FILES - 1:
        events.append({"user": "sentinel", "score": 0, "ts": EPOCH + datetime.timedelta(hours=1)})
    return events


def _write(source, i):
    if source.startswith("redis://"):
        import redis

        url, stream = source.split("#")
        client = redis.Redis.from_url(url)
        for e in _events(i):
            client.xadd(stream, {"user": e["user"], "score": str(e["score"]), "ts": e["ts"].isoformat()})
        return
    if source.startswith("kafka://"):
        _produce(source, _events(i))
        return
    if source.startswith("lines://"):
        toy_connector.append_lines(source[len("lines://") :], [dict(e, ts=e["ts"].isoformat()) for e in _events(i)])
        return
    if source.startswith("nats://"):
        url, stream = source.split("#")
        messages = [(json.dumps([e["user"], e["score"]]).encode(), {"ts": e["ts"].isoformat()}) for e in _events(i)]
        asyncio.run(_publish(url, stream, messages))
        return
    tmp = os.path.join(os.path.dirname(source), ".events-%d.json" % i)
    with open(tmp, "w") as f:
        for e in _events(i):
            f.write(json.dumps(dict(e, ts=e["ts"].isoformat())) + "\n")
    os.rename(tmp, os.path.join(source, "events-%d.json" % i))


KAFKA_PARTITIONS = 2


def _produce(source, events):
    """Each event as a message keyed by its user, its timestamp the event
    time; the sentinel goes to every partition, so that none holds the
    watermark back below it."""
    from confluent_kafka import Producer

    servers, topic = source[len("kafka://") :].split("#")
    producer = Producer({"bootstrap.servers": servers, "enable.idempotence": True})
    for e in events:
        millis = int((e["ts"] - datetime.datetime(1970, 1, 1)).total_seconds() * 1000)
        value = json.dumps([e["user"], e["score"]]).encode()
        partitions = range(KAFKA_PARTITIONS) if e["user"] == "sentinel" else [None]
        for partition in partitions:
            kwargs = {} if partition is None else {"partition": partition}
            producer.produce(topic, value=value, key=e["user"].encode(), timestamp=millis, **kwargs)
    assert producer.flush(30) == 0, "Kafka at %s did not take every message" % servers


def _create_topic(servers, topic):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": servers})
    # The messages carry January's event times: a broker's time-based
    # retention would delete them mid-test.
    new = NewTopic(topic, num_partitions=KAFKA_PARTITIONS, replication_factor=1, config={"retention.ms": "-1"})
    admin.create_topics([new])[topic].result(30)


def _delete_topic(servers, topic):
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": servers})  # kept until the answer comes
    admin.delete_topics([topic])[topic].result(30)


async def _publish(url, stream, messages, create=False):
    import nats

    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        if create:
            await js.add_stream(name=stream, subjects=[stream.lower() + ".*"])
        for data, headers in messages:
            await js.publish(stream.lower() + ".events", data, headers=headers)
    finally:
        await nc.close()


async def _delete_stream(url, stream):
    import nats

    nc = await nats.connect(url)
    try:
        await nc.jetstream().delete_stream(stream)
    finally:
        await nc.close()


def _expected():
    totals = collections.Counter()
    for i in range(FILES):
        for e in _events(i):
            if e["user"] != "sentinel":
                start = int((e["ts"] - datetime.datetime(1970, 1, 1)).total_seconds()) // 10 * 10
                totals[(e["user"], start)] += e["score"]
    return sorted((u, s, t) for (u, s), t in totals.items())


def _published(out):
    import pyarrow.parquet as pq

    if out.startswith("lines://"):
        return toy_connector.published(out[len("lines://") :])
    if out.startswith("kafka-eos://"):
        return sorted(
            tuple(json.loads(v)) for v in kafka_topics.committed_values(*out[len("kafka-eos://") :].split("#"))
        )
    if "#" in out:
        url, table = out.split("#")
        from beam_spark_runner.io.database.sql_dialects import dialect_of

        quote = dialect_of(url).quote
        try:
            rows = services.execute(url, "SELECT %s FROM %s" % (", ".join(map(quote, _COLUMNS)), quote(table)))
        except Exception:  # noqa: BLE001 -- the table is made when the run starts
            return []
        return sorted(tuple(r) for r in rows)
    rows = []
    for path in sorted(glob.glob(os.path.join(out, "part-*"))):
        table = pq.read_table(path)
        rows.extend(zip(*(table.column(c).to_pylist() for c in ("user", "window_start", "total"))))
    return sorted(rows)


_COLUMNS = ("user", "window_start", "total")


def _staged(out, checkpoint_dir):
    """What a sink staged and never published: a database sink's rows in
    its staging table or batch directories under the checkpoint; a Parquet
    sink's files in its staging directory."""
    if out.startswith("lines://"):
        return toy_connector.staged(out[len("lines://") :])
    if out.startswith("kafka-eos://"):
        return glob.glob(os.path.join(checkpoint_dir, "beam", "kafka_staging", "*", "*"))
    if "#" in out:
        url, table = out.split("#")
        in_table = services.execute(url, "SELECT * FROM %s" % staging_table(table))
        return list(in_table) + glob.glob(os.path.join(checkpoint_dir, "beam", "database_staging", "*", "*"))
    return glob.glob(os.path.join(out, "_beam_staging", "*", "*", "*"))


def _start(ends, checkpoint, cwd, env=None):
    return drivers.start([pipeline.__file__, checkpoint, *(end for pair in ends for end in pair)], cwd, env)


def _commits(checkpoint_dir):
    commits = os.path.join(checkpoint_dir, "spark", "commits")
    return len([n for n in os.listdir(commits) if n.isdigit()]) if os.path.isdir(commits) else 0


@pytest.fixture(params=["files-and-databases", "driver-staged"])
def ends(request, tmp_path):
    """[(source, sink)]: a JSON directory read with ReadFromSpark and a
    Parquet directory (not in a driver-staged query, whose sinks' rows the
    driver stages itself); a NATS JetStream stream and a PostgreSQL table;
    a Redis stream and a MariaDB table (`URL#NAME`); a JSON directory (the
    test-only connector's lines in a driver-staged query) and a Kafka topic
    (`kafka-eos://HOST:PORT#TOPIC`), removed afterwards; and how many times
    the driver is killed."""
    import redis

    os.makedirs(tmp_path / "in")
    os.makedirs(tmp_path / "in-kafka")
    kafka = services.require(request, services.KAFKA)
    out_topic = services.unique_table("eos")
    _create_topic(kafka, out_topic)
    postgresql = services.require(request, services.POSTGRESQL)
    nats_url = services.require(request, services.NATS)
    mariadb = services.require(request, services.MARIADB)
    redis_url = services.require(request, services.REDIS)
    pg_table, maria_table = services.unique_table("faults"), services.unique_table("faults")
    stream = pg_table.upper()
    asyncio.run(_publish(nats_url, stream, [], create=True))
    files = []
    if request.param == "files-and-databases":
        files = [
            (str(tmp_path / "in"), str(tmp_path / "out")),
            # A source and a sink the runner does not ship, written only
            # against the I/O contract (tests/toy_connector.py).
            ("lines://%s" % (tmp_path / "in-lines.jsonl"), "lines://%s" % (tmp_path / "lines")),
        ]
    kafka_source = str(tmp_path / "in-kafka")
    if request.param == "driver-staged":
        kafka_source = "lines://%s" % (tmp_path / "in-kafka.jsonl")
    yield (
        files
        + [
            ("%s#%s" % (nats_url, stream), "%s#%s" % (postgresql, pg_table)),
            ("%s#%s" % (redis_url, maria_table), "%s#%s" % (mariadb, maria_table)),
            (kafka_source, "kafka-eos://%s#%s" % (kafka, out_topic)),
        ],
        KILLS[request.param],
    )
    _delete_topic(kafka, out_topic)
    asyncio.run(_delete_stream(nats_url, stream))
    redis.Redis.from_url(redis_url).delete(maria_table)
    services.drop_table(postgresql, pg_table)
    services.drop_table(mariadb, maria_table)


def test_a_driver_killed_while_input_arrives_publishes_each_answer_once(tmp_path, ends):
    ends, kills = ends
    _run_with_kills(tmp_path, ends, kills)


@pytest.fixture
def kafka_topic(request):
    """A Kafka topic of KAFKA_PARTITIONS partitions on the test broker, and
    Spark's Kafka connector's jars for the installed Spark."""
    servers = services.require(request, services.KAFKA)
    if spark_kafka.connector_version() is None:
        pytest.skip(
            "Maven Central serves no spark-sql-kafka-0-10 for Spark %s; the compatibility tier runs this on "
            "PySpark 4.2" % versions.installed_version(versions.PYSPARK)
        )
    topic = services.unique_table("spark_kafka")
    _create_topic(servers, topic)
    yield "kafka://%s#%s" % (servers, topic), spark_kafka.connector_jars()
    _delete_topic(servers, topic)


def test_a_driver_killed_while_kafka_messages_arrive_counts_each_once(tmp_path, kafka_topic):
    """Spark's own Kafka source (ReadFromSpark(format="kafka")) -> a windowed
    count -> WriteToSpark, the driver killed twice while messages arrive:
    each message counted once."""
    source, jars = kafka_topic
    _run_with_kills(
        tmp_path, [(source, str(tmp_path / "out"))], kills=2, env={"BEAM_SPARK_TEST_SPARK_JARS": ",".join(jars)}
    )


def _run_with_kills(tmp_path, ends, kills, env=None):
    rng = random.Random(20261127)
    checkpoint_dir = str(tmp_path / "checkpoint")
    checkpoint = "file://%s" % checkpoint_dir
    written = 0

    def write_next():
        nonlocal written
        for source, _ in ends:
            _write(source, written)
        written += 1

    write_next()
    for cycle in range(kills):
        before = _commits(checkpoint_dir)
        proc = _start(ends, checkpoint, str(tmp_path / ("run%d" % cycle)), env)
        deadline = time.time() + RUN_TIMEOUT_S
        while _commits(checkpoint_dir) <= before:
            assert proc.poll() is None, "run %d failed: %s" % (cycle, drivers.log_tail(proc))
            assert time.time() < deadline, "run %d committed no batch: %s" % (cycle, drivers.log_tail(proc))
            time.sleep(0.2)
        write_next()
        time.sleep(rng.uniform(0.2, 3.0))
        assert proc.poll() is None, "run %d ended: %s" % (cycle, drivers.log_tail(proc))
        drivers.kill(proc)
    while written < FILES:
        write_next()
    proc = _start(ends, checkpoint, str(tmp_path / "run-last"), env)
    expected = _expected()
    try:
        deadline = time.time() + RUN_TIMEOUT_S
        while any(_published(out) != expected for _, out in ends):
            assert proc.poll() is None, "the last run failed: %s" % drivers.log_tail(proc)
            published = {out: _published(out) for _, out in ends}
            assert time.time() < deadline, "published %s, expected %s; the last run's log: %s" % (
                published,
                expected,
                drivers.log_tail(proc),
            )
            for out, rows in published.items():
                assert len(rows) <= len(expected), "more rows than the answer in %s: %s" % (out, rows)
            time.sleep(0.5)
        time.sleep(3)  # nothing more comes: every window is out once
        for _, out in ends:
            assert _published(out) == expected, out
    finally:
        drivers.kill(proc)
    for _, out in ends:
        staged = _staged(out, checkpoint_dir)
        assert not staged, (out, staged)
