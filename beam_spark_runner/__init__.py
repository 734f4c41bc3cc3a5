"""beam-spark-runner: run Apache Beam pipelines on Apache Spark.

Names are imported on first use (PEP 562): Spark's helper processes import
modules of this package (the streaming source planner, stateful-operator
set-up) and must not pay for importing Beam when they do not need it.
"""

import importlib

from beam_spark_runner import versions as _versions

# A PySpark or Beam outside the supported ranges fails here, naming the
# installed release and the range (beam_spark_runner/versions.py).
_versions.check_installed()

_EXPORTS = {
    "SparkRunner": "beam_spark_runner.runner",
    "plan_pipeline": "beam_spark_runner.translation.planner",
    "describe_plan": "beam_spark_runner.translation.planner",
    "SparkRunnerOptions": "beam_spark_runner.options",
    "SparkPipelineResult": "beam_spark_runner.result",
    "PipelineExecutionError": "beam_spark_runner.result",
    "UnsupportedPipelineError": "beam_spark_runner.errors",
    "watermark_percentile": "beam_spark_runner.translation.watermark_percentiles",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError("module 'beam_spark_runner' has no attribute %r" % name)
