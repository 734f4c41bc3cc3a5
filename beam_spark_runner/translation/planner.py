"""Pipeline planning: a pipeline (proto) in, an execution plan out, no Spark.

    beam.Pipeline --phases.apply_pipeline_overrides--> (native reads/writes)
      --pipeline_proto_of--> runner-API proto
      --sdk_environments.resolve_anyof_environments--> (one way to run each SDK)
      --requirements.check_pipeline--> (refused with every problem named)
      --phases.PROTO_REWRITES--> (retractions, unliftable combines)
      --Beam's phases + ours (phases.BATCH_PHASES / streaming)--> stages
      --batch_plan.build_plan / streaming_plan.plan_streaming--> plan

`beam-spark-plan`, `describe_plan` and the tests call this without a
SparkSession; runner.py runs what it returns.
"""

from apache_beam.options import pipeline_options
from apache_beam.portability import common_urns
from apache_beam.runners.pipeline_utils import merge_common_environments, validate_pipeline_graph
from apache_beam.transforms import environments

from beam_spark_runner.translation import batch_plan as plan_lib, phases, requirements, streaming_plan
from beam_spark_runner.translation.sdk_environments import resolve_anyof_environments


def plan_pipeline(pipeline_proto, drain=False, plain_python=True):
    """Checks a pipeline proto and plans it; raises UnsupportedPipelineError.

    Pure planning: no Spark needed, so `beam-spark-plan` and tests can call it.
    `plain_python=False` keeps every stage on the SDK harness.
    """
    validate_pipeline_graph(pipeline_proto)
    pipeline_proto = resolve_anyof_environments(pipeline_proto)
    requirements.check_pipeline(pipeline_proto)
    pipeline_proto = _rewrite(pipeline_proto)
    context, stages = phases.create_stages(pipeline_proto, drain=drain)
    return plan_lib.build_plan(context, stages, plain_python=plain_python, streamed_groups=True)


def plan_streaming_pipeline(pipeline_proto, drain=False, plain_python=True, watermark_percentile=1.0):
    """Checks and plans an unbounded pipeline (Structured Streaming);
    `plain_python=False` keeps every stateless stage on the SDK harness;
    `watermark_percentile`: the pipeline's (--watermark_percentile)."""
    validate_pipeline_graph(pipeline_proto)
    pipeline_proto = resolve_anyof_environments(pipeline_proto)
    requirements.check_pipeline(pipeline_proto, streaming=True)
    return streaming_plan.plan_streaming(
        _rewrite(pipeline_proto), drain=drain, plain_python=plain_python, watermark_percentile=watermark_percentile
    )


def _rewrite(pipeline_proto):
    """The proto rewrites both engines need before Beam's phases, in order
    (phases.PROTO_REWRITES)."""
    for rewrite in phases.PROTO_REWRITES:
        pipeline_proto = rewrite(pipeline_proto)
    return pipeline_proto


def is_streaming(pipeline_proto, options=None):
    """--streaming, or a pipeline with a TestStream: those run on Structured
    Streaming, as Beam's DirectRunner switches engines for TestStream.
    Other unbounded reads without --streaming run in batch, drained as
    Beam's FnApiRunner does."""
    if options is not None and options.view_as(pipeline_options.StandardOptions).streaming:
        return True
    return any(
        t.spec.urn == common_urns.primitives.TEST_STREAM.urn for t in pipeline_proto.components.transforms.values()
    )


def pipeline_proto_of(pipeline):
    """The runner-API proto SparkRunner executes for a `beam.Pipeline`."""
    return merge_common_environments(
        pipeline.to_runner_api(default_environment=environments.EmbeddedPythonEnvironment.default())
    )


def describe_plan(pipeline):
    """The Spark plan of a `beam.Pipeline`, as text, without running it."""
    return plan_pipeline(pipeline_proto_of(pipeline)).describe()
