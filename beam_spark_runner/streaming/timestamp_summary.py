"""A compact, mergeable summary of the event timestamps of pending work
(MillWheel's "global summary of work in the system", section 5.3), from
which a percentile low watermark is read: the event time that a fraction
P of the pending work has passed.

A summary is a histogram of timestamps (microseconds) in buckets of one
width, aligned to absolute time (bucket i holds [i * width, (i + 1) *
width)), with at most `capacity` non-empty buckets, plus the exact
minimum. Each timestamp carries a weight (how much pending work sits at
it: elements, or a split's backlog). When more buckets than `capacity`
would be needed, the width doubles until they fit, starting from
`BASE_WIDTH_US`.

Guarantees (checked by tests/unit/test_timestamp_summary.py):

* merging is exact on the weights, commutative and associative: summaries
  merged in any order and grouping are equal, and equal to the summary of
  all their timestamps made at once (`of`) when no input is coarser than
  that one. So key-groups can report in any order, and a replayed batch,
  reporting the same timestamps, computes the same summary and the same
  watermark;
* `low_watermark(p)`: with p = 1 the exact minimum; with p < 1 a time w
  with q - width < w <= q, where q is the exact answer: the largest time
  such that at most a (1 - p) share of the weight lies before it (p taken
  as the decimal it is written as: 0.9 is nine tenths). So the
  watermark read from a summary is never later than the exact percentile,
  and at most one bucket width earlier;
* the width is at least `BASE_WIDTH_US` and doubles only as the span of the
  timestamps needs (span / width stays below `capacity`): the error bound
  is max(BASE_WIDTH_US, about 2 x span / capacity).

No Spark, no Beam: the source-planning process reads these.
"""

import dataclasses
import fractions
import json
from typing import Iterable, Optional, Tuple

FORMAT_VERSION = 1
BASE_WIDTH_US = 1000  # 1 ms: finer than any watermark a micro-batch can use
DEFAULT_CAPACITY = 64


class SummaryFormatError(ValueError):
    """A stored summary cannot be read; the message says why."""


@dataclasses.dataclass(frozen=True)
class TimestampSummary:
    """See the module docstring. `buckets`: (bucket index, weight) pairs,
    ascending by index, weights > 0; `minimum`: the exact smallest
    timestamp (None for an empty summary)."""

    width_us: int = BASE_WIDTH_US
    buckets: Tuple[Tuple[int, int], ...] = ()
    minimum: Optional[int] = None
    capacity: int = DEFAULT_CAPACITY

    def __post_init__(self):
        if self.capacity < 2:
            raise ValueError("a timestamp summary needs a capacity of at least 2 buckets, not %d" % self.capacity)
        if self.width_us < BASE_WIDTH_US or self.width_us % BASE_WIDTH_US:
            raise ValueError("a timestamp summary's width must be a multiple of %d us" % BASE_WIDTH_US)

    # --- building -------------------------------------------------------------

    @classmethod
    def of(
        cls, timestamps: Iterable[int], weights: Optional[Iterable[int]] = None, capacity: int = DEFAULT_CAPACITY
    ) -> "TimestampSummary":
        """The summary of `timestamps` (micros), each with weight 1 or its
        entry of `weights` (weights of 0 are left out)."""
        pairs = list(zip(timestamps, weights)) if weights is not None else [(t, 1) for t in timestamps]
        pairs = [(int(t), int(w)) for t, w in pairs if w]
        if any(w < 0 for _, w in pairs):
            raise ValueError("a timestamp summary's weights must not be negative")
        if not pairs:
            return cls(capacity=capacity)
        counts = {}
        for t, w in pairs:
            index = t // BASE_WIDTH_US
            counts[index] = counts.get(index, 0) + w
        return _fitted(BASE_WIDTH_US, counts, min(t for t, _ in pairs), capacity)

    def merge(self, other: "TimestampSummary") -> "TimestampSummary":
        """The summary of both summaries' timestamps."""
        if self.capacity != other.capacity:
            raise ValueError(
                "timestamp summaries of different capacities (%d, %d) do not merge" % (self.capacity, other.capacity)
            )
        if other.minimum is None:
            return self
        if self.minimum is None:
            return other
        width = max(self.width_us, other.width_us)
        counts = {}
        for summary in (self, other):
            factor = width // summary.width_us
            for index, weight in summary.buckets:
                coarse = index // factor
                counts[coarse] = counts.get(coarse, 0) + weight
        return _fitted(width, counts, min(self.minimum, other.minimum), self.capacity)

    @classmethod
    def merged(cls, summaries: Iterable["TimestampSummary"], capacity: int = DEFAULT_CAPACITY) -> "TimestampSummary":
        out = cls(capacity=capacity)
        for summary in summaries:
            out = out.merge(summary)
        return out

    # --- reading --------------------------------------------------------------

    @property
    def total(self) -> int:
        return sum(weight for _, weight in self.buckets)

    def low_watermark(self, percentile: float) -> Optional[int]:
        """The event time a `percentile` share of the weight has passed (see
        the module docstring for the bound); None for an empty summary."""
        if not 0 < percentile <= 1:
            raise ValueError("a watermark percentile must be in (0, 1], not %r" % (percentile,))
        if self.minimum is None:
            return None
        if percentile == 1:
            return self.minimum
        # In exact arithmetic on the percentile as written (0.9, not the
        # binary float nearest it): 1 - 0.9 in floats is below 0.1.
        allowed_before = (1 - fractions.Fraction(str(percentile))) * self.total
        before = 0
        for index, weight in self.buckets:
            if before + weight > allowed_before:
                # The answer lies in this bucket: its start, or the exact
                # minimum if that is later (the first bucket).
                return max(index * self.width_us, self.minimum)
            before += weight
        raise AssertionError("unreachable: the weights sum to the total")  # pragma: no cover

    # --- persisted form -------------------------------------------------------

    def to_json(self) -> str:
        return json.dumps(
            {
                "version": FORMAT_VERSION,
                "width_us": self.width_us,
                "capacity": self.capacity,
                "minimum": self.minimum,
                "buckets": [list(b) for b in self.buckets],
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> "TimestampSummary":
        try:
            data = json.loads(text)
        except ValueError as e:
            raise SummaryFormatError("a timestamp summary is not JSON: %s" % e) from e
        if not isinstance(data, dict) or data.get("version") != FORMAT_VERSION:
            raise SummaryFormatError(
                "a timestamp summary of format version %r; this runner reads version %d"
                % (data.get("version") if isinstance(data, dict) else None, FORMAT_VERSION)
            )
        return cls(
            width_us=data["width_us"],
            buckets=tuple((int(i), int(w)) for i, w in data["buckets"]),
            minimum=data["minimum"],
            capacity=data["capacity"],
        )


def _fitted(width, counts, minimum, capacity):
    """A summary of `counts` {bucket index at `width`: weight}, its width
    doubled until at most `capacity` buckets are needed."""
    while len(counts) > capacity:
        width *= 2
        coarser = {}
        for index, weight in counts.items():
            coarse = index // 2
            coarser[coarse] = coarser.get(coarse, 0) + weight
        counts = coarser
    return TimestampSummary(width, tuple(sorted(counts.items())), minimum, capacity)
