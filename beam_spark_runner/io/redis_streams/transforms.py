"""`ReadFromRedisStreams`: Redis Streams entries as a Beam source, unbounded
in a streaming pipeline and up to each stream's end at submission in a
batch one (docs/io.md, "Message brokers").

A splittable DoFn per stream whose restriction is the range of entry
positions (io/redis_streams/client.py), with the watermark and
acknowledgement rules of io/broker_reads.py: a stream with nothing new
moves the watermark to the server's clock when event times are the
entries' ids (a later entry cannot have an older id). With
`consumer_group`, the group's last-delivered id follows the entries once a
checkpoint covers them, and a new run starts where the group is.
"""

import functools
import typing

import apache_beam as beam
from apache_beam.options.pipeline_options import StandardOptions
from apache_beam.utils.timestamp import Timestamp

from beam_spark_runner.io.redis_streams.client import (
    RedisStreamsError,
    StreamReader,
    millis_of,
    position_of,
)
from beam_spark_runner.connectors.event_times import parse_event_time
from beam_spark_runner.io.broker_reads import PositionRangeRead, Read, read_partitions, rules_of


class RedisStreamEntry(typing.NamedTuple):
    """One entry: its stream, its id and its field/value pairs (as text)."""

    stream: str
    id: str
    fields: typing.Dict[str, str]


beam.coders.registry.register_coder(RedisStreamEntry, beam.coders.RowCoder)


class ReadFromRedisStreams(beam.PTransform):
    """Reads the entries of `streams` (names of Redis streams at `url`,
    `redis://host:port/db`) as `RedisStreamEntry` rows, each timestamped by
    its id's milliseconds, or by `timestamp_field` (seconds since the epoch
    or an ISO-8601 time; an entry without a readable one fails the run,
    naming it). Starts at `start_id` ("0": the beginning, "$": entries
    added after the read starts) unless `consumer_group` names an existing
    group, whose position it then continues from."""

    def __init__(
        self,
        url,
        streams,
        consumer_group=None,
        start_id="0",
        timestamp_field=None,
        max_out_of_orderness=0,
        idle_timeout=None,
        max_entries_per_read=10000,
        poll_interval=0.5,
    ):
        super().__init__()
        if isinstance(streams, str):
            streams = [streams]
        label = "ReadFromRedisStreams(%s)" % ", ".join(streams)
        if not streams:
            raise ValueError("%s: name at least one stream" % label)
        if start_id != "$":
            position_of(start_id)  # RedisStreamsError names a malformed id
        self._url, self._streams = url, tuple(streams)
        self._group, self._start_id, self._field = consumer_group, start_id, timestamp_field
        self._rules = rules_of(
            label, max_out_of_orderness, idle_timeout, max_entries_per_read, poll_interval, timestamp_field is None
        )

    def expand(self, pbegin):
        reader = StreamReader(self._url)
        for stream in self._streams:
            reader.check(stream)
        streaming = bool(pbegin.pipeline.options.view_as(StandardOptions).streaming)
        ends = None if streaming else {s: reader.end_position(s) for s in self._streams}
        read = (_UnboundedStreamRead if streaming else _StreamRead)(
            self._rules, ends, self._url, self._group, self._start_id, self._field
        )
        return read_partitions(pbegin, self._streams, read, RedisStreamEntry)


class _StreamRead(PositionRangeRead):
    """Reads one stream (the element is its name)."""

    def __init__(self, rules, ends, url, group, start_id, field):
        super().__init__(rules, ends)
        self._url, self._group, self._start_id, self._field = url, group, start_id, field

    def setup(self):
        self._reader = StreamReader(self._url)

    def start_position(self, stream):
        reader = StreamReader(self._url)
        start = reader.group_position(stream, self._group) if self._group else None
        if start is None:
            start = reader.end_position(stream) if self._start_id == "$" else position_of(self._start_id)
            if self._group:
                reader.start_group(stream, self._group, start)
        return start

    def read(self, stream, start, stop, count, wait_s):
        entries = self._reader.read(stream, start, stop, count)
        # XRANGE returns every entry in the range up to `count`: a short page is all there is.
        exhausted = len(entries) < count
        return [
            Read(e.position, RedisStreamEntry(e.stream, e.id, e.fields), self._event_time(e)) for e in entries
        ], exhausted

    def broker_now(self):
        return Timestamp(micros=self._reader.server_millis() * 1000)

    def acknowledgement(self, stream, position):
        if not self._group:
            return None
        return functools.partial(_advance_group, self._url, stream, self._group, position)

    def _event_time(self, entry):
        if self._field is None:
            return Timestamp(micros=millis_of(entry.position) * 1000)
        ok, value = parse_event_time(entry.fields.get(self._field))
        if not ok:
            raise RedisStreamsError(
                "%s: entry %s of stream %r has no readable %r field (seconds since the epoch or an ISO-8601 "
                "time): %r" % (self._rules.label, entry.id, entry.stream, self._field, entry.fields.get(self._field))
            )
        return Timestamp.of(value)


@beam.DoFn.unbounded_per_element()
class _UnboundedStreamRead(_StreamRead):
    pass


def _advance_group(url, stream, group, position):
    StreamReader(url).advance_group(stream, group, position)
