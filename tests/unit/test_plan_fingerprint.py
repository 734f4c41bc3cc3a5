"""The plan record a streaming checkpoint keeps, and what counts as a plan
the checkpoint's state cannot follow (streaming/plan_fingerprint.py)."""

import json
import typing

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


def _print_of(stateful=False, map_body=lambda kv: kv, accumulating=False, key_groups=2, output_types=None):
    p = beam.Pipeline(options=PipelineOptions(["--streaming"]))
    events = p | TestStream().add_elements([("a", 1)]).advance_watermark_to_infinity()
    mapped = beam.Map(map_body)
    keyed = events | (mapped if output_types is None else mapped.with_output_types(output_types))
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


def test_coders_are_recorded_by_structure_and_a_changed_one_is_named():
    record = _print_of(stateful=True)
    coders = {what: coder for op in record.operators for what, coder in op.coders}
    assert coders["state ParDo(_Count)/count"] == "beam:coder:varint:v1"
    assert "python:apache_beam.coders.coders.FastPrimitivesCoder" in coders["grouped input"]
    typed = _print_of(stateful=True, output_types=typing.Tuple[str, int])
    problems = typed.differences(record)
    assert problems and all("the coder of" in line for line in problems)
    assert any("grouped input" in line and "beam:coder:varint:v1" in line for line in problems)
    assert any("input ref_PCollection" in line for line in problems)  # the stateful DoFn's keyed input


def test_a_version_1_record_is_read_and_checked_without_coders():
    current = _print_of(stateful=True)
    old = json.loads(current.to_json())
    old["format_version"] = 1
    for op in old["operators"]:
        del op["coders"]
    recorded = PlanFingerprint.from_json(json.dumps(old).encode(), "x")
    assert recorded.format_version == 1 and all(op.coders is None for op in recorded.operators)
    assert _print_of(stateful=True, output_types=typing.Tuple[str, int]).differences(recorded) == []
    assert _print_of(accumulating=True, stateful=True).differences(recorded)  # the rest is still checked


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


def test_a_java_serialized_coder_is_recorded_by_its_class_and_an_old_digest_still_matches():
    import os

    from apache_beam.portability.api import beam_runner_api_pb2

    from beam_spark_runner.streaming.plan_fingerprint import _coder_differences, _CoderDescriber

    with open(os.path.join(os.path.dirname(__file__), "..", "data", "java_schema_coder.snappy"), "rb") as f:
        payload = f.read()
    components = beam_runner_api_pb2.Components()
    components.coders["schema"].spec.urn = "beam:coders:javasdk:0.1"
    components.coders["schema"].spec.payload = payload
    # The same coder built again carries another random schema id: other bytes, same class.
    components.coders["again"].spec.urn = "beam:coders:javasdk:0.1"
    components.coders["again"].spec.payload = payload[:-1] + bytes([payload[-1] ^ 1])
    described = _CoderDescriber(components)
    assert (
        described("schema") == described("again") == "beam:coders:javasdk:0.1:org.apache.beam.sdk.schemas.SchemaCoder"
    )
    old = {"input": "beam:coder:kv:v1[beam:coders:javasdk:0.1#2dde46d54b59, beam:coder:varint:v1]"}
    now = {
        "input": "beam:coder:kv:v1[beam:coders:javasdk:0.1:org.apache.beam.sdk.schemas.SchemaCoder, beam:coder:varint:v1]"
    }
    assert _coder_differences("Op", old, now) == []
    changed = {"input": "beam:coder:kv:v1[beam:coders:javasdk:0.1:x.Y, beam:coder:bytes:v1]"}
    assert _coder_differences("Op", old, changed) != []
    assert _coder_differences("Op", now, {"input": now["input"].replace("SchemaCoder", "Other")}) != []
