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
"""

import time

from apache_beam.metrics import monitoring_infos
from apache_beam.metrics.cells import DistributionData, GaugeData

from beam_spark_runner.streaming.watermarks import BatchTimes

NAMESPACE = "beam_spark_runner.streaming"
RUN = "streaming run"


def batch_metrics(times: BatchTimes, duration_ms: int):
    """{label: [MonitoringInfo]} describing one finished batch."""
    now = time.time()  # GaugeData timestamps are seconds (encoded as millis)
    out = {}
    for op, input_wm in times.input_watermarks.items():
        output_wm = times.output_watermarks[op]
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


def describe(batch, times: BatchTimes, duration_ms: int):
    """A log line: batch number, duration, each operator's watermarks."""
    parts = [
        "%s in=%s out=%s" % (op, _ms(times.input_watermarks[op]), _ms(times.output_watermarks[op]))
        for op in times.input_watermarks
    ]
    return "batch %d took %d ms; %s" % (batch, duration_ms, "; ".join(parts))


def _ms(micros):
    if micros <= -9223372036854775000:
        return "-inf"
    if micros >= 9223372036854775000:
        return "+inf"
    return "%.3fs" % (micros / 1e6)
