"""A streaming pipeline's watermarks in the Spark UI: the "Beam" tab.

After every micro-batch the driver shows one table in the running
application's Spark UI (the JVM helper `java/beamsparkrunner/ui/BeamTab.java`,
in the runner's jar): per stateful step, its input and output watermark,
how far the output watermark lags behind processing time, the watermark
percentile it runs under (docs/watermarks.md), and its late and dropped
records and late fraction since the run started. The same numbers are in
`result.streaming_progress()` and `result.metrics()`.

A session without the helper jar (one the user created before running the
pipeline), or without a UI, gets one log line and no tab; a failure to
show is logged, never raised: the UI is not worth a failed pipeline.
"""

import dataclasses
import logging
from typing import Dict, List, Mapping, Tuple

from beam_spark_runner.execution import spark_internals
from beam_spark_runner.streaming.progress import BatchProgress
from beam_spark_runner.streaming.watermark_lanes import percentile_text
from beam_spark_runner.streaming.watermarks import MAX_MICROS, MIN_MICROS

_LOG = logging.getLogger(__name__)
_TAB = "beamsparkrunner.ui.BeamTab"

COLUMNS = (
    "Step",
    "Input watermark",
    "Output watermark",
    "Output lag behind processing time",
    "Watermark percentile",
    "Late records",
    "Dropped late records",
    "Late fraction",
)


def format_time(micros: int) -> str:
    """A watermark as the page shows it: UTC to the millisecond, or
    +/-infinity. Beam's timestamps reach far beyond Python's datetime (the
    global window ends in the year 294247): the date is computed from the
    day count (the proleptic Gregorian calendar, as Java's Instant prints)."""
    if micros <= MIN_MICROS:
        return "-infinity"
    if micros >= MAX_MICROS:
        return "+infinity"
    days, micros_of_day = divmod(micros, 86_400_000_000)
    year, month, day = _civil_from_days(days)
    seconds, micros_of_second = divmod(micros_of_day, 1_000_000)
    return "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ" % (
        year,
        month,
        day,
        seconds // 3600,
        seconds // 60 % 60,
        seconds % 60,
        micros_of_second // 1000,
    )


def _civil_from_days(days: int):
    """(year, month, day) of a day count since 1970-01-01 (H. Hinnant's
    civil_from_days)."""
    z = days + 719_468
    era = z // 146_097
    day_of_era = z - era * 146_097
    year_of_era = (day_of_era - day_of_era // 1460 + day_of_era // 36_524 - day_of_era // 146_096) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    shifted_month = (5 * day_of_year + 2) // 153
    day = day_of_year - (153 * shifted_month + 2) // 5 + 1
    month = shifted_month + 3 if shifted_month < 10 else shifted_month - 9
    return year_of_era + era * 400 + (month <= 2), month, day


def format_lag(processing_time: int, watermark: int) -> str:
    if watermark <= MIN_MICROS or watermark >= MAX_MICROS:
        return "-"
    return "%.3f s" % ((processing_time - watermark) / 1e6)


@dataclasses.dataclass
class StageTotals:
    """One step's counts since the run started."""

    rows_in: int = 0
    late: int = 0
    dropped: int = 0

    def add(self, stage):
        self.rows_in += stage.rows_in
        self.late += stage.late
        self.dropped += stage.dropped_late

    @property
    def late_fraction(self) -> float:
        return (self.late + self.dropped) / self.rows_in if self.rows_in else 0.0


class WatermarkTable:
    """The tab's table, batch after batch (no Spark): `percentiles`
    {operator: the percentile it runs under}."""

    def __init__(self, percentiles: Mapping[str, float]):
        self._percentiles = dict(percentiles)
        self._totals: Dict[str, StageTotals] = {}

    def after(self, record: BatchProgress) -> Tuple[str, List[Tuple[str, ...]]]:
        """(caption, rows) once `record`'s batch completed."""
        rows = []
        for stage in record.stages:
            totals = self._totals.setdefault(stage.name, StageTotals())
            totals.add(stage)
            rows.append(
                (
                    stage.display_name,
                    format_time(stage.input_watermark),
                    format_time(stage.output_watermark),
                    format_lag(record.processing_time, stage.output_watermark),
                    percentile_text(self._percentiles.get(stage.name, 1.0)),
                    str(totals.late),
                    str(totals.dropped),
                    "%.4f" % totals.late_fraction,
                )
            )
        caption = "Micro-batch %d, processing time %s, took %d ms" % (
            record.batch,
            format_time(record.processing_time),
            record.duration_ms,
        )
        return caption, rows


class WatermarkTab:
    """Shows each batch's table in the Spark UI of `sc` (see the module docstring).

    A batch costs two calls into the JVM: the table's cells travel as one
    string split there into a String[] (py4j would otherwise make a call
    per cell, and one per name looked up in `sc._jvm`: most of the
    driver's CPU per micro-batch went there), and the tab's `show`. The
    Java names are looked up once."""

    # Joins the cells for the JVM to split; a cell holding it shows U+FFFD instead.
    _SEPARATOR = "\x1f"

    def __init__(self, sc, percentiles: Mapping[str, float]):
        self._sc = sc
        self._table = WatermarkTable(percentiles)
        self._off = False
        self._tab = None  # the BeamTab class, once found
        self._splitter = None
        self._columns = None

    def show(self, record: BatchProgress) -> bool:
        caption, rows = self._table.after(record)
        if self._off:
            return False
        try:
            if self._tab is None:
                jvm = spark_internals.jvm(self._sc)
                try:
                    jvm.java.lang.Class.forName(
                        _TAB, True, jvm.java.lang.Thread.currentThread().getContextClassLoader()
                    )
                except Exception:  # noqa: BLE001 -- py4j wraps ClassNotFoundException
                    return self._turn_off("this SparkSession was started without the runner's spark.jars (%s)" % _TAB)
                self._splitter = jvm.java.util.regex.Pattern.compile(self._SEPARATOR)
                self._columns = self._strings(COLUMNS)
                self._tab = jvm.beamsparkrunner.ui.BeamTab
            cells = [cell for row in rows for cell in row]
            shown = self._tab.show(
                spark_internals.java_spark_context(self._sc), caption, self._columns, self._strings(cells)
            )
            if not shown:
                return self._turn_off("the application runs without a Spark UI")
            return True
        except Exception as e:  # noqa: BLE001
            return self._turn_off("%s" % e)

    def _strings(self, values):
        """A Java String[] of `values`, made by one call into the JVM."""
        if not values:
            return spark_internals.py4j_gateway(self._sc).new_array(spark_internals.jvm(self._sc).java.lang.String, 0)
        text = self._SEPARATOR.join(v.replace(self._SEPARATOR, "\ufffd") for v in values)
        return self._splitter.split(text, -1)

    def _turn_off(self, why):
        self._off = True
        _LOG.warning("Beam's watermarks are not shown in the Spark UI: %s", why)
        return False
