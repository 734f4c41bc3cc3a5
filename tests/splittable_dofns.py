"""Splittable DoFns shared by the unit and integration tests."""

import apache_beam as beam
from apache_beam.io.restriction_trackers import OffsetRange, OffsetRestrictionTracker


class CountdownProvider(beam.transforms.core.RestrictionProvider):
    """Positions 0..n-1 of an element (key, n)."""

    def initial_restriction(self, element):
        return OffsetRange(0, element[1])

    def create_tracker(self, restriction):
        return OffsetRestrictionTracker(restriction)

    def restriction_size(self, element, restriction):
        return restriction.size()


class ScaledPositions(beam.DoFn):
    """A splittable DoFn with a side input: one position per bundle, scaled
    by the side input, then a self-checkpoint (the rest runs in later
    bundles, micro-batches in streaming, still reading the side input)."""

    def process(self, element, factor, tracker=beam.DoFn.RestrictionParam(CountdownProvider())):
        position = tracker.current_restriction().start
        if tracker.try_claim(position):
            yield element[0], position * factor
            tracker.defer_remainder()


class TailProvider(CountdownProvider):
    """As CountdownProvider, and a drain finishes at most the next three
    positions (a log tailer that stops at what it has), where Beam's
    default truncate would drop the unfinished work."""

    def truncate(self, element, restriction):
        return OffsetRange(restriction.start, min(restriction.stop, restriction.start + 3))


class TailPositions(beam.DoFn):
    """One position per bundle, then a self-checkpoint resumed 0.2 s later;
    yields (position, the restriction's stop) so a test sees which
    positions ran under a truncated restriction."""

    def process(self, element, tracker=beam.DoFn.RestrictionParam(TailProvider())):
        from apache_beam.utils.timestamp import Duration

        restriction = tracker.current_restriction()
        if tracker.try_claim(restriction.start):
            yield restriction.start, restriction.stop
            tracker.defer_remainder(Duration(seconds=0.2))
