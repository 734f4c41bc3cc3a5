"""Metrics reported by several partitions merge by each type's rule."""

from apache_beam.metrics import monitoring_infos as mi
from apache_beam.metrics.cells import BoundedTrieData, DistributionData, GaugeData
from apache_beam.runners.portability.portable_metrics import from_monitoring_infos

from beam_spark_runner.metrics_merge import merge


def _values(infos):
    counters, dists, gauges, sets, tries = from_monitoring_infos(merge(infos), user_metrics_only=True)
    return [list(d.values()) for d in (counters, dists, gauges, sets, tries)]


def test_string_sets_from_two_partitions_are_unioned():
    a = mi.user_set_string("ns", "m", {"a"}, ptransform="step")
    b = mi.user_set_string("ns", "m", {"zzz"}, ptransform="step")
    assert _values([a, b])[3] == [{"a", "zzz"}]


def test_counters_add_and_gauges_keep_latest():
    c1 = mi.int64_user_counter("ns", "c", 2, ptransform="step")
    c2 = mi.int64_user_counter("ns", "c", 4, ptransform="step")
    g_old = mi.int64_user_gauge("ns", "g", GaugeData(1, timestamp=1000), ptransform="step")
    g_new = mi.int64_user_gauge("ns", "g", GaugeData(9, timestamp=2000), ptransform="step")
    counters, _, gauges, _, _ = _values([c1, c2, g_new, g_old])
    assert counters == [6]
    assert [g.value for g in gauges] == [9]


def test_bounded_tries_combine():
    t1, t2 = BoundedTrieData(), BoundedTrieData()
    t1.add(("a",))
    t2.add(("z", "z"))
    a = mi.user_bounded_trie("ns", "t", t1, ptransform="step")
    b = mi.user_bounded_trie("ns", "t", t2, ptransform="step")
    (trie,) = _values([a, b])[4]
    assert trie.contains(("a",)) and trie.contains(("z", "z")) and trie.size() == 2


def test_merging_as_reports_arrive_equals_merging_them_all_at_once_and_holds_one_per_metric():
    from beam_spark_runner.metrics_merge import MergedMetrics

    reports = []
    for i in range(200):
        reports += [
            mi.int64_user_counter("ns", "c", i, ptransform="step"),
            mi.int64_user_distribution("ns", "d", DistributionData(i, 1, i, i), ptransform="step"),
            mi.int64_user_gauge("ns", "g", GaugeData(i, timestamp=1000 + i), ptransform="step"),
            mi.user_set_string("ns", "s", {"v%d" % (i % 7)}, ptransform="step"),
        ]
    incremental = MergedMetrics()
    for report in reports:
        incremental.add("stage", [report.SerializeToString()])
        assert incremental.size() <= 4
    assert _values(incremental.infos()["stage"]) == _values(reports)
