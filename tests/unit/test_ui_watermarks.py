"""The Spark UI's Beam tab, as text (execution/ui_watermarks.py): each
step's watermarks, lag, percentile and late counts since the run started."""

from beam_spark_runner.execution.ui_watermarks import COLUMNS, WatermarkTable, format_lag, format_time
from beam_spark_runner.streaming.progress import BatchProgress, StageProgress
from beam_spark_runner.streaming.watermarks import MAX_MICROS, MIN_MICROS

SECOND = 1_000_000
T0 = 1767225600 * SECOND  # 2026-01-01T00:00:00Z


def test_times_are_utc_to_the_millisecond_and_infinities_are_named():
    assert format_time(T0 + 1_500_999) == "2026-01-01T00:00:01.500Z"
    assert (format_time(MIN_MICROS), format_time(MAX_MICROS)) == ("-infinity", "+infinity")
    assert format_lag(T0 + 3 * SECOND, T0 + SECOND // 2) == "2.500 s"
    assert format_lag(T0, MIN_MICROS) == format_lag(T0, MAX_MICROS) == "-"


def test_times_beyond_pythons_datetime_are_shown_in_the_same_calendar():
    """The global window's end (a hold there is common) is in the year
    294247, past datetime's 9999: showing it failed the run."""
    import datetime
    import random

    from apache_beam.transforms.window import GlobalWindow

    # Beam Python keeps it to the microsecond (...54.774999), shown truncated as every time here.
    assert format_time(GlobalWindow().max_timestamp().micros) == "294247-01-09T04:00:54.774Z"
    assert format_time(-1) == "1969-12-31T23:59:59.999Z"
    rng = random.Random(7)
    epoch = datetime.datetime(1970, 1, 1)
    for micros in [rng.randrange(-62_135_596_800 * SECOND, 253_402_300_799 * SECOND) for _ in range(2000)]:
        expected = (epoch + datetime.timedelta(microseconds=micros)).isoformat(timespec="milliseconds") + "Z"
        assert format_time(micros) == expected


def test_late_counts_add_up_batch_after_batch_and_each_step_shows_its_percentile():
    table = WatermarkTable({"gbk": 1.0, "approx": 0.95})

    def batch(n, late, dropped, rows_in):
        return BatchProgress(
            n,
            T0 + n * SECOND,
            40,
            (
                StageProgress("gbk", "Group", T0, T0 - SECOND, rows_in=rows_in, late=late, dropped_late=dropped),
                StageProgress("approx", "Approx", T0 + SECOND, MIN_MICROS, rows_in=rows_in),
            ),
        )

    table.after(batch(1, late=1, dropped=0, rows_in=10))
    caption, rows = table.after(batch(2, late=2, dropped=1, rows_in=10))
    assert caption == "Micro-batch 2, processing time 2026-01-01T00:00:02.000Z, took 40 ms"
    group, approx = (dict(zip(COLUMNS, row)) for row in rows)
    assert group == {
        "Step": "Group",
        "Input watermark": "2026-01-01T00:00:00.000Z",
        "Output watermark": "2025-12-31T23:59:59.000Z",
        "Output lag behind processing time": "3.000 s",
        "Watermark percentile": "1",
        "Late records": "3",
        "Dropped late records": "1",
        "Late fraction": "0.2000",
    }
    assert (approx["Watermark percentile"], approx["Output watermark"], approx["Late fraction"]) == (
        "0.95",
        "-infinity",
        "0.0000",
    )
