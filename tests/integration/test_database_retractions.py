"""RETRACTING sessions from a Redis stream into a PostgreSQL table keyed by
(user, session start), checked while the pipeline runs: after each wave of
events is in, the table equals the sessions those events make (computed
here in plain Python), although waves merge sessions published by earlier
micro-batches (their rows must go) and arrive late."""

import time
import typing
import uuid

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.runner import PipelineState
from apache_beam.transforms import trigger, window

import triggers
from beam_spark_runner import SparkRunner
from beam_spark_runner.io import ReadFromRedisStreams, WriteToDatabase
from tests import services

GAP_S = 10
# Each wave: (user, event time in seconds, value). The second wave's a@8
# merges a's sessions [0, 10) and [15, 25); the third's b@5 arrives after
# the watermark passed it and merges into b's [0, 10).
WAVES = [
    [("a", 0, 1), ("a", 15, 2), ("b", 0, 4)],
    [("a", 8, 8), ("b", 30, 16)],
    [("a", 100, 32), ("b", 5, 64)],
]


class SessionTotal(typing.NamedTuple):
    user: str
    session_start: int
    total: int


class _SessionRow(beam.DoFn):
    def process(self, element, w=beam.DoFn.WindowParam):
        user, total = element
        yield triggers.retractions.map_pane(lambda t: SessionTotal(user, int(w.start), t), total)


def _sessions(events):
    """(user, start, total) of the sessions of gap GAP_S the events make."""
    found = []
    for user in sorted({u for u, _, _ in events}):
        current = None
        for _, t, value in sorted(e for e in events if e[0] == user):
            if current is not None and t < current[1]:
                current = [current[0], max(current[1], t + GAP_S), current[2] + value]
            else:
                if current is not None:
                    found.append((user, current[0], current[2]))
                current = [t, t + GAP_S, value]
        found.append((user, current[0], current[2]))
    return sorted(found)


def _table(url, table):
    return sorted(tuple(r) for r in services.execute(url, 'SELECT "user", session_start, total FROM %s' % table))


def test_the_table_holds_the_current_sessions_after_every_wave(request, postgresql_url):
    import redis

    services.require(request, services.REDIS)
    client = redis.Redis.from_url(services.REDIS)
    stream, table = "beam-sessions-%s" % uuid.uuid4().hex[:8], services.unique_table("sessions")
    p = beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(["--streaming"]))
    _ = (
        p
        | ReadFromRedisStreams(services.REDIS, stream, timestamp_field="ts", poll_interval=0.2)
        | beam.Map(lambda e: (e.fields["user"], int(e.fields["value"])))
        | beam.WindowInto(
            window.Sessions(GAP_S),
            trigger=trigger.AfterWatermark(early=trigger.AfterCount(1), late=trigger.AfterCount(1)),
            accumulation_mode=triggers.RETRACTING,
            allowed_lateness=3600,
        )
        | beam.CombinePerKey(sum)
        | beam.ParDo(_SessionRow()).with_output_types(SessionTotal)
        | WriteToDatabase(postgresql_url, table, key_columns=["user", "session_start"])
    )
    result = p.run()
    sent, seen = [], []
    try:
        for wave in WAVES:
            for user, t, value in wave:
                client.xadd(stream, {"user": user, "ts": str(t), "value": str(value)})
            sent.extend(wave)
            expected = _sessions(sent)
            deadline = time.time() + 120
            # Every session fires early with what it holds, so once the wave
            # is in, the totals add up to everything sent.
            while services.row_count(postgresql_url, table) == 0 or sum(
                r[2] for r in _table(postgresql_url, table)
            ) != sum(v for _, _, v in sent):
                assert result.state not in (PipelineState.FAILED, PipelineState.DONE), result.state
                assert time.time() < deadline, "after wave %d the table is %s" % (
                    len(seen),
                    _table(postgresql_url, table),
                )
                time.sleep(0.3)
            seen.append(_table(postgresql_url, table))
            assert seen[-1] == expected, "after wave %d" % len(seen)
        # The merges of the second and third waves removed published rows.
        assert ("a", 15, 2) in seen[0] and ("a", 15, 2) not in seen[1]
        assert ("b", 5, 64) not in seen[2] and ("b", 0, 68) in seen[2]
        result.drain()
        assert result.wait_until_finish(120 * 1000) == PipelineState.DRAINED
        assert _table(postgresql_url, table) == _sessions(sent)
    finally:
        if result.state not in (PipelineState.DRAINED, PipelineState.DONE, PipelineState.FAILED):
            result.cancel()
        client.delete(stream)
        services.drop_table(postgresql_url, table)
