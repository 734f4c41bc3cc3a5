"""`ReadFromRedisStreams`: Redis Streams entries as a Beam source, unbounded
in a streaming pipeline and up to each stream's end at submission in a
batch one (docs/io.md, "Message brokers").

A splittable DoFn per stream whose restriction is the range of entry
positions (connectors/redis_streams.py): the runner keeps it in its
checkpoint, so a restarted or replayed micro-batch reads from the same
position. Its watermark is held per stream: the newest event time read
minus `max_out_of_orderness`, never back; a stream with nothing new moves
it to the server's clock when event times are the entries' ids (a later
entry cannot have an older id), or, with `timestamp_field`, to the local
clock minus `idle_timeout` when one is given. With `consumer_group`, the
group's last-delivered id follows the entries once a checkpoint covers
them (a bundle finalizer), and a new run starts where the group is.
"""

import functools
import typing

import apache_beam as beam
from apache_beam.io.restriction_trackers import OffsetRange, OffsetRestrictionTracker
from apache_beam.io.watermark_estimators import ManualWatermarkEstimator
from apache_beam.options.pipeline_options import StandardOptions
from apache_beam.transforms.core import RestrictionProvider
from apache_beam.utils.timestamp import Duration, Timestamp

from beam_spark_runner.connectors.redis_streams import (
    END_OF_TIME,
    RedisStreamsError,
    StreamReader,
    millis_of,
    parse_event_time,
    position_of,
)


class RedisStreamEntry(typing.NamedTuple):
    """One entry: its stream, its id and its field/value pairs (as text)."""

    stream: str
    id: str
    fields: typing.Dict[str, str]


beam.coders.registry.register_coder(RedisStreamEntry, beam.coders.RowCoder)


def _seconds(value, name, label):
    if value is None:
        return None
    if isinstance(value, Duration):
        return value.micros / 1e6
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError("%s: %s must be a non-negative number of seconds or a Duration, got %r" % (label, name, value))
    return float(value)


class ReadFromRedisStreams(beam.PTransform):
    """Reads the entries of `streams` (names of Redis streams at `url`,
    `redis://host:port/db`) as `RedisStreamEntry` rows, each timestamped by
    its id's milliseconds, or by `timestamp_field` (seconds since the epoch
    or an ISO-8601 time; an entry without a readable one is refused, naming
    it). Starts at `start_id` ("0": the beginning, "$": entries added
    after the read starts) unless `consumer_group` names an existing group,
    whose position it then continues from."""

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
        self._label = "ReadFromRedisStreams(%s)" % ", ".join(streams if not isinstance(streams, str) else [streams])
        if isinstance(streams, str):
            streams = [streams]
        if not streams:
            raise ValueError("%s: name at least one stream" % self._label)
        if start_id != "$":
            position_of(start_id)  # RedisStreamsError names a malformed id
        if not isinstance(max_entries_per_read, int) or max_entries_per_read < 1:
            raise ValueError("%s: max_entries_per_read must be a positive int" % self._label)
        self._config = _ReadConfig(
            url,
            tuple(streams),
            consumer_group,
            start_id,
            timestamp_field,
            _seconds(max_out_of_orderness, "max_out_of_orderness", self._label),
            _seconds(idle_timeout, "idle_timeout", self._label),
            max_entries_per_read,
            _seconds(poll_interval, "poll_interval", self._label),
            self._label,
        )

    def expand(self, pbegin):
        config = self._config
        reader = StreamReader(config.url)
        for stream in config.streams:
            reader.check(stream)
        streaming = bool(pbegin.pipeline.options.view_as(StandardOptions).streaming)
        ends = None if streaming else {s: reader.end_position(s) for s in config.streams}
        read = _UnboundedRead(config) if streaming else _BoundedRead(config, ends)
        return (
            pbegin
            | "Streams" >> beam.Create(config.streams, reshuffle=False)
            | "Spread" >> beam.Reshuffle()
            | "Read" >> beam.ParDo(read).with_output_types(RedisStreamEntry)
        )


