"""Beam metrics from executors to the driver through a Spark accumulator.

Each task adds the consolidated MonitoringInfos of its partition, keyed by
stage. Spark merges accumulator updates of successful tasks only once per
task attempt in actions; values are reported as both attempted and
committed (see docs/conformance.md for the caveat on task retries).
"""
import collections

from apache_beam.metrics import monitoring_infos
from apache_beam.portability.api import metrics_pb2
from pyspark.accumulators import AccumulatorParam


class MonitoringInfosParam(AccumulatorParam):
    """Accumulates {stage name: [serialized MonitoringInfo]}."""

    def zero(self, value):
        return {}

    def addInPlace(self, acc, update):
        for stage, infos in update.items():
            acc.setdefault(stage, []).extend(infos)
        return acc


def serialize(infos):
    return [mi.SerializeToString() for mi in monitoring_infos.consolidate(infos)]


def by_stage(accumulated):
    """Accumulator value -> {stage: [MonitoringInfo]} consolidated."""
    result = collections.OrderedDict()
    for stage, blobs in accumulated.items():
        infos = [metrics_pb2.MonitoringInfo.FromString(b) for b in blobs]
        result[stage] = list(monitoring_infos.consolidate(infos))
    return result
