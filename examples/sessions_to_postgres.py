"""The Dataflow paper's sessions, from NATS JetStream into a PostgreSQL table
that always holds the right session sums.

Scores are published to a JetStream stream (`--stream`, subjects
`<stream lowercased>.scores`) as JSON `{"user": ..., "score": ...}` with
their event time in the header `ts` (seconds since the epoch). The
pipeline reads them with `ReadFromNats`, groups each user's scores into
sessions (a gap of `--gap_seconds`), fires every session early with each
new score and late with each late one, in RETRACTING mode, and writes one
row per session with `WriteToDatabase`, keyed by (user, session_start):
when a score bridges two sessions, both published rows are retracted
(deleted) and the merged session's row is written, in the same commit.
So `SELECT * FROM <table>` shows the current sessions at every moment;
each micro-batch's changes land once, when it is a completed checkpoint.

With `--demo`, the example publishes the paper's scores in three waves,
prints the table after each, then drains the run:

    python examples/sessions_to_postgres.py --demo \\
        --nats nats://127.0.0.1:4222 --database postgresql://postgres@127.0.0.1:5432/test
"""

import argparse
import asyncio
import concurrent.futures
import json
import time
import typing

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import trigger, window

import triggers
from beam_spark_runner.io import ReadFromNats, WriteToDatabase

# The demo's waves: (user, event time in seconds, score). The second wave's
# score at 8 s bridges alice's sessions [0, 10) and [15, 25); the third's
# bob at 5 s comes after the watermark passed it (late) and joins [0, 10).
WAVES = [
    [("alice", 0, 5), ("alice", 15, 7), ("bob", 0, 3)],
    [("alice", 8, 4), ("bob", 30, 8)],
    [("alice", 100, 3), ("bob", 5, 9)],
]


class SessionTotal(typing.NamedTuple):
    """A row of the table."""

    user: str
    session_start: int
    total: int


class _SessionRow(beam.DoFn):
    """(user, total) of a session's pane, or its retraction, as a row."""

    def process(self, element, w=beam.DoFn.WindowParam):
        user, total = element
        yield triggers.retractions.map_pane(lambda t: SessionTotal(user, int(w.start), t), total)


def _score(message):
    event = json.loads(message.data)
    return event["user"], int(event["score"])


def build(p, nats, stream, database, table, gap_seconds=10):
    """Adds the sessions pipeline to `p`."""
    return (
        p
        | "Scores" >> ReadFromNats(nats, stream, timestamp_header="ts", poll_interval=0.2)
        | "ByUser" >> beam.Map(_score)
        | "Sessions"
        >> beam.WindowInto(
            window.Sessions(gap_seconds),
            trigger=trigger.AfterWatermark(early=trigger.AfterCount(1), late=trigger.AfterCount(1)),
            accumulation_mode=triggers.RETRACTING,
            allowed_lateness=3600,
        )
        | "Sum" >> beam.CombinePerKey(sum)
        | "AsRows" >> beam.ParDo(_SessionRow()).with_output_types(SessionTotal)
        | "Table" >> WriteToDatabase(database, table, key_columns=["user", "session_start"])
    )


async def _with_jetstream(nats, action):
    import nats as nats_client

    nc = await nats_client.connect(nats)
    try:
        return await action(nc.jetstream())
    finally:
        await nc.close()


def _run_with_jetstream(nats, action):
    """Runs `action(jetstream)` on an event loop in a thread of its own, so
    it also works where the caller's thread runs a loop (a notebook)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, _with_jetstream(nats, action)).result()


def create_stream(nats, stream):
    async def create(js):
        await js.add_stream(name=stream, subjects=["%s.scores" % stream.lower()])

    _run_with_jetstream(nats, create)


def publish(nats, stream, scores):
    """Publishes (user, event time in seconds, score) tuples."""

    async def send(js):
        for user, ts, score in scores:
            data = json.dumps({"user": user, "score": score}).encode()
            await js.publish("%s.scores" % stream.lower(), data, headers={"ts": str(ts)})

    _run_with_jetstream(nats, send)


def sessions(scores, gap_seconds=10):
    """The sessions (user, start, total) the scores make, in plain Python."""
    found = []
    for user in sorted({u for u, _, _ in scores}):
        current = None
        for _, ts, score in sorted(s for s in scores if s[0] == user):
            if current is not None and ts < current[1]:
                current = [current[0], max(current[1], ts + gap_seconds), current[2] + score]
            else:
                if current is not None:
                    found.append((user, current[0], current[2]))
                current = [ts, ts + gap_seconds, score]
        found.append((user, current[0], current[2]))
    return sorted(found)


def table_rows(database, table):
    from beam_spark_runner.io.database.sql_dialects import dialect_of

    dialect = dialect_of(database)
    with dialect.connect() as conn:
        cursor = conn.cursor()
        cursor.execute("SELECT %s, session_start, total FROM %s" % (dialect.quote("user"), dialect.quote_table(table)))
        return sorted(tuple(r) for r in cursor.fetchall())


def wait_for_sessions(database, table, scores, result, timeout_s=120):
    """Waits until the table holds the sessions of `scores`; returns its rows."""
    from apache_beam.runners.runner import PipelineState

    expected = sessions(scores)
    deadline = time.time() + timeout_s
    while True:
        try:
            rows = table_rows(database, table)
        except Exception:  # noqa: BLE001 -- the table is made when the run starts
            rows = []
        if rows == expected:
            return rows
        if result.state in (PipelineState.FAILED, PipelineState.DONE) or time.time() > deadline:
            raise RuntimeError("the table holds %s, not the sessions %s" % (rows, expected))
        time.sleep(0.3)


def run(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nats", default="nats://127.0.0.1:4222")
    parser.add_argument("--stream", default="SESSIONS_DEMO")
    parser.add_argument("--database", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--table", default="session_totals")
    parser.add_argument("--demo", action="store_true", help="publish the demo's scores in waves and print the table")
    args, beam_args = parser.parse_known_args(argv)
    if args.demo:
        create_stream(args.nats, args.stream)
    options = PipelineOptions(["--runner=beam_spark_runner.SparkRunner", "--streaming", *beam_args])
    p = beam.Pipeline(options=options)
    build(p, args.nats, args.stream, args.database, args.table)
    result = p.run()
    if not args.demo:
        return result.wait_until_finish()
    sent, seen = [], []
    for number, wave in enumerate(WAVES, start=1):
        publish(args.nats, args.stream, wave)
        sent.extend(wave)
        seen.append(wait_for_sessions(args.database, args.table, sent, result))
        print("after wave %d:" % number)
        for user, start, total in seen[-1]:
            print("  %-6s session at %3d s: %d" % (user, start, total))
    result.drain()
    result.wait_until_finish()
    return seen


if __name__ == "__main__":
    run()
