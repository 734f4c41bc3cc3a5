"""examples/sessions_to_postgres.py against the machine's NATS and
PostgreSQL: the Dataflow paper's sessions in RETRACTING mode, the table
read after each wave of scores while the pipeline runs, and as every
micro-batch's commit left it. Merges remove rows that earlier
micro-batches published, a late score joins a published session, and the
table always holds the current sessions."""

import os
import sys
import uuid

import apache_beam as beam
from apache_beam.internal.cloudpickle import cloudpickle
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.runner import PipelineState

from beam_spark_runner import SparkRunner
from beam_spark_runner.io.database.sink_protocol import MARKER_TABLE
from tests import services
from tests.private_servers import PrivatePostgres

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
import sessions_to_postgres  # noqa: E402

# Run as a script, the example's functions pickle by value; imported here they
# would pickle by name, and Spark's workers cannot import examples/.
cloudpickle.register_pickle_by_value(sessions_to_postgres)


def _delete_stream(stream):
    sessions_to_postgres.asyncio.run(
        sessions_to_postgres._with_jetstream(services.NATS, lambda js: js.delete_stream(stream))
    )


def test_the_table_holds_the_current_sessions_after_every_wave(request, postgresql_url, capsys):
    services.require(request, services.NATS)
    stream, table = "SESSIONS_%s" % uuid.uuid4().hex[:8].upper(), services.unique_table("sessions")
    args = ["--demo", "--nats", services.NATS, "--stream", stream, "--database", postgresql_url, "--table", table]
    try:
        seen = sessions_to_postgres.run(args)
        final = sessions_to_postgres.table_rows(postgresql_url, table)
    finally:
        _delete_stream(stream)
        services.drop_table(postgresql_url, table)
    assert seen == [
        [("alice", 0, 5), ("alice", 15, 7), ("bob", 0, 3)],
        # alice's score at 8 s merged [0, 10) and [15, 25): both rows retracted.
        [("alice", 0, 16), ("bob", 0, 3), ("bob", 30, 8)],
        # bob's late score at 5 s joined [0, 10).
        [("alice", 0, 16), ("alice", 100, 3), ("bob", 0, 12), ("bob", 30, 8)],
    ]
    assert final == seen[-1]
    assert "after wave 3:" in capsys.readouterr().out


# One score at a time (user, event time in seconds, score): merges (alice
# at 8 s, carol at 47 s), scores behind the watermark that join published
# sessions (bob at 5 s, carol at 45 s after alice at 100 s) and new
# sessions.
SCORES = [
    ("alice", 0, 5),
    ("alice", 15, 7),
    ("bob", 0, 3),
    ("alice", 8, 4),
    ("bob", 30, 8),
    ("carol", 40, 1),
    ("carol", 52, 2),
    ("alice", 100, 3),
    ("bob", 5, 9),
    ("carol", 47, 6),
    ("alice", 105, 1),
    ("bob", 200, 1),
]


def _snapshot_every_commit(url, table):
    """Makes the database copy `table` into `table`_history as each
    micro-batch's commit leaves it: a deferred trigger on the sink's marker
    row runs at the commit, after the rows moved."""
    services.execute(
        url,
        'CREATE TABLE %s ("user" TEXT NOT NULL, session_start BIGINT NOT NULL, total BIGINT, '
        'PRIMARY KEY ("user", session_start))' % table,
        "CREATE TABLE %s (sink VARCHAR(64) NOT NULL, epoch BIGINT NOT NULL, PRIMARY KEY (sink, epoch))" % MARKER_TABLE,
        'CREATE TABLE %s_history (snapshot BIGINT, "user" TEXT, session_start BIGINT, total BIGINT)' % table,
        "CREATE SEQUENCE snapshots",
        "CREATE FUNCTION snapshot_sessions() RETURNS trigger AS $$ DECLARE s BIGINT := nextval('snapshots'); "
        "BEGIN INSERT INTO %s_history SELECT s, * FROM %s; "
        "INSERT INTO %s_history VALUES (s, NULL, NULL, NULL); RETURN NULL; END $$ LANGUAGE plpgsql"
        % (table, table, table),
        "CREATE CONSTRAINT TRIGGER snapshot AFTER INSERT ON %s DEFERRABLE INITIALLY DEFERRED "
        "FOR EACH ROW EXECUTE FUNCTION snapshot_sessions()" % MARKER_TABLE,
    )


def _snapshots(url, table):
    """The table after each commit, in commit order."""
    found = {}
    for snapshot, user, start, total in services.execute(url, "SELECT * FROM %s_history" % table):
        rows = found.setdefault(snapshot, [])
        if user is not None:
            rows.append((user, start, total))
    return [sorted(found[s]) for s in sorted(found)]


def test_every_committed_micro_batch_leaves_the_sessions_of_what_was_read(tmp_path, request):
    """After each micro-batch's commit the table holds exactly the sessions
    plain Python computes from the scores read so far (a prefix of the
    stream, growing from commit to commit): never a merged session beside
    the sessions it replaced, never a retracted row left behind."""
    services.require(request, services.NATS)
    database = PrivatePostgres(request)
    stream, table = "SESSIONS_%s" % uuid.uuid4().hex[:8].upper(), "sessions"
    sessions_to_postgres.create_stream(services.NATS, stream)
    _snapshot_every_commit(database.url, table)
    p = beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(["--streaming"]))
    sessions_to_postgres.build(p, services.NATS, stream, database.url, table)
    result = p.run()
    try:
        for n, score in enumerate(SCORES, start=1):
            sessions_to_postgres.publish(services.NATS, stream, [score])
            # The next score waits for this one's commit: however fast the
            # machine, every prefix of the stream becomes a state of the table.
            sessions_to_postgres.wait_for_sessions(database.url, table, SCORES[:n], result)
        result.drain()
        assert result.wait_until_finish(120 * 1000) == PipelineState.DRAINED
        snapshots = _snapshots(database.url, table)
    finally:
        if not PipelineState.is_terminal(result.state):
            result.cancel()
        _delete_stream(stream)
        database.close()
    prefixes = [sessions_to_postgres.sessions(SCORES[:k]) if k else [] for k in range(len(SCORES) + 1)]
    read = 0
    for index, rows in enumerate(snapshots):
        matches = [k for k in range(read, len(SCORES) + 1) if prefixes[k] == rows]
        assert matches, "commit %d left %s: the sessions of no prefix of the scores from the %dth on" % (
            index,
            rows,
            read,
        )
        read = matches[0]
    assert read == len(SCORES)
    # The scores came one by one: the table went through the state of every
    # prefix, each left by a commit.
    assert len({tuple(rows) for rows in snapshots}) >= len(SCORES), snapshots
