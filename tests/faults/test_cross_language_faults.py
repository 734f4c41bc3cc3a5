"""A cross-language source under driver kills: Beam's `ReadFromKafka`
(KafkaIO's unbounded read, run by Beam's Java SDK harness) -> sessions in
RETRACTING mode -> `WriteToDatabase` into PostgreSQL with key columns
(tests/faults/kafka_sessions_pipeline.py). The driver is SIGKILLed three times
at seeded moments while scores keep arriving, each restart a fresh
process given the same checkpoint: KafkaIO's restrictions (its offsets)
live in the runner's checkpoint, so a replayed micro-batch reads what the
killed one read, and the table ends equal to the sessions computed in
plain Python from every produced score, nothing staged left behind.
KafkaIO commits the consumer group's offsets once their checkpoint
completed (its commit step requires stable input): the offsets committed
when a driver was killed cover only messages read in micro-batches that
run completed, as the table of read offsets, each labelled with the run
that completed it, shows."""

import json
import os
import random
import sys
import time
import uuid

import pytest

from tests import kafka_topics, services
from tests.faults import drivers
from tests.faults import kafka_sessions_pipeline as pipeline

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
import sessions_to_postgres  # noqa: E402  (the sessions in plain Python)

KILLS = 3  # the driver SIGKILLed three times, each at a seeded moment after a completed batch
PARTITIONS = 2
RUN_TIMEOUT_S = 600  # a hung run, not a slow one: every wait ends once its condition holds

pytestmark = pytest.mark.timeout(1800)


def _scores(base_s):
    """Eight waves of ten (user, event time s, score): each wave's times
    spread over 200 s from `base_s`, so later waves merge sessions that
    earlier ones published and land behind the watermark (late panes)."""
    rng = random.Random(20261202)
    return [
        [("u%d" % rng.randrange(4), base_s + rng.randrange(200), rng.randrange(1, 50)) for _ in range(10)]
        for _ in range(8)
    ]


def _produce(servers, topic, wave):
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": servers, "enable.idempotence": True})
    for i, (user, ts, score) in enumerate(wave):
        producer.produce(
            topic,
            key=user.encode(),
            value=json.dumps([user, score]).encode(),
            timestamp=ts * 1000,
            partition=i % PARTITIONS,  # every partition advances its create-time watermark
        )
    assert producer.flush(30) == 0, "Kafka at %s did not take every message" % servers


def _table(url, table):
    try:
        rows = services.execute(url, 'SELECT "user", session_start, total FROM %s' % table)
    except Exception:  # noqa: BLE001 -- the table is made when the first run starts
        return []
    return sorted(tuple(r) for r in rows)


