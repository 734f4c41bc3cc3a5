"""Redis Streams as a replayable source (`beam_spark_runner.io.ReadFromRedisStreams`),
through redis-py. No Spark, no Beam here.

A position is an entry id (`<milliseconds>-<sequence>`) as one integer,
`milliseconds << 22 | sequence`, so a read's restriction is an offset range
and a replay reads from the same position. A consumer group, when the
read names one, records how far the pipeline's checkpoints have come:
its last-delivered id moves (never back) only once a checkpoint covers
the entries, so a trim by the group's position never drops an entry the
pipeline may still replay, and a new run of the pipeline starts where the
group is.
"""

import dataclasses
from typing import Dict, List, Optional

SEQUENCE_BITS = 22
_SEQUENCE_MASK = (1 << SEQUENCE_BITS) - 1


class RedisStreamsError(RuntimeError):
    """A stream cannot be read as asked: the message names the server, the
    stream and the problem."""


def position_of(entry_id: str) -> int:
    millis, _, sequence = entry_id.partition("-")
    seq = int(sequence or 0)
    if seq > _SEQUENCE_MASK:
        raise RedisStreamsError(
            "entry id %s: its sequence part is above %d, which this reader's positions hold"
            % (entry_id, _SEQUENCE_MASK)
        )
    return int(millis) << SEQUENCE_BITS | seq


def id_of(position: int) -> str:
    return "%d-%d" % (position >> SEQUENCE_BITS, position & _SEQUENCE_MASK)


def millis_of(position: int) -> int:
    return position >> SEQUENCE_BITS


@dataclasses.dataclass(frozen=True)
class Entry:
    stream: str
    id: str
    position: int
    fields: Dict[str, str]


class StreamReader:
    """A connection to one Redis server (`url`: redis://host:port/db)."""

    def __init__(self, url: str):
        import redis

        self.url = url
        self._client = redis.Redis.from_url(url, decode_responses=True)

    def _fail(self, stream, error):
        return RedisStreamsError("Redis at %s, stream %r: %s" % (_redacted(self.url), stream, error))

    def check(self, stream):
        """Raises RedisStreamsError naming the server when it cannot be
        reached, or the stream when its key holds something else."""
        import redis

        try:
            kind = self._client.type(stream)
        except redis.RedisError as e:
            raise RedisStreamsError("cannot reach Redis at %s: %s" % (_redacted(self.url), e)) from None
        if kind not in ("stream", "none"):
            raise self._fail(stream, "the key holds a %s, not a stream" % kind)

    def end_position(self, stream) -> int:
        """The position after the stream's last entry now (0 if empty)."""
        last = self._client.xrevrange(stream, count=1)
        return position_of(last[0][0]) + 1 if last else 0

    def read(self, stream, start: int, stop: int, count: int) -> List[Entry]:
        """Up to `count` entries at positions in [start, stop), in order."""
        if start >= stop:
            return []
        found = self._client.xrange(stream, min=id_of(start), max=id_of(stop - 1), count=count)
        return [Entry(stream, entry_id, position_of(entry_id), fields) for entry_id, fields in found]

    def server_millis(self) -> int:
        seconds, micros = self._client.time()
        return seconds * 1000 + micros // 1000

    def group_position(self, stream, group) -> Optional[int]:
        """The position after the group's last-delivered id, or None when
        the group (or the stream) does not exist."""
        import redis

        try:
            groups = self._client.xinfo_groups(stream)
        except redis.ResponseError:
            return None
        for info in groups:
            if info["name"] == group:
                return position_of(info["last-delivered-id"]) + 1
        return None

    def start_group(self, stream, group, start: int):
        """Creates the group at `start` (the stream too if missing), unless
        it exists."""
        import redis

        try:
            self._client.xgroup_create(stream, group, id=id_of(max(start - 1, 0)), mkstream=True)
        except redis.ResponseError as e:
            if "BUSYGROUP" not in str(e):
                raise self._fail(stream, e) from None

    def advance_group(self, stream, group, position: int):
        """Moves the group's last-delivered id to `position` - 1, never back."""
        current = self.group_position(stream, group)
        if current is None:
            self.start_group(stream, group, position)
        elif position > current:
            self._client.xgroup_setid(stream, group, id=id_of(position - 1))


def _redacted(url):
    import urllib.parse

    parsed = urllib.parse.urlparse(url)
    host = parsed.hostname or ""
    port = ":%d" % parsed.port if parsed.port else ""
    return "%s://%s%s%s" % (parsed.scheme, host, port, parsed.path)
