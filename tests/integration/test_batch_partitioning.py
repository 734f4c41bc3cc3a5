"""How the batch executor spreads work over Spark partitions."""

import apache_beam as beam
from apache_beam.coders import coders
from apache_beam.coders.coder_impl import create_OutputStream
from apache_beam.transforms import window
from apache_beam.utils.windowed_value import WindowedValue

from beam_spark_runner.execution.batch_execution import BatchExecution
from beam_spark_runner.translation.planner import pipeline_proto_of, plan_pipeline


def _execution(spark_session, parallelism):
    p = beam.Pipeline()
    p | beam.Create([1])
    return BatchExecution(spark_session, plan_pipeline(pipeline_proto_of(p)), parallelism)


def test_sdf_restrictions_are_dealt_evenly_over_partitions(spark_session):
    """Few restrictions in one block must still reach every partition (PySpark's
    repartition moves pickled batches and would leave them together)."""
    execution = _execution(spark_session, 2)
    coder = coders.WindowedValueCoder(coders.VarIntCoder(), coders.GlobalWindowCoder())
    coder_id = _register(execution, coder)
    out = create_OutputStream()
    for i in range(4):
        coder.get_impl().encode_to_stream(WindowedValue(i, 0, [window.GlobalWindow()]), out, True)
    one_block = spark_session.sparkContext.parallelize([out.get()], 1)
    sizes = execution._spread(one_block, coder_id).glom().map(len).collect()
    assert sizes == [2, 2]


def _register(execution, coder):
    """Adds `coder` to the plan's components; returns its id."""
    from apache_beam.portability.api import beam_runner_api_pb2
    from apache_beam.runners import pipeline_context

    components = beam_runner_api_pb2.Components.FromString(execution.plan.components)
    context = pipeline_context.PipelineContext(components)
    coder_id = context.coders.get_id(coder)
    merged = context.to_runner_api().SerializeToString()
    execution.plan = type(execution.plan)(execution.plan.stages, execution.plan.groups, merged)
    return coder_id


def test_sdf_restrictions_are_balanced_by_size_estimate(spark_session):
    """Sized restrictions ((element, restriction), size): the big one alone,
    the small ones together."""
    execution = _execution(spark_session, 2)
    kv = coders.TupleCoder([coders.StrUtf8Coder(), coders.FloatCoder()])
    coder = coders.WindowedValueCoder(kv, coders.GlobalWindowCoder())
    coder_id = _register(execution, coder)
    out = create_OutputStream()
    for name, size in [("big", 90.0), ("s1", 30.0), ("s2", 30.0), ("s3", 30.0)]:
        coder.get_impl().encode_to_stream(WindowedValue((name, size), 0, [window.GlobalWindow()]), out, True)
    rdd = spark_session.sparkContext.parallelize([out.get()], 1)
    parts = execution._spread(rdd, coder_id).glom().collect()
    names = sorted(sorted(coder.get_impl().decode_nested(e).value[0] for e in part) for part in parts)
    assert names == [["big"], ["s1", "s2", "s3"]]
