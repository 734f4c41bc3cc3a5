"""examples/sessions_to_postgres.py against the machine's NATS and
PostgreSQL: the Dataflow paper's sessions in RETRACTING mode, the table
read after each wave of scores while the pipeline runs. Merges remove rows
that earlier micro-batches published, a late score joins a published
session, and the table always holds the current sessions."""

import os
import sys
import uuid

from apache_beam.internal.cloudpickle import cloudpickle

from tests import services

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
