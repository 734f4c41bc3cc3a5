"""The watermark of a data-driven source: the newest event time per
partition, minus the allowed out-of-orderness, over active partitions."""

import pytest

from beam_spark_runner.streaming.source_watermarks import DataWatermark, WatermarkRule
from beam_spark_runner.streaming.watermarks import MIN_MICROS

S = 1_000_000


def test_nothing_read_holds_the_watermark_at_the_minimum():
    assert DataWatermark(WatermarkRule()).watermark(100 * S) == MIN_MICROS


def test_the_watermark_is_the_slowest_partitions_newest_event_minus_the_out_of_orderness():
    wm = DataWatermark(WatermarkRule(out_of_orderness_us=2 * S))
    wm.observe({"a": 10 * S, "b": 7 * S}, read_at_us=0)
    assert wm.watermark(0) == 5 * S
    wm.observe({"b": 20 * S}, read_at_us=1)
    assert wm.watermark(1) == 8 * S


def test_an_older_event_does_not_move_a_partitions_newest_time_back():
    wm = DataWatermark(WatermarkRule())
    wm.observe({"a": 10 * S}, read_at_us=0)
    wm.observe({"a": 3 * S}, read_at_us=1)
    assert wm.watermark(1) == 10 * S


def test_the_watermark_never_moves_back_when_a_new_partition_appears():
    wm = DataWatermark(WatermarkRule())
    wm.observe({"a": 10 * S}, read_at_us=0)
    assert wm.watermark(0) == 10 * S
    wm.observe({"b": 2 * S}, read_at_us=1)
    assert wm.watermark(1) == 10 * S


def test_an_idle_partition_stops_holding_the_watermark_after_the_idle_timeout():
    wm = DataWatermark(WatermarkRule(idle_timeout_us=5 * S))
    wm.observe({"a": 10 * S, "b": 2 * S}, read_at_us=0)
    wm.observe({"a": 30 * S}, read_at_us=4 * S)
    assert wm.watermark(4 * S) == 2 * S
    assert wm.idle_partitions(4 * S) == []
    assert wm.idle_partitions(5 * S) == ["b"]
    assert wm.watermark(5 * S) == 30 * S


def test_without_an_idle_timeout_a_silent_partition_holds_the_watermark_forever():
    wm = DataWatermark(WatermarkRule())
    wm.observe({"a": 10 * S, "b": 2 * S}, read_at_us=0)
    wm.observe({"a": 30 * S}, read_at_us=1)
    assert wm.watermark(10**6 * S) == 2 * S


def test_when_every_partition_is_idle_the_watermark_is_the_newest_event_seen():
    wm = DataWatermark(WatermarkRule(out_of_orderness_us=S, idle_timeout_us=S))
    wm.observe({"a": 10 * S, "b": 4 * S}, read_at_us=0)
    assert wm.watermark(2 * S) == 9 * S


def test_a_snapshot_restores_the_same_watermark_and_partitions():
    rule = WatermarkRule(out_of_orderness_us=S, idle_timeout_us=3 * S)
    wm = DataWatermark(rule)
    wm.observe({"a": 10 * S, "b": 4 * S}, read_at_us=0)
    wm.watermark(0)
    restored = DataWatermark.restore(rule, wm.snapshot())
    assert restored.snapshot() == wm.snapshot()
    restored.observe({"b": 6 * S}, read_at_us=S)
    wm.observe({"b": 6 * S}, read_at_us=S)
    assert restored.watermark(S) == wm.watermark(S) == 5 * S


def test_a_snapshot_of_another_format_is_refused():
    with pytest.raises(ValueError, match="format"):
        DataWatermark.restore(WatermarkRule(), {"format": 99, "watermark": 0, "partitions": {}})


def test_below_percentile_one_the_slowest_partitions_up_to_their_share_no_longer_hold_it():
    """Twenty partitions, one far behind: the exact watermark waits for it,
    the 95th percentile follows the other nineteen (the laggard is 1/20 of
    them), the 90th percentile passes the two slowest."""
    newest = {"p%02d" % i: (100 + i) * S for i in range(19)}
    newest["laggard"] = 10 * S
    exact, p95, p90 = (DataWatermark(WatermarkRule(percentile=p)) for p in (1.0, 0.95, 0.9))
    for wm in (exact, p95, p90):
        wm.observe(newest, read_at_us=0)
    assert exact.watermark(0) == 10 * S
    assert 100 * S - 1000 < p95.watermark(0) <= 100 * S
    assert 101 * S - 1000 < p90.watermark(0) <= 101 * S
    # The laggard catching up never moves a watermark back.
    p95.observe({"laggard": 50 * S}, read_at_us=1)
    assert 100 * S - 1000 < p95.watermark(1) <= 100 * S


def test_a_percentile_outside_zero_to_one_is_refused():
    for bad in (0, -0.5, 1.5):
        with pytest.raises(ValueError, match="percentile must be above 0 and at most 1"):
            WatermarkRule(percentile=bad)