class _ReadConfig(typing.NamedTuple):
    url: str
    streams: typing.Tuple[str, ...]
    consumer_group: typing.Optional[str]
    start_id: str
    timestamp_field: typing.Optional[str]
    out_of_orderness_s: float
    idle_timeout_s: typing.Optional[float]
    max_entries: int
    poll_interval_s: float
    label: str


class _BoundedRead(beam.DoFn, RestrictionProvider):
    """Reads one stream; its own restriction provider. A stream's
    restriction is [start, end) of entry positions; `ends` (a bounded read)
    holds each stream's end at submission."""

    def __init__(self, config, ends=None):
        self._config = config
        self._ends = ends

    def setup(self):
        self._reader = StreamReader(self._config.url)

    def initial_restriction(self, stream):
        config = self._config
        reader = StreamReader(config.url)
        start = reader.group_position(stream, config.consumer_group) if config.consumer_group else None
        if start is None:
            start = reader.end_position(stream) if config.start_id == "$" else position_of(config.start_id)
            if config.consumer_group:
                reader.start_group(stream, config.consumer_group, start)
        end = self._ends[stream] if self._ends is not None else END_OF_TIME
        return OffsetRange(start, max(start, end))

    def create_tracker(self, restriction):
        return OffsetRestrictionTracker(restriction)

    def restriction_size(self, stream, restriction):
        return restriction.size()

    def truncate(self, stream, restriction):
        # Drained: an unbounded read stops; a bounded one reads to its end.
        return restriction if self._ends is not None else None

    def process(
        self,
        stream,
        # Beam passes the tracker and the estimator by keyword: they come last.
        finalizer=beam.DoFn.BundleFinalizerParam,
        tracker=beam.DoFn.RestrictionParam(),
        estimator=beam.DoFn.WatermarkEstimatorParam(ManualWatermarkEstimator.default_provider()),
    ):
        config = self._config
        restriction = tracker.current_restriction()
        entries = self._reader.read(stream, restriction.start, restriction.stop, config.max_entries)
        newest, last = None, None
        for entry in entries:
            if not tracker.try_claim(entry.position):
                break
            ts = self._event_time(entry)
            newest = ts if newest is None or ts > newest else newest
            last = entry.position
            yield beam.window.TimestampedValue(RedisStreamEntry(entry.stream, entry.id, entry.fields), ts)
        self._hold(estimator, newest, entries)
        if config.consumer_group and last is not None:
            finalizer.register(functools.partial(_advance_group, config.url, stream, config.consumer_group, last + 1))
        if len(entries) >= config.max_entries:
            tracker.defer_remainder(Duration(seconds=0))  # more may be there: read on at once
        elif self._ends is not None:
            # Everything up to the end at submission is read.
            if restriction.stop > restriction.start and (last is None or last < restriction.stop - 1):
                tracker.try_claim(restriction.stop - 1)
        else:
            tracker.defer_remainder(Duration(seconds=config.poll_interval_s))

    def _event_time(self, entry):
        field = self._config.timestamp_field
        if field is None:
            return Timestamp(micros=millis_of(entry.position) * 1000)
        ok, seconds = parse_event_time(entry.fields.get(field))
        if not ok:
            raise RedisStreamsError(
                "%s: entry %s of stream %r has no readable %r field (seconds since the epoch or an ISO-8601 "
                "time): %r" % (self._config.label, entry.id, entry.stream, field, entry.fields.get(field))
            )
        return Timestamp.of(seconds)

    def _hold(self, estimator, newest, entries):
        config = self._config
        current = estimator.current_watermark()
        if newest is not None:
            proposed = newest - Duration(seconds=config.out_of_orderness_s)
        elif entries:
            return
        elif config.timestamp_field is None:
            # No entry is due: a later one gets a later id than the server's clock now.
            proposed = Timestamp(micros=self._reader.server_millis() * 1000) - Duration(
                seconds=config.out_of_orderness_s
            )
        elif config.idle_timeout_s is not None:
            proposed = Timestamp.now() - Duration(seconds=config.idle_timeout_s)
        else:
            return
        if current is None or proposed > current:
            estimator.set_watermark(proposed)


@beam.DoFn.unbounded_per_element()
class _UnboundedRead(_BoundedRead):
    pass


def _advance_group(url, stream, group, position):
    StreamReader(url).advance_group(stream, group, position)
