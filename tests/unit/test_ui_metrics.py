"""Beam metrics as the Spark UI shows them (execution/ui_metrics.py): the
names and texts of the accumulators, and when a streaming run publishes."""

import logging

from apache_beam.metrics.cells import DistributionData, DistributionResult, GaugeData, GaugeResult
from apache_beam.metrics.execution import MetricsContainer
from apache_beam.metrics.metricbase import MetricName
from apache_beam.utils.timestamp import Timestamp

from beam_spark_runner.execution import ui_metrics


def _infos(step, updates):
    """MonitoringInfos of one stage from (kind, namespace, name, values)."""
    container = MetricsContainer(step)
    for kind, namespace, name, values in updates:
        for value in values:
            metric = MetricName(namespace, name)
            if kind == "counter":
                container.get_counter(metric).inc(value)
            elif kind == "distribution":
                container.get_distribution(metric).update(value)
            elif kind == "gauge":
                container.get_gauge(metric).set(value)
            else:
                container.get_string_set(metric).add(value)
    return list(container.to_runner_api_monitoring_infos(step).values())


def test_every_user_metric_kind_becomes_a_named_entry_with_its_committed_value():
    infos = {
        "stage1": _infos(
            "ParDo(A)",
            [
                ("counter", "ns", "seen", [2, 3]),
                ("distribution", "ns", "size", [1, 5, 3]),
                ("string set", "ns", "tags", ["b", "a", "b"]),
            ],
        ),
        "stage2": _infos("ParDo(B)", [("counter", "ns", "seen", [7]), ("gauge", "g", "last", [4])]),
    }
    entries = dict(ui_metrics.ui_entries(infos))
    assert entries.pop("Beam counter ParDo(A) ns:seen") == "5"
    assert entries.pop("Beam counter ParDo(B) ns:seen") == "7"
    assert entries.pop("Beam distribution ParDo(A) ns:size") == "count=3 sum=9 min=1 max=5 mean=3"
    assert entries.pop("Beam string set ParDo(A) ns:tags") == "{'a', 'b'}"
    assert entries.pop("Beam gauge ParDo(B) g:last").startswith("value=4 timestamp=")
    assert entries == {}


def test_entries_are_sorted_and_system_metrics_left_out():
    infos = {"s": _infos("Step", [("counter", "z", "b", [1]), ("counter", "a", "c", [1])])}
    from apache_beam.metrics import monitoring_infos

    infos["s"].append(monitoring_infos.int64_counter(monitoring_infos.ELEMENT_COUNT_URN, 9, pcollection="pc"))
    assert [name for name, _ in ui_metrics.ui_entries(infos)] == ["Beam counter Step a:c", "Beam counter Step z:b"]


def test_value_texts():
    assert ui_metrics.format_value(DistributionResult(DistributionData(0, 0, 0, 0))) == "count=0"
    assert (
        ui_metrics.format_value(GaugeResult(GaugeData(3, Timestamp(seconds=0))))
        == "value=3 timestamp=1970-01-01T00:00:00Z"
    )
    # A timestamp no date can show stays a number rather than losing the metric.
    assert ui_metrics.format_value(GaugeResult(GaugeData(3, 1e15))) == "value=3 timestamp=%s" % 1e15
    assert ui_metrics.format_value(frozenset({2, 1})) == "{1, 2}"
    assert ui_metrics.format_value(12) == "12"


class _Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_streaming_publishes_at_most_once_per_interval_and_only_changes():
    clock = _Clock()
    policy = ui_metrics.PublishPolicy(interval_s=10, clock=clock)
    assert not policy.due()
    clock.now += 10
    assert policy.due()
    entries = [("Beam counter S ns:n", "1")]
    assert policy.is_new(entries)
    policy.published(entries)
    assert not policy.due()
    assert not policy.is_new(list(entries))
    assert not policy.is_new([])
    clock.now += 9.9
    assert not policy.due()
    clock.now += 0.1
    assert policy.due() and policy.is_new([("Beam counter S ns:n", "2")])


class _NoHelperJvm:
    """A JVM without the runner's jar: loading the publisher class fails."""

    class java:  # noqa: N801 -- mirrors py4j's package path
        class lang:  # noqa: N801
            class Class:  # noqa: N801
                @staticmethod
                def forName(name, initialize, loader):
                    raise RuntimeError("java.lang.ClassNotFoundException: %s" % name)

            class Thread:  # noqa: N801
                @staticmethod
                def currentThread():
                    return _NoHelperJvm._Thread()

    class _Thread:
        def getContextClassLoader(self):
            return None


class _SparkContext:
    _jvm = _NoHelperJvm()


def test_a_session_without_the_helper_jar_warns_once_and_publishes_nothing(caplog):
    publisher = ui_metrics.UiMetricsPublisher(_SparkContext())
    with caplog.at_level(logging.WARNING, logger=ui_metrics.__name__):
        assert publisher.publish("d", [("n", "v")]) is False
        assert publisher.publish("d", [("n", "v")]) is False
    warnings = [r for r in caplog.records if "not shown in the Spark UI" in r.getMessage()]
    assert len(warnings) == 1


def test_sessions_the_runner_creates_carry_the_helper_jar_beside_the_users_jars():
    import os
    from beam_spark_runner import session

    assert os.path.isfile(session.RUNNER_JAR)
    assert session.merged_spark_conf({})["spark.jars"] == session.RUNNER_JAR
    conf = session.merged_spark_conf({"spark.jars": "/u/a.jar,/u/b.jar", "spark.ui.showConsoleProgress": "true"})
    assert conf["spark.jars"] == "/u/a.jar,/u/b.jar,%s" % session.RUNNER_JAR
    assert conf["spark.ui.showConsoleProgress"] == "true"
