"""Each operator of a streaming query carries itself; what the operators
share of the plan (the pipeline's components, the row addressing) is
named by all of them and sent once. A copy of it in every operator's UDF
made a query of 69 Java operators carry 43 MB of plans, and serializing
its tasks ran out of the driver's 1 GiB heap."""

import pickle
import random

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.transforms import window

from beam_spark_runner.execution.streaming_query import operator_refs
from beam_spark_runner.execution.streaming_udfs import SharedPlan
from beam_spark_runner.translation.planner import pipeline_proto_of, plan_streaming_pipeline

STAGES = 12
PAYLOAD = 50_000  # bytes each stage's DoFn carries in the pipeline's components


def _many_stage_plan():
    p = beam.Pipeline(options=PipelineOptions(["--streaming"]))
    pcoll = (
        p
        | TestStream().add_elements([("k", 1)]).advance_watermark_to_infinity()
        | beam.WindowInto(window.FixedWindows(10))
    )
    for i in range(STAGES):
        blob = random.Random(i).randbytes(PAYLOAD)  # Beam compresses pickled DoFns: incompressible
        # A grouping between stages keeps each its own operator.
        pcoll = (
            pcoll
            | "Add %d" % i >> beam.Map(lambda kv, b=blob: (kv[0], kv[1] + len(b)))
            | "Group %d" % i >> (beam.GroupByKey())
        )
        pcoll = pcoll | "Sum %d" % i >> beam.MapTuple(lambda k, vs: (k, sum(vs)))
    return plan_streaming_pipeline(pipeline_proto_of(p))


def test_the_operators_udfs_carry_the_shared_plan_once_between_them():
    plan = _many_stage_plan()
    shared_size = len(pickle.dumps((plan.for_operators(), 2)))
    assert shared_size > STAGES * PAYLOAD  # every stage's DoFn is in the components
    refs = operator_refs(plan, SharedPlan("run", broadcast_pickle=b"a broadcast's reference"))
    assert len(refs) >= 2 * STAGES
    carried = sum(len(pickle.dumps(ref)) for _, ref in refs)
    # Each operator's own stage (its DoFn's payload among them) once, not
    # the components once per operator (which would be len(refs) * shared_size).
    assert carried < 2 * shared_size, (carried, shared_size, len(refs))


def test_an_operator_ref_unpickled_in_a_worker_names_the_same_broadcast():
    ref = operator_refs(_many_stage_plan(), SharedPlan("run", broadcast_pickle=b"reference"))[0][1]
    copy = pickle.loads(pickle.dumps(ref))
    assert (copy.shared.token, copy.name, copy.pickled) == ("run", ref.name, ref.pickled)
    assert pickle.loads(pickle.dumps(copy)).shared._broadcast_pickle == b"reference"
