"""Beam metrics from executors to the driver through a Spark accumulator.

Each task adds the consolidated MonitoringInfos of its partition, keyed by
stage. Spark merges accumulator updates of successful tasks only once per
task attempt in actions; values are reported as both attempted and
committed (see docs/conformance.md for the caveat on task retries).
"""

import collections

from apache_beam.portability.api import metrics_pb2
from pyspark.accumulators import AccumulatorParam

from beam_spark_runner.metrics_merge import merge


class MonitoringInfosParam(AccumulatorParam):
    """Accumulates {stage name: [serialized MonitoringInfo]}."""

    def zero(self, value):
        return {}

    def addInPlace(self, acc, update):
        for stage, infos in update.items():
            acc.setdefault(stage, []).extend(infos)
        return acc


def serialize(infos):
    return [info.SerializeToString() for info in merge(infos)]


def by_stage(accumulated):
    """Accumulator value -> {stage: [MonitoringInfo]} consolidated."""
    result = collections.OrderedDict()
    for stage, blobs in accumulated.items():
        infos = [metrics_pb2.MonitoringInfo.FromString(b) for b in blobs]
        result[stage] = merge(infos)
    return result


class WarningsParam(AccumulatorParam):
    """Accumulates the distinct warnings user code raised in executors, as
    (module, class name, message), so the driver can re-issue them."""

    def zero(self, value):
        return []

    def addInPlace(self, acc, update):
        for item in update:
            if item not in acc:
                acc.append(item)
        return acc


def describe_warning(w):
    return (w.category.__module__, w.category.__qualname__, str(w.message))


def reissue_warnings(items):
    """Re-raises executor warnings in the driver with their original class."""
    import importlib
    import warnings

    for module, qualname, message in items:
        try:
            category = importlib.import_module(module)
            for part in qualname.split("."):
                category = getattr(category, part)
        except (ImportError, AttributeError):
            category = UserWarning
        warnings.warn(message, category, stacklevel=2)
