"""Merging Beam MonitoringInfos reported by many executors and bundles.

Beam's `monitoring_infos.consolidate` merges only sums and distributions and
passes other types through unmerged, which loses data when the same metric
is reported by several partitions (string sets, gauges, bounded tries). This
module merges every user metric type by its own rule: sum, distribution
combine, latest gauge, set union, bounded-trie combine. No Spark here.
"""

import collections

from apache_beam.coders import coders
from apache_beam.coders.coder_impl import create_InputStream
from apache_beam.metrics import monitoring_infos as mi
from apache_beam.metrics.cells import BoundedTrieData
from apache_beam.portability.api import metrics_pb2

_STRINGS = coders.IterableCoder(coders.StrUtf8Coder())


def _union_strings(a, b):
    return _STRINGS.encode(sorted(set(_STRINGS.decode(a)) | set(_STRINGS.decode(b))))


def _gauge_time_ms(payload):
    # A LATEST_INT64 payload starts with its timestamp (varint milliseconds).
    return coders.VarIntCoder().get_impl().decode_from_stream(create_InputStream(payload), True)


def _latest_gauge(a, b):
    # `b` arrived later: on a tie it is the newer value.
    return a if _gauge_time_ms(a) > _gauge_time_ms(b) else b


def _combine_tries(a, b):
    left = BoundedTrieData.from_proto(metrics_pb2.BoundedTrie.FromString(a))
    right = BoundedTrieData.from_proto(metrics_pb2.BoundedTrie.FromString(b))
    return left.combine(right).to_proto().SerializeToString()


PAYLOAD_MERGERS = {
    mi.SUM_INT64_TYPE: mi.sum_payload_combiner,
    mi.DISTRIBUTION_INT64_TYPE: mi.distribution_payload_combiner,
    mi.LATEST_INT64_TYPE: _latest_gauge,
    mi.STRING_SET_TYPE: _union_strings,
    mi.BOUNDED_TRIE_TYPE: _combine_tries,
}


class MergedMetrics:
    """Metrics merged as reports arrive, per label (a stage, or the run):
    one MonitoringInfo per (URN, labels), mergeable types combined by
    their rule, others keeping the latest report. What it holds, and the
    cost of reading it, depend on how many distinct metrics were reported,
    not on how many reports (micro-batches, bundles) there were. Not
    thread-safe: the caller serializes `add` and reads."""

    def __init__(self):
        self._by_label = collections.OrderedDict()  # label -> OrderedDict(key -> MonitoringInfo)

    def add(self, label, infos):
        """Merges `infos` (MonitoringInfos, or their serialized bytes) into `label`'s."""
        merged = self._by_label.setdefault(label, collections.OrderedDict())
        for info in infos:
            if isinstance(info, bytes):
                info = metrics_pb2.MonitoringInfo.FromString(info)
            key = mi.to_key(info)
            previous = merged.get(key)
            merger = PAYLOAD_MERGERS.get(info.type)
            if previous is None or merger is None:
                merged[key] = info
            else:
                merged[key] = metrics_pb2.MonitoringInfo(
                    urn=info.urn, type=info.type, labels=info.labels, payload=merger(previous.payload, info.payload)
                )

    def infos(self):
        """{label: [MonitoringInfo]}, one per distinct metric (copies of the lists)."""
        return collections.OrderedDict((label, list(m.values())) for label, m in self._by_label.items())

    def serialized(self):
        """{label: [serialized MonitoringInfo]}, one per distinct metric."""
        return collections.OrderedDict(
            (label, [info.SerializeToString() for info in m.values()]) for label, m in self._by_label.items()
        )

    def size(self):
        """How many MonitoringInfos are held (over every label)."""
        return sum(len(m) for m in self._by_label.values())


def merge(infos):
    """One MonitoringInfo per (URN, labels); mergeable types are combined,
    others keep the last report."""
    metrics = MergedMetrics()
    metrics.add(None, infos)
    return metrics.infos().get(None, [])
