"""Per-batch progress of a streaming run as Beam metrics and a log line.

For every keyed operator (GroupByKey, stateful DoFn, splittable DoFn):
gauges `input_watermark_ms`, `output_watermark_ms` and `watermark_lag_ms`
(processing time minus output watermark), labelled with the operator as
PTransform; for the run: distribution `batch_duration_ms` and counter
`batches`. Namespace NAMESPACE. Operators add counters `rows_in` and
`rows_out` themselves (streaming/operators.py; a row is one element on keyed
inputs, a block of elements elsewhere: Beam's own element counts are in
`PipelineResult.monitoring_metrics()`). All reach `PipelineResult.metrics()`
like user metrics, and each batch is logged at INFO.

The same, batch by batch, as typed records (`BatchProgress`, kept by a
`ProgressLog`): `SparkPipelineResult.streaming_progress()`, for plots of
watermarks against processing time.
"""

import collections
import dataclasses
import threading
from typing import Mapping, Tuple

from apache_beam.metrics import monitoring_infos
from apache_beam.metrics.cells import DistributionData, GaugeData

from beam_spark_runner.streaming.watermarks import MAX_MICROS, MIN_MICROS, BatchTimes

NAMESPACE = "beam_spark_runner.streaming"
RUN = "streaming run"


def batch_metrics(times: BatchTimes, duration_ms: int, now: float, operators=None):
    """{label: [MonitoringInfo]} describing one finished batch; `now`: the
    wall-clock time (seconds) the gauges carry; `operators`: the keyed
    operators to describe (default: every stage of `times`, which also
    holds the lane stages of percentile watermarks: streaming/watermark_lanes.py)."""
    out = {}
    for op in times.input_watermarks if operators is None else operators:
        input_wm, output_wm = times.input_watermarks[op], times.output_watermarks[op]
        values = {
            "input_watermark_ms": input_wm // 1000,
            "output_watermark_ms": output_wm // 1000,
            "watermark_lag_ms": (times.processing_time - output_wm) // 1000,
        }
        out[op] = [
            monitoring_infos.int64_user_gauge(NAMESPACE, name, GaugeData(value, now), ptransform=op)
            for name, value in values.items()
        ]
    out[RUN] = [
        monitoring_infos.int64_user_distribution(
            NAMESPACE, "batch_duration_ms", DistributionData(duration_ms, 1, duration_ms, duration_ms)
        ),
        monitoring_infos.int64_user_counter(NAMESPACE, "batches", 1),
    ]
    return out


DROPPED_COUNTERS = ("dropped_due_to_lateness", "dropped_late_for_side_input")
# Input that arrived for a window the watermark had passed, kept for LATE
# panes (within the allowed lateness).
LATE_COUNTER = "late_records"


@dataclasses.dataclass(frozen=True)
class StageProgress:
    """One keyed operator (GroupByKey, stateful or splittable DoFn) in one
    micro-batch. Watermarks are microseconds since the epoch, as Beam's
    `Timestamp.micros` (MIN_MICROS / MAX_MICROS for -/+infinity): the input
    watermark the batch applied, and the output watermark its readers were
    given for it. `rows_in` / `rows_out`: rows the operator took and wrote
    (one element each to and from keyed operators, a block of elements
    to a stateless stage); `dropped_late`: input dropped as
    late (behind the watermark by more than the allowed lateness, or
    needing an expired side-input window); `late`: input kept although
    the watermark had passed its window (it goes to a LATE pane), each
    element and window once, as `dropped_late` counts."""

    name: str
    display_name: str
    input_watermark: int
    output_watermark: int
    rows_in: int = 0
    rows_out: int = 0
    dropped_late: int = 0
    late: int = 0

    @property
    def late_fraction(self) -> float:
        """Late input, kept or dropped, per row in (0.0 without input)."""
        return (self.late + self.dropped_late) / self.rows_in if self.rows_in else 0.0


