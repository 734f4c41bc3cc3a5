"""Lifted combines that count their records: the CombineFn wrapper, the
streaming planning phase that installs it, the plain pre-combine that fills
it and the reduce driver that counts late input by it."""

import apache_beam as beam
from apache_beam.internal import pickler
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.testing.test_stream import TestStream
from apache_beam.transforms import combiners, core, trigger, window
from apache_beam.utils import proto_utils
from apache_beam.utils.windowed_value import WindowedValue

from beam_spark_runner.translation import phases
from beam_spark_runner.translation.planner import pipeline_proto_of
from beam_spark_runner.worker.record_counting import RecordCountingCombineFn, record_count
from triggers.driver import ReduceSpec

_PRECOMBINE = common_urns.combine_components.COMBINE_PER_KEY_PRECOMBINE.urn


def _fold(fn, inputs):
    acc = fn.create_accumulator()
    for x in inputs:
        acc = fn.add_input(acc, x)
    return acc


def test_the_wrapper_outputs_what_the_wrapped_combine_fn_outputs_and_counts_its_inputs():
    for inner in (core.CombineFn.from_callable(sum), combiners.MeanCombineFn(), combiners.TopCombineFn(2)):
        fn = RecordCountingCombineFn(inner)
        parts = [_fold(fn, [1, 2, 3]), fn.add_inputs(fn.create_accumulator(), iter([4, 5])), fn.create_accumulator()]
        merged = fn.merge_accumulators(parts)
        assert [record_count(p) for p in parts] == [3, 2, 0]
        assert record_count(merged) == 5
        assert fn.extract_output(fn.compact(merged)) == inner.extract_output(_fold(inner, [1, 2, 3, 4, 5]))


def test_the_wrapper_pickles_without_unpickling_what_it_wraps_and_codes_its_count():
    pickled_inner = pickler.dumps(combiners.MeanCombineFn())
    fn = pickler.loads(pickler.dumps(RecordCountingCombineFn(pickled_inner=pickled_inner)))
    assert fn._inner is None  # unpickled only where it runs
    acc = _fold(fn, [2, 4])
    coder = fn.get_accumulator_coder()
    assert coder.decode(coder.encode(acc)) == (2, (6, 2))
    assert fn.extract_output(acc) == 3


def _stream_with(combine):
    p = beam.Pipeline(options=PipelineOptions(["--streaming"]))
    _ = (
        p
        | TestStream().add_elements([window.TimestampedValue(("a", 1), 1)]).advance_watermark_to_infinity()
        | beam.WindowInto(window.FixedWindows(10))
        | "Total" >> combine
        | beam.Map(print)
    )
    return pipeline_proto_of(p)


def _precombine(phase_list, proto):
    """The Precombine transform after planning, and the coder of its output."""
    context, stages = phases.create_stages(proto, phases=phase_list, streaming=True)
    found = [t for s in stages for t in s.transforms if t.spec.urn == _PRECOMBINE]
    assert len(found) == 1
    coders_ = context.components.coders
    output = context.components.pcollections[found[0].outputs["out"]]
    return found[0], coders_, coders_[output.coder_id]


def _combine_fn(transform):
    payload = proto_utils.parse_Bytes(transform.spec.payload, beam_runner_api_pb2.CombinePayload)
    return core.CombineFn.from_runner_api(payload.combine_fn, None)


def test_streaming_planning_wraps_a_lifted_python_combine_fn_and_its_accumulator_coder():
    proto = _stream_with(beam.CombinePerKey(sum))
    pre, coders_, output = _precombine(phases.STREAMING_PHASES, proto)
    fn = _combine_fn(pre)
    assert isinstance(fn, RecordCountingCombineFn)
    assert fn.extract_output(_fold(fn, [3, 4])) == 7
    # Precombine's output: KV<key, KV<varint, the sum's accumulator coder>>.
    assert output.spec.urn == common_urns.coders.KV.urn
    accumulator = coders_[output.component_coder_ids[1]]
    assert accumulator.spec.urn == common_urns.coders.KV.urn
    assert coders_[accumulator.component_coder_ids[0]].spec.urn == common_urns.coders.VARINT.urn
    # Batch has no late input: its combine is left as written.
    batch_pre, _, _ = _precombine(phases.BATCH_PHASES, proto)
    assert not isinstance(_combine_fn(batch_pre), RecordCountingCombineFn)


def test_the_reduce_driver_counts_late_and_dropped_input_by_weight():
    spec = ReduceSpec(
        window.FixedWindows(10),
        trigger.AfterWatermark(late=trigger.AfterCount(1)),
        trigger.AccumulationMode.DISCARDING,
        allowed_lateness=10,
        weight=record_count,
    )
    reducer = spec.new_reducer()
    reducer.advance_watermark_us(15 * 10**6)
    late = WindowedValue((4, "partial"), 5, (window.IntervalWindow(0, 10),))
    reducer.process_us([late], 15 * 10**6)
    assert (reducer.late, reducer.dropped_late) == (4, 0)
    reducer.advance_watermark_us(25 * 10**6)
    dropped = WindowedValue((3, "partial"), 6, (window.IntervalWindow(0, 10),))
    reducer.process_us([dropped], 25 * 10**6)
    assert (reducer.late, reducer.dropped_late) == (4, 3)
    unweighted = ReduceSpec(window.FixedWindows(10), trigger.AfterWatermark(), 1, allowed_lateness=10).new_reducer()
    unweighted.process_us([late], 15 * 10**6)
    assert unweighted.late == 1
