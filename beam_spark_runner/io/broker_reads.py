"""What the message-broker reads share: a splittable DoFn per partition
(a Redis stream, a NATS subject) whose restriction is a range of broker
positions, with the watermark rule and the acknowledgement after the
checkpoint (`ReadFromRedisStreams`, `ReadFromNats`).

- Restriction: [start, end) of positions; the runner keeps it in its
  checkpoint, so a restarted or replayed micro-batch reads from the same
  position. Unbounded reads (streaming) end at 2**63 - 1 and are truncated
  to nothing by a drain; bounded reads (batch) end at the partition's end
  when the pipeline was built.
- One `process` call reads pages of up to `max_entries` messages while
  the broker says more is there, for at most `READ_BUDGET_S`, then
  defers the rest: at once while more is there, after `poll_interval`
  otherwise. A bounded read ends only once the broker
  says nothing is left before its end.
- Watermark, per partition, never back: the newest event time read minus
  `max_out_of_orderness`; with nothing new, also what the broker's clock
  allows when event times are the broker's (a later message gets a later
  broker time: `broker_now`), and the local clock minus `idle_timeout`
  when one is given.
- Acknowledgement: a bundle finalizer, which the runner runs once the
  bundle's micro-batch is a completed checkpoint, moves the broker-side
  position (consumer group, durable consumer) past what was read.
"""

import time
import typing

import apache_beam as beam
from apache_beam.io.restriction_trackers import OffsetRange, OffsetRestrictionTracker
from apache_beam.io.watermark_estimators import ManualWatermarkEstimator
from apache_beam.transforms.core import RestrictionProvider
from apache_beam.utils.timestamp import Duration, Timestamp

END_OF_TIME = (1 << 63) - 1
# One call reads pages for at most this long before it defers the rest.
READ_BUDGET_S = 1.0


class ReadRules(typing.NamedTuple):
    """How a broker read pages, waits and holds its watermark."""

    label: str
    out_of_orderness_s: float
    idle_timeout_s: typing.Optional[float]
    max_entries: int
    poll_interval_s: float
    broker_times: bool  # event times are the broker's own timestamps


class Read(typing.NamedTuple):
    """One message read: its position, the element and its event time."""

    position: int
    element: typing.Any
    timestamp: Timestamp


def read_partitions(pbegin, partitions, read, element_type):
    """`read` (a PositionRangeRead) over `partitions`, spread over workers."""
    return (
        pbegin
        | "Partitions" >> beam.Create(partitions, reshuffle=False)
        | "Spread" >> beam.Reshuffle()
        | "Read" >> beam.ParDo(read).with_output_types(element_type)
    )


def rules_of(label, max_out_of_orderness, idle_timeout, max_entries, poll_interval, broker_times):
    """The ReadRules of a read's arguments, checked (ValueError naming the read)."""
    if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 1:
        raise ValueError("%s: the page size must be a positive int, got %r" % (label, max_entries))
    return ReadRules(
        label,
        seconds(max_out_of_orderness, "max_out_of_orderness", label),
        seconds(idle_timeout, "idle_timeout", label),
        max_entries,
        seconds(poll_interval, "poll_interval", label),
        broker_times,
    )


def seconds(value, name, label):
    """A non-negative duration given as seconds or a Beam Duration, in seconds."""
    if value is None:
        return None
    if isinstance(value, Duration):
        return value.micros / 1e6
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError("%s: %s must be a non-negative number of seconds or a Duration, got %r" % (label, name, value))
    return float(value)


class PositionRangeRead(beam.DoFn, RestrictionProvider):
    """A bounded read of one partition per element (a subclass with
    `unbounded_per_element` reads on). Subclasses give `start_position`,
    `read`, `broker_now` and `acknowledgement`; `ends` holds each element's
    end position for a bounded read (None: unbounded)."""

    def __init__(self, rules: ReadRules, ends=None):
        self._rules = rules
        self._ends = ends

    # -- what a broker gives ----------------------------------------------------
    def start_position(self, element) -> int:
        raise NotImplementedError

    def read(self, element, start, stop, count, wait_s) -> typing.Tuple[typing.List[Read], bool]:
        """(up to `count` messages at positions in [start, stop), in order;
        whether none is left in that range after them now)."""
        raise NotImplementedError

    def broker_now(self) -> Timestamp:
        """No later message can get an earlier broker time than this."""
        raise NotImplementedError

    def acknowledgement(self, element, position):
        """A callable that moves the broker-side position to `position`, or None."""
        return None

    # -- restrictions --------------------------------------------------------------
    def initial_restriction(self, element):
        start = self.start_position(element)
        end = self._ends[element] if self._ends is not None else END_OF_TIME
        return OffsetRange(start, max(start, end))

    def create_tracker(self, restriction):
        return OffsetRestrictionTracker(restriction)

    def restriction_size(self, element, restriction):
        return restriction.size()

    def truncate(self, element, restriction):
        # Drained: an unbounded read stops; a bounded one reads to its end.
        return restriction if self._ends is not None else None

    # -- reading -------------------------------------------------------------------
    def process(
        self,
        element,
        # Beam passes the tracker and the estimator by keyword: they come last.
        finalizer=beam.DoFn.BundleFinalizerParam,
        tracker=beam.DoFn.RestrictionParam(),
        estimator=beam.DoFn.WatermarkEstimatorParam(ManualWatermarkEstimator.default_provider()),
    ):
        rules = self._rules
        restriction = tracker.current_restriction()
        unbounded = self._ends is None
        wait_s = min(rules.poll_interval_s, 0.2) if unbounded else 0.05
        newest, last, read_any, stopped = None, None, False, False
        started = time.monotonic()
        start = restriction.start
        while True:
            found, exhausted = self.read(element, start, restriction.stop, rules.max_entries, wait_s)
            read_any = read_any or bool(found)
            for item in found:
                if not tracker.try_claim(item.position):
                    stopped = True
                    break
                newest = item.timestamp if newest is None or item.timestamp > newest else newest
                last = item.position
                yield beam.window.TimestampedValue(item.element, item.timestamp)
            # Pages while more is there, within one call's budget: the rest
            # waits for the next call (a later micro-batch in streaming).
            if stopped or exhausted or not found or time.monotonic() - started >= READ_BUDGET_S:
                break
            start = last + 1
        self._hold(estimator, newest, read_any)
        if last is not None:
            acknowledge = self.acknowledgement(element, last + 1)
            if acknowledge is not None:
                finalizer.register(acknowledge)
        if stopped:
            return
        if not exhausted:
            tracker.defer_remainder(Duration(seconds=0))  # more is there: read on at once
        elif not unbounded:
            # Everything up to the end at submission is read.
            if restriction.stop > restriction.start and (last is None or last < restriction.stop - 1):
                tracker.try_claim(restriction.stop - 1)
        else:
            tracker.defer_remainder(Duration(seconds=rules.poll_interval_s))

    def _hold(self, estimator, newest, read_any):
        rules = self._rules
        if newest is not None:
            proposed = newest - Duration(seconds=rules.out_of_orderness_s)
        elif read_any:
            return
        else:
            # Nothing new: what the broker's clock (or the idle rule) allows.
            allowed = []
            if rules.broker_times:
                allowed.append(self.broker_now() - Duration(seconds=rules.out_of_orderness_s))
            if rules.idle_timeout_s is not None:
                allowed.append(Timestamp.now() - Duration(seconds=rules.idle_timeout_s))
            if not allowed:
                return
            proposed = max(allowed)
        current = estimator.current_watermark()
        if current is None or proposed > current:
            estimator.set_watermark(proposed)