@dataclasses.dataclass(frozen=True)
class BatchProgress:
    """One completed micro-batch: the pipeline's batch number, the
    processing time it ran at (micros; a TestStream's own clock when the
    pipeline has one), how long it took on the driver's clock (since the
    previous batch ended), and each keyed operator, in plan order."""

    batch: int
    processing_time: int
    duration_ms: int
    stages: Tuple[StageProgress, ...]

    def stage(self, display_name: str) -> StageProgress:
        """The operator with this display name (KeyError if none)."""
        for stage in self.stages:
            if stage.display_name == display_name:
                return stage
        raise KeyError("no keyed operator %r in batch %d" % (display_name, self.batch))


def batch_progress(times: BatchTimes, duration_ms: int, display_names: Mapping[str, str], counters) -> BatchProgress:
    """The record of a batch: `display_names` {operator: display name} in
    plan order; `counters` {(operator, counter name): value} of the batch's
    operator counters (`operator_counters`)."""
    stages = tuple(
        StageProgress(
            op,
            display_names.get(op, op),
            times.input_watermarks[op],
            times.output_watermarks[op],
            counters.get((op, "rows_in"), 0),
            counters.get((op, "rows_out"), 0),
            sum(counters.get((op, name), 0) for name in DROPPED_COUNTERS),
            counters.get((op, LATE_COUNTER), 0),
        )
        for op in sorted(_operators(times, display_names), key=_plan_order(display_names))
    )
    return BatchProgress(times.batch_id, times.processing_time, duration_ms, stages)


def _operators(times, display_names):
    """The keyed operators of `times`: those named in `display_names` (the
    lane stages of percentile watermarks are not), or all without names."""
    if not display_names:
        return list(times.input_watermarks)
    return [op for op in times.input_watermarks if op in display_names]


def _plan_order(display_names):
    order = {op: i for i, op in enumerate(display_names)}
    return lambda op: (order.get(op, len(order)), op)


def operator_counters(infos):
    """{(operator, counter name): value} of the NAMESPACE counters among
    MonitoringInfos (the operators' METRICS rows)."""
    out = collections.Counter()
    for info in infos:
        labels = info.labels
        if labels.get(monitoring_infos.NAMESPACE_LABEL) != NAMESPACE or not monitoring_infos.is_counter(info):
            continue
        key = (labels.get(monitoring_infos.PTRANSFORM_LABEL, ""), labels.get(monitoring_infos.NAME_LABEL, ""))
        out[key] += monitoring_infos.extract_counter_value(info)
    return out


class ProgressLog:
    """The last `capacity` batches' BatchProgress, oldest first; safe to
    read while the run appends."""

    def __init__(self, capacity=10000):
        self._batches = collections.deque(maxlen=capacity)
        self._lock = threading.Lock()

    def record(self, progress: BatchProgress):
        with self._lock:
            self._batches.append(progress)

    def batches(self) -> Tuple[BatchProgress, ...]:
        with self._lock:
            return tuple(self._batches)


def describe(batch: BatchProgress) -> str:
    """A log line: batch number, duration, each keyed operator's
    watermarks and rows in and out."""
    parts = [
        "%s: watermark in %s out %s, rows %d -> %d%s"
        % (
            s.display_name,
            _ms(s.input_watermark),
            _ms(s.output_watermark),
            s.rows_in,
            s.rows_out,
            "".join(
                ", %d %s" % (count, what)
                for count, what in ((s.late, "late"), (s.dropped_late, "dropped late"))
                if count
            ),
        )
        for s in batch.stages
    ]
    return "batch %d took %d ms; %s" % (batch.batch, batch.duration_ms, "; ".join(parts))


def _ms(micros):
    if micros <= MIN_MICROS:
        return "-inf"
    if micros >= MAX_MICROS:
        return "+inf"
    return "%.3fs" % (micros / 1e6)
