"""beam-spark-runner: run Apache Beam pipelines on Apache Spark."""
from beam_spark_runner.options import SparkRunnerOptions
from beam_spark_runner.result import PipelineExecutionError, SparkPipelineResult
from beam_spark_runner.runner import SparkRunner, describe_plan, plan_pipeline
from beam_spark_runner.translation.requirements import UnsupportedPipelineError

__all__ = [
    "SparkRunner", "SparkRunnerOptions", "SparkPipelineResult", "PipelineExecutionError",
    "UnsupportedPipelineError", "plan_pipeline", "describe_plan",
]
