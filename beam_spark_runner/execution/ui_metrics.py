"""Beam metrics in the Spark UI.

The authoritative metric values travel from Python workers to the driver
through PySpark's accumulator (execution/metrics_accumulator.py) and are what
`PipelineResult.metrics()` returns. Python workers cannot update named JVM
accumulators, which are what the Spark UI lists, so the driver publishes the
aggregated values through a small JVM helper shipped with the runner
(`java/beamsparkrunner/ui`, jar in `beam_spark_runner/jars`): a one-task
Spark job described as "Beam metrics: ..." whose stage page lists one
accumulator per metric, named `Beam <kind> <step> <namespace>:<name>`
(step `(pipeline)` for the runner's run-wide streaming metrics), whose
value is the metric's committed value as text.

Batch runs publish once, after their last Spark job succeeded; streaming
runs publish every `PublishPolicy.interval_s` seconds while metrics change
and once when the run ends. A session started without the helper jar (one
the user created before running the pipeline) gets one warning and no UI
metrics; the metrics themselves are unaffected.
"""

import logging
import time

from apache_beam.metrics.cells import DistributionResult
from apache_beam.metrics.cells import GaugeResult
from apache_beam.metrics.metric import MetricResults
from beam_spark_runner.worker.beam_internals import FnApiMetrics
from apache_beam.utils.timestamp import Timestamp

from beam_spark_runner.execution import spark_internals
from beam_spark_runner.execution.naming import spark_call_site

_LOG = logging.getLogger(__name__)
_PUBLISHER = "beamsparkrunner.ui.MetricsPublisher"
_KINDS = (
    (MetricResults.COUNTERS, "counter"),
    (MetricResults.DISTRIBUTIONS, "distribution"),
    (MetricResults.GAUGES, "gauge"),
    (MetricResults.STRINGSETS, "string set"),
    (MetricResults.BOUNDED_TRIES, "bounded trie"),
    (MetricResults.HISTOGRAMS, "histogram"),
)


def format_value(value):
    """A committed metric value as the text the UI shows."""
    if isinstance(value, DistributionResult):
        if not value.count:
            return "count=0"
        return "count=%d sum=%s min=%s max=%s mean=%.6g" % (value.count, value.sum, value.min, value.max, value.mean)
    if isinstance(value, GaugeResult):
        try:
            when = Timestamp.of(value.timestamp).to_rfc3339()
        except (OverflowError, ValueError, TypeError):  # not seconds since the epoch
            when = value.timestamp
        return "value=%s timestamp=%s" % (value.value, when)
    if isinstance(value, (set, frozenset)):
        return "{%s}" % ", ".join(sorted(repr(v) for v in value))
    return str(value)


def ui_entries(infos_by_stage):
    """[(accumulator name, value text)] of the user metrics in
    {stage: [MonitoringInfo]}, sorted by name."""
    results = FnApiMetrics(infos_by_stage, user_metrics_only=True).query()
    entries = []
    for kind_key, kind in _KINDS:
        for result in results.get(kind_key, ()):
            metric = result.key.metric
            step = result.key.step or "(pipeline)"  # run-wide metrics have no step
            name = "Beam %s %s %s:%s" % (kind, step, metric.namespace, metric.name)
            entries.append((name, format_value(result.committed)))
    return sorted(entries)


class PublishPolicy:
    """When a streaming run publishes: at most once per `interval_s` of the
    injected monotonic clock (`due`), and only entries that changed since the
    last publication (`is_new`)."""

    def __init__(self, interval_s=10.0, clock=time.monotonic):
        self.interval_s = interval_s
        self._clock = clock
        self._last_time = clock()
        self._last_entries = None

    def due(self):
        return self._clock() - self._last_time >= self.interval_s

    def is_new(self, entries):
        return bool(entries) and entries != self._last_entries

    def published(self, entries):
        self._last_time = self._clock()
        self._last_entries = entries


class UiMetricsPublisher:
    """Publishes entries to the Spark UI of `sc` (see the module docstring)."""

    def __init__(self, sc):
        self._sc = sc
        self._unavailable = False

    def publish_safely(self, description, infos_by_stage, policy=None):
        """Publishes the user metrics in {stage: [MonitoringInfo]} unless
        `policy` says they are not new; a failure is logged, never raised
        (the UI is not worth a failed pipeline)."""
        try:
            entries = ui_entries(infos_by_stage)
            if policy is not None and not policy.is_new(entries):
                return False
            with spark_call_site(self._sc, "Beam metrics"):
                published = self.publish(description, entries)
            if policy is not None:
                policy.published(entries)
            return published
        except Exception as e:  # noqa: BLE001
            _LOG.warning("Could not show Beam metrics in the Spark UI: %s", e)
            return False

    def publish(self, description, entries):
        """Runs the publishing job on the calling thread; False when the
        helper jar is not on the session's classpath (warned once)."""
        if self._unavailable or not entries:
            return False
        jvm = spark_internals.jvm(self._sc)
        try:
            jvm.java.lang.Class.forName(_PUBLISHER, True, jvm.java.lang.Thread.currentThread().getContextClassLoader())
        except Exception:  # noqa: BLE001 -- py4j wraps ClassNotFoundException
            self._unavailable = True
            _LOG.warning(
                "Beam metrics are not shown in the Spark UI: this SparkSession was started "
                "without the runner's spark.jars (%s); PipelineResult.metrics() is unaffected",
                _PUBLISHER,
            )
            return False
        gateway = spark_internals.py4j_gateway(self._sc)
        names = gateway.new_array(jvm.java.lang.String, len(entries))
        values = gateway.new_array(jvm.java.lang.String, len(entries))
        for i, (name, value) in enumerate(entries):
            names[i] = name
            values[i] = value
        jvm.beamsparkrunner.ui.MetricsPublisher.publish(
            spark_internals.java_spark_context(self._sc), description, names, values
        )
        return True
