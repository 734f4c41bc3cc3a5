"""Streaming: lifted CombinePerKeys carry how many records each partial holds.

A graph phase, `(stages, context) -> stages`, run just before Beam's
`lift_combiners`. For every CombinePerKey whose CombineFn is a pickled
Python one, the CombineFn becomes a `worker.record_counting.
RecordCountingCombineFn` around it, and the accumulator coder KV<varint,
the CombineFn's accumulator coder>. `lift_combiners` then builds the
Precombine, GroupByKey and MergeAccumulators PCollections from that coder,
so each partial sum that reaches the keyed step says how many records it
holds, and the step counts late and dropped records, not partial sums
(streaming/operators.py). The CombinePerKey's output (ExtractOutputs) is
unchanged.

Not wrapped (their late input is counted per partial sum): CombineFns of
another SDK (a Java CombineFn of a cross-language transform), whose
accumulators this SDK cannot build. Batch does not run this phase: a batch
run has no late input.
"""

from beam_spark_runner.worker.beam_internals import pickler
from apache_beam.portability import common_urns, python_urns
from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.utils import proto_utils
from google.protobuf import wrappers_pb2

from beam_spark_runner.worker.record_counting import RecordCountingCombineFn

_CPK = common_urns.composites.COMBINE_PER_KEY.urn
_VARINT = beam_runner_api_pb2.Coder(spec=beam_runner_api_pb2.FunctionSpec(urn=common_urns.coders.VARINT.urn))


def count_records_in_lifted_combines(stages, context):
    """Wraps the CombineFn of every Python CombinePerKey (see module doc);
    the stages are modified in place and returned."""
    stages = list(stages)
    for stage in stages:
        if len(stage.transforms) != 1:
            continue
        transform = stage.transforms[0]
        if transform.spec.urn != _CPK:
            continue
        payload = proto_utils.parse_Bytes(transform.spec.payload, beam_runner_api_pb2.CombinePayload)
        if payload.combine_fn.urn != python_urns.PICKLED_COMBINE_FN:
            continue
        transform.spec.payload = _counting_payload(payload, context).SerializeToString()
    return stages


def _counting_payload(payload, context):
    pickled = wrappers_pb2.BytesValue.FromString(payload.combine_fn.payload).value
    wrapped = pickler.dumps(RecordCountingCombineFn(pickled_inner=pickled))
    accumulator = beam_runner_api_pb2.Coder(
        spec=beam_runner_api_pb2.FunctionSpec(urn=common_urns.coders.KV.urn),
        component_coder_ids=[context.add_or_get_coder_id(_VARINT), payload.accumulator_coder_id],
    )
    return beam_runner_api_pb2.CombinePayload(
        combine_fn=beam_runner_api_pb2.FunctionSpec(
            urn=python_urns.PICKLED_COMBINE_FN,
            payload=wrappers_pb2.BytesValue(value=wrapped).SerializeToString(),
        ),
        accumulator_coder_id=context.add_or_get_coder_id(accumulator),
    )