def _committed(servers, topic, group):
    """The group's committed offset per partition (-1: none yet)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": servers, "group.id": group, "enable.auto.commit": False})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
        return {tp.partition: max(tp.offset, -1) for tp in found}
    finally:
        consumer.close()


def _read_offsets(url, table):
    """{(partition, offset): run} of every message the pipeline read."""
    rows = services.execute(url, 'SELECT "partition", "offset", run FROM %s' % table)
    return {(p, o): r for p, o, r in rows}


def _commits(checkpoint_dir):
    commits = os.path.join(checkpoint_dir, "spark", "commits")
    return len([n for n in os.listdir(commits) if n.isdigit()]) if os.path.isdir(commits) else 0


def _wait_for_table(url, table, expected, run, restart=None):
    """Waits (RUN_TIMEOUT_S at most) until the table holds `expected`, then
    3 s more in which it must not change (no session published twice or
    retracted wrongly). A run that ends is restarted by `restart(its log)`,
    which returns the new run; without `restart` it must not end."""
    deadline = time.time() + RUN_TIMEOUT_S
    while _table(url, table) != expected:
        if run.poll() is not None:
            assert restart is not None, "the last run failed: %s" % drivers.log_tail(run)
            run = restart(drivers.log_tail(run))
        assert time.time() < deadline, "the table %s, expected %s; the last run's log: %s" % (
            _table(url, table),
            expected,
            drivers.log_tail(run),
        )
        time.sleep(0.5)
    time.sleep(3)
    assert _table(url, table) == expected


def _each_message_read_once(url, offsets_table, produced):
    """{(partition, offset): run} of the messages read: each of the
    `produced` messages exactly once."""
    read = _read_offsets(url, offsets_table)
    per_partition = {p: sorted(o for q, o in read if q == p) for p in range(PARTITIONS)}
    assert per_partition == {p: list(range(len(per_partition[p]))) for p in range(PARTITIONS)}
    assert len(read) == produced
    return read


@pytest.fixture
def topic(request):
    servers = services.require(request, services.KAFKA)
    with kafka_topics.created_topic(servers, "xlang-sessions-", PARTITIONS) as name:
        yield servers, name


def test_a_killed_driver_reading_kafka_through_java_keeps_the_sessions_table_exact(tmp_path, topic, postgresql_url):
    servers, name = topic
    table = services.unique_table("xsessions")
    offsets_table = services.unique_table("xoffsets")
    group = "sessions-" + uuid.uuid4().hex[:8]
    checkpoint_dir = str(tmp_path / "checkpoint")
    committed_at_kills = []
    rng = random.Random(20261202)
    # Event times 15 minutes back: within the allowed lateness of a watermark
    # that follows the newest create time, and in KafkaIO's 5-minute commit
    # windows that have all ended, so offsets are committed as soon as
    # their checkpoint completed.
    waves = _scores(int(time.time()) - 900)
    produced = []

    def produce_next():
        wave = waves[len(produced) // 10]
        _produce(servers, name, wave)
        produced.extend(wave)

    def start(run):
        argv = [pipeline.__file__, "file://" + checkpoint_dir, servers, name, postgresql_url, table]
        argv += [offsets_table, group]
        return drivers.start(argv, str(tmp_path / ("run%d" % run)), env={pipeline.RUN_ENV: str(run)})

    try:
        produce_next()
        for cycle in range(KILLS):
            before = _commits(checkpoint_dir)
            proc = start(cycle)
            deadline = time.time() + RUN_TIMEOUT_S
            while _commits(checkpoint_dir) <= before:
                assert proc.poll() is None, "run %d failed: %s" % (cycle, drivers.log_tail(proc))
                assert time.time() < deadline, "run %d committed no batch: %s" % (cycle, drivers.log_tail(proc))
                time.sleep(0.2)
            produce_next()
            time.sleep(rng.uniform(0.2, 3.0))
            assert proc.poll() is None, "run %d ended: %s" % (cycle, drivers.log_tail(proc))
            drivers.kill(proc)
            committed_at_kills.append(_committed(servers, name, group))
        while len(produced) < sum(map(len, waves)):
            produce_next()
        expected = sessions_to_postgres.sessions(produced, gap_seconds=pipeline.GAP_S)
        proc = start(KILLS)
        try:
            _wait_for_table(postgresql_url, table, expected, proc)
            deadline = time.time() + RUN_TIMEOUT_S
            # Every commit window closes (their ends are long past): the group
            # ends at the end of each partition.
            ends = {p: sum(1 for i in range(len(produced)) if i % 10 % PARTITIONS == p) for p in range(PARTITIONS)}
            while _committed(servers, name, group) != ends:
                assert proc.poll() is None, "the last run failed: %s" % drivers.log_tail(proc)
                assert time.time() < deadline, "committed %s, expected %s" % (_committed(servers, name, group), ends)
                time.sleep(0.5)
        finally:
            drivers.kill(proc)
        from beam_spark_runner.io.database.sink_protocol import staging_table

        assert list(services.execute(postgresql_url, "SELECT * FROM %s" % staging_table(table))) == []
        read = _each_message_read_once(postgresql_url, offsets_table, len(produced))
        # A committed offset at a kill covers only messages whose micro-batch
        # that run (or an earlier one) completed: none was read again later.
        for run, committed in enumerate(committed_at_kills):
            ahead = {(p, o): r for (p, o), r in read.items() if o < committed[p] and r > run}
            assert ahead == {}, "run %d: offsets %s committed, ahead of its completed checkpoints: %s" % (
                run,
                committed,
                ahead,
            )
    finally:
        services.drop_table(postgresql_url, table)
        services.drop_table(postgresql_url, offsets_table)


def test_a_broker_that_goes_down_mid_run_loses_and_doubles_nothing(request, tmp_path, postgresql_url):
    """The pipeline's own Kafka broker is SIGKILLed after a completed
    micro-batch and started again 10 s later, while the driver keeps
    running; the rest of the scores arrive after it is back. The run
    recovers, or fails naming Kafka and resumes from its checkpoint when
    started again (never a hang: every wait has a deadline): the table ends
    equal to the sessions computed in Python, each message read once."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.private_servers import PrivateKafka

    kafka = PrivateKafka(request)
    servers, name = kafka.servers, "xlang-broker-down"
    table = services.unique_table("xdown")
    offsets_table = services.unique_table("xdownoffsets")
    checkpoint_dir = str(tmp_path / "checkpoint")
    waves = _scores(int(time.time()) - 900)
    runs = []

    def start():
        argv = [pipeline.__file__, "file://" + checkpoint_dir, servers, name, postgresql_url, table]
        argv += [offsets_table, "down-" + uuid.uuid4().hex[:8]]
        runs.append(drivers.start(argv, str(tmp_path / ("run%d" % len(runs))), env={pipeline.RUN_ENV: str(len(runs))}))
        return runs[-1]

    try:
        admin = AdminClient({"bootstrap.servers": servers})
        admin.create_topics([NewTopic(name, num_partitions=PARTITIONS, replication_factor=1)])[name].result(60)
        _produce(servers, name, waves[0])
        proc = start()
        deadline = time.time() + RUN_TIMEOUT_S
        while _commits(checkpoint_dir) < 1:
            assert proc.poll() is None, "the run failed: %s" % drivers.log_tail(proc)
            assert time.time() < deadline, "the run committed no batch: %s" % drivers.log_tail(proc)
            time.sleep(0.2)
        kafka.kill()
        time.sleep(10)
        kafka.start()
        produced = [score for wave in waves for score in wave]
        for wave in waves[1:]:
            _produce(servers, name, wave)
        expected = sessions_to_postgres.sessions(produced, gap_seconds=pipeline.GAP_S)

        def restart(log):
            assert "kafka" in log.lower(), "the run ended without naming Kafka: %s" % log
            assert len(runs) < 3, "the run failed again after a restart: %s" % log
            return start()  # the same checkpoint: it resumes

        _wait_for_table(postgresql_url, table, expected, proc, restart)
        _each_message_read_once(postgresql_url, offsets_table, len(produced))
    finally:
        for proc in runs:
            drivers.kill(proc)
        kafka.close()
        services.drop_table(postgresql_url, table)
        services.drop_table(postgresql_url, offsets_table)
