"""The summary of pending work's timestamps a percentile low watermark is
read from (streaming/timestamp_summary.py): merges across key-groups in any
order to the same summary, reads a watermark within one bucket width below
the exact percentile and never after it, and is stored with its format
version."""

import fractions
import functools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beam_spark_runner.streaming.timestamp_summary import (
    BASE_WIDTH_US,
    SummaryFormatError,
    TimestampSummary,
)

CAPACITY = 8
_times = st.integers(min_value=-(10**12), max_value=10**12)
_weighted = st.lists(st.tuples(_times, st.integers(min_value=1, max_value=50)), min_size=0, max_size=60)
_percentiles = st.sampled_from([1.0, 0.999, 0.99, 0.95, 0.9, 0.75, 0.5, 0.1, 0.01])


def _summary(pairs, capacity=CAPACITY):
    return TimestampSummary.of([t for t, _ in pairs], [w for _, w in pairs], capacity=capacity)


def _exact(pairs, percentile):
    """The largest time with at most a (1 - percentile) share of the weight before it."""
    allowed = (1 - fractions.Fraction(str(percentile))) * sum(w for _, w in pairs)
    before = 0
    for t, w in sorted(pairs):
        if before + w > allowed:
            return t
        before += w
    raise AssertionError("unreachable")


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.lists(_weighted, min_size=1, max_size=6), st.randoms())
def test_key_groups_merge_to_the_same_summary_in_any_order_and_grouping(reports, rnd):
    summaries = [_summary(pairs) for pairs in reports]
    left_to_right = functools.reduce(TimestampSummary.merge, summaries, TimestampSummary(capacity=CAPACITY))
    shuffled = list(summaries)
    rnd.shuffle(shuffled)
    # A different grouping: pairs merged first, then the pairs' results.
    paired = [functools.reduce(TimestampSummary.merge, shuffled[i : i + 2]) for i in range(0, len(shuffled), 2)]
    regrouped = functools.reduce(TimestampSummary.merge, reversed(paired))
    assert left_to_right == regrouped
    assert left_to_right.total == sum(w for pairs in reports for _, w in pairs)
    everything = _summary([p for pairs in reports for p in pairs])
    if all(s.width_us <= everything.width_us for s in summaries):
        assert left_to_right == everything


@settings(max_examples=400, derandomize=True, deadline=None)
@given(_weighted.filter(bool), _percentiles)
def test_the_watermark_is_never_after_the_exact_percentile_and_at_most_one_width_before(pairs, percentile):
    summary = _summary(pairs)
    exact = _exact(pairs, percentile)
    watermark = summary.low_watermark(percentile)
    assert exact - summary.width_us < watermark <= exact
    if percentile == 1:
        assert watermark == min(t for t, _ in pairs)


@settings(max_examples=200, derandomize=True, deadline=None)
@given(_weighted.filter(bool))
def test_a_higher_percentile_never_gives_a_later_watermark(pairs):
    summary = _summary(pairs)
    marks = [summary.low_watermark(p) for p in (0.01, 0.1, 0.5, 0.9, 0.99, 1.0)]
    assert marks == sorted(marks, reverse=True)


def test_a_laggard_holds_the_exact_watermark_but_not_the_95th_percentile():
    # 19 partitions' pending work at 100-119 s, one laggard's at 10 s.
    pairs = [(s * 1_000_000, 100) for s in range(100, 119)] + [(10_000_000, 100)]
    summary = _summary(pairs, capacity=64)
    assert summary.low_watermark(1.0) == 10_000_000
    assert 100_000_000 - summary.width_us < summary.low_watermark(0.95) <= 100_000_000


def test_the_width_doubles_only_as_the_span_needs():
    dense = TimestampSummary.of(range(0, 8 * BASE_WIDTH_US, BASE_WIDTH_US), capacity=CAPACITY)
    assert dense.width_us == BASE_WIDTH_US and len(dense.buckets) == 8
    wider = TimestampSummary.of(range(0, 9 * BASE_WIDTH_US, BASE_WIDTH_US), capacity=CAPACITY)
    assert wider.width_us == 2 * BASE_WIDTH_US and len(wider.buckets) <= CAPACITY
    span = 10**12
    huge = TimestampSummary.of([0, span], capacity=CAPACITY)
    assert len(huge.buckets) == 2 and huge.width_us == BASE_WIDTH_US  # two far apart timestamps: two buckets
    spread = TimestampSummary.of([random.Random(1).randrange(span) for _ in range(1000)], capacity=CAPACITY)
    assert len(spread.buckets) <= CAPACITY and spread.width_us <= 2 * span // CAPACITY + BASE_WIDTH_US


def test_empty_summaries_merge_away_and_have_no_watermark():
    empty = TimestampSummary(capacity=CAPACITY)
    one = TimestampSummary.of([5_000], capacity=CAPACITY)
    assert empty.merge(one) == one and one.merge(empty) == one
    assert empty.low_watermark(0.5) is None and empty.total == 0
    assert TimestampSummary.of([1, 2], [0, 0], capacity=CAPACITY) == empty


def test_a_summary_round_trips_through_its_stored_form_with_its_version():
    summary = TimestampSummary.of([-(10**15), 3, 40_000_000], [2, 1, 5], capacity=CAPACITY)
    assert TimestampSummary.from_json(summary.to_json()) == summary
    with pytest.raises(SummaryFormatError, match="format version 99"):
        TimestampSummary.from_json(summary.to_json().replace('"version": 1', '"version": 99'))
    with pytest.raises(SummaryFormatError, match="not JSON"):
        TimestampSummary.from_json("{")


def test_bad_arguments_are_refused_naming_the_problem():
    with pytest.raises(ValueError, match="percentile must be in"):
        TimestampSummary.of([1]).low_watermark(0)
    with pytest.raises(ValueError, match="percentile must be in"):
        TimestampSummary.of([1]).low_watermark(1.5)
    with pytest.raises(ValueError, match="different capacities"):
        TimestampSummary.of([1], capacity=8).merge(TimestampSummary.of([2], capacity=16))
    with pytest.raises(ValueError, match="must not be negative"):
        TimestampSummary.of([1], [-1])
    with pytest.raises(ValueError, match="at least 2 buckets"):
        TimestampSummary(capacity=1)
