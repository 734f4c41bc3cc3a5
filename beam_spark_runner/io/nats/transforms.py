"""`ReadFromNats`: messages of a NATS JetStream stream as a Beam source,
unbounded in a streaming pipeline and up to the stream's end at submission
in a batch one (docs/io.md, "Message brokers").

A splittable DoFn per subject filter (one for the whole stream when none
is given) whose restriction is the range of stream sequences
(io/nats/client.py), with the watermark and acknowledgement
rules of io/broker_reads.py: with nothing new, the watermark moves to the
stream's newest message time (a later message gets a later one). With
`durable`, a durable consumer per subject filter is acknowledged once a
checkpoint covers the messages, and a new run starts after its
acknowledged floor.
"""

import functools
import typing

import apache_beam as beam
from apache_beam.options.pipeline_options import StandardOptions
from apache_beam.utils.timestamp import Timestamp

from beam_spark_runner.io.nats.client import JetStreamReader, NatsError
from beam_spark_runner.connectors.event_times import parse_event_time
from beam_spark_runner.io.broker_reads import PositionRangeRead, Read, read_partitions, rules_of


class NatsMessage(typing.NamedTuple):
    """One message: its subject, stream sequence, payload and headers."""

    subject: str
    sequence: int
    data: bytes
    headers: typing.Dict[str, str]


beam.coders.registry.register_coder(NatsMessage, beam.coders.RowCoder)


class ReadFromNats(beam.PTransform):
    """Reads the messages of JetStream `stream` at `servers` (`nats://host:port`,
    or a list), of `subjects` (filters, each read in parallel; none: the
    whole stream), as `NatsMessage` rows, each timestamped by the server's
    publish time or by the header `timestamp_header` (seconds since the
    epoch or an ISO-8601 time; a message without a readable one fails the
    run, naming it). Starts at `start_sequence` (1: the beginning, "new":
    messages published after the read starts) unless `durable` names an
    existing durable consumer, whose acknowledged floor it continues from."""

    def __init__(
        self,
        servers,
        stream,
        subjects=None,
        durable=None,
        start_sequence=1,
        timestamp_header=None,
        max_out_of_orderness=0,
        idle_timeout=None,
        max_messages_per_read=10000,
        poll_interval=0.5,
    ):
        super().__init__()
        label = "ReadFromNats(%s)" % stream
        if isinstance(subjects, str):
            subjects = [subjects]
        if start_sequence != "new" and (
            isinstance(start_sequence, bool) or not isinstance(start_sequence, int) or start_sequence < 1
        ):
            raise ValueError(
                '%s: start_sequence must be a sequence number >= 1 or "new", got %r' % (label, start_sequence)
            )
        self._servers, self._stream = servers, stream
        self._subjects = tuple(subjects or ("",))  # "": the whole stream
        self._durable, self._start, self._header = durable, start_sequence, timestamp_header
        self._rules = rules_of(
            label, max_out_of_orderness, idle_timeout, max_messages_per_read, poll_interval, timestamp_header is None
        )

    def expand(self, pbegin):
        reader = JetStreamReader(self._servers)
        try:
            end = reader.end_sequence(self._stream)  # NatsError names a missing stream
        finally:
            reader.close()
        streaming = bool(pbegin.pipeline.options.view_as(StandardOptions).streaming)
        ends = None if streaming else {s: end for s in self._subjects}
        durables = {s: _durable_name(self._durable, i, len(self._subjects)) for i, s in enumerate(self._subjects)}
        read = (_UnboundedSubjectRead if streaming else _SubjectRead)(
            self._rules,
            ends,
            self._servers,
            self._stream,
            durables if self._durable else None,
            self._start,
            self._header,
        )
        return read_partitions(pbegin, self._subjects, read, NatsMessage)


def _durable_name(durable, index, count):
    """One durable consumer per subject filter: `durable`, or `durable-<i>`
    when there are several."""
    if durable is None:
        return None
    return durable if count == 1 else "%s-%d" % (durable, index)


class _SubjectRead(PositionRangeRead):
    """Reads one subject filter of the stream (the element; "" for all)."""

    def __init__(self, rules, ends, servers, stream, durables, start, header):
        super().__init__(rules, ends)
        self._servers, self._stream, self._durables = servers, stream, durables
        self._start, self._header = start, header

    def setup(self):
        self._reader = None  # connected at the first read

    def teardown(self):
        reader = getattr(self, "_reader", None)
        if reader is not None:
            reader.close()

    def start_position(self, subject):
        reader = JetStreamReader(self._servers)
        try:
            durable = self._durables[subject] if self._durables else None
            start = reader.acknowledged_floor(self._stream, durable) if durable else None
            if start is None:
                start = reader.end_sequence(self._stream) if self._start == "new" else self._start
                if durable:
                    reader.start_durable(self._stream, durable, subject or None, start)
            return start
        finally:
            reader.close()

    def _connected_reader(self):
        """The worker's reader, connected again when the server went away
        (a restarted broker is read again from the restriction's position)."""
        if self._reader is None or self._reader.closed:
            if self._reader is not None:
                try:
                    self._reader.close()
                except Exception:  # noqa: BLE001 -- the lost connection may fail to close
                    pass
            self._reader = None
            self._reader = JetStreamReader(self._servers)
        return self._reader

    def read(self, subject, start, stop, count, wait_s):
        messages, exhausted = self._labelled(
            lambda: self._connected_reader().read(self._stream, subject or None, start, stop, count, wait_s)
        )
        return [
            Read(m.sequence, NatsMessage(m.subject, m.sequence, m.data, m.headers), self._event_time(m))
            for m in messages
        ], exhausted

    def broker_now(self):
        last = self._labelled(lambda: self._connected_reader().last_time(self._stream))
        return Timestamp.of(last.timestamp()) if last is not None else Timestamp.of(0)

    def _labelled(self, action):
        """`action()`, its NatsError named by this read (the stream)."""
        try:
            return action()
        except NatsError as e:
            raise NatsError("%s: %s" % (self._rules.label, e)) from None

    def acknowledgement(self, subject, position):
        if not self._durables:
            return None
        return functools.partial(
            _acknowledge, self._servers, self._stream, self._durables[subject], subject or None, position
        )

    def _event_time(self, message):
        if self._header is None:
            return Timestamp.of(message.published.timestamp())
        ok, value = parse_event_time(message.headers.get(self._header))
        if not ok:
            raise NatsError(
                "%s: message %d (%s) has no readable %r header (seconds since the epoch or an ISO-8601 time): %r"
                % (
                    self._rules.label,
                    message.sequence,
                    message.subject,
                    self._header,
                    message.headers.get(self._header),
                )
            )
        return Timestamp.of(value)


@beam.DoFn.unbounded_per_element()
class _UnboundedSubjectRead(_SubjectRead):
    pass


def _acknowledge(servers, stream, durable, subject, position):
    reader = JetStreamReader(servers)
    try:
        reader.acknowledge(stream, durable, subject, position)
    finally:
        reader.close()
