"""The plan record a streaming checkpoint keeps, and what counts as a plan
the checkpoint's state cannot follow (streaming/plan_fingerprint.py)."""

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.transforms import userstate

from beam_spark_runner.errors import CheckpointMismatchError
from beam_spark_runner.streaming.plan_fingerprint import PlanFingerprint, fingerprint
from beam_spark_runner.translation.planner import pipeline_proto_of, plan_streaming_pipeline


class _Count(beam.DoFn):
    COUNT = userstate.ReadModifyWriteStateSpec("count", beam.coders.VarIntCoder())

    def process(self, kv, count=beam.DoFn.StateParam(COUNT)):
        count.write((count.read() or 0) + 1)
        yield kv


def _print_of(stateful=False, map_body=lambda kv: kv, accumulating=False, key_groups=2):
    p = beam.Pipeline(options=PipelineOptions(["--streaming"]))
    events = p | TestStream().add_elements([("a", 1)]).advance_watermark_to_infinity()
    keyed = events | beam.Map(map_body)
    if stateful:
        keyed = keyed | beam.ParDo(_Count())
    mode = beam.transforms.trigger.AccumulationMode
    (
        keyed
        | beam.WindowInto(
            beam.window.FixedWindows(5),
            trigger=beam.transforms.trigger.AfterWatermark(early=beam.transforms.trigger.AfterCount(1)),
            accumulation_mode=mode.ACCUMULATING if accumulating else mode.DISCARDING,
        )
        | beam.GroupByKey()
    )
    return fingerprint(plan_streaming_pipeline(pipeline_proto_of(p)), key_groups)


def test_the_record_round_trips_and_names_state():
    record = _print_of(stateful=True)
    assert PlanFingerprint.from_json(record.to_json(), "x") == record
    states = [s for op in record.operators for s in op.state]
    assert any(s.startswith("state:") and s.endswith("/count") for s in states)
    assert "accumulation:DISCARDING" in states and any(s.startswith("window_fn:") for s in states)


def test_changed_code_inside_a_dofn_is_not_a_difference():
    assert _print_of(map_body=lambda kv: kv).differences(_print_of(map_body=lambda kv: (kv[0], kv[1] + 1))) == []


def test_differences_name_each_operator_and_setting():
    base = _print_of()
    with_state = _print_of(stateful=True)
    added = with_state.differences(base)
    assert added and all("keyed operator" in line for line in added)
    assert any("new in this pipeline" in line for line in added)
    removed = base.differences(with_state)
    assert any("in the checkpoint but not in this pipeline" in line for line in removed)
    (mode,) = _print_of(accumulating=True).differences(base)
    assert "accumulation:DISCARDING" in mode and "accumulation:ACCUMULATING" in mode
    (groups,) = _print_of(key_groups=4).differences(base)
    assert "2 key-groups" in groups and "4" in groups


@pytest.mark.parametrize(
    "data, problem",
    [
        (b'{"format_version": 1, "key_gr', "not a readable plan record"),
        (b'{"format_version": 1}', "not a readable plan record"),
        (b'{"format_version": 99, "key_groups": 2, "sources": [], "operators": []}', "format version 99"),
    ],
)
def test_damaged_or_newer_records_are_refused_naming_the_file(data, problem):
    with pytest.raises(CheckpointMismatchError) as e:
        PlanFingerprint.from_json(data, "/ckpt/beam/plan.json")
    assert problem in str(e.value) and "/ckpt/beam/plan.json" in str(e.value)
