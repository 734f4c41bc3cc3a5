"""Merging Beam MonitoringInfos reported by many executors and bundles.

Beam's `monitoring_infos.consolidate` merges only sums and distributions and
passes other types through unmerged, which loses data when the same metric
is reported by several partitions (string sets, gauges, bounded tries). This
module merges every user metric type by its own rule: sum, distribution
combine, latest gauge, set union, bounded-trie combine. No Spark here.
"""

import collections
import functools

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
    return a if _gauge_time_ms(a) >= _gauge_time_ms(b) else b


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


def merge(infos):
    """One MonitoringInfo per (URN, labels); mergeable types are combined,
    others keep the last report."""
    grouped = collections.OrderedDict()
    for info in infos:
        grouped.setdefault(mi.to_key(info), []).append(info)
    merged = []
    for reports in grouped.values():
        merger = PAYLOAD_MERGERS.get(reports[0].type)
        if merger is None or len(reports) == 1:
            merged.append(reports[-1])
            continue
        payload = functools.reduce(merger, (r.payload for r in reports))
        merged.append(
            metrics_pb2.MonitoringInfo(
                urn=reports[0].urn, type=reports[0].type, labels=reports[0].labels, payload=payload
            )
        )
    return merged
