"""The bundle descriptor that truncates a Java splittable DoFn's
restrictions in its JVM when a run drains (worker/java_truncation.py):
data input -> Beam's TruncateSizedRestriction with the DoFn's own ParDo
payload -> data output, both ports in the coder the stage reads the
DoFn's elements and restrictions with; a DoFn with side inputs is refused."""

import pytest
from apache_beam.portability.api import beam_fn_api_pb2, beam_runner_api_pb2

from beam_spark_runner.worker.beam_internals import DATA_INPUT_URN, DATA_OUTPUT_URN
from beam_spark_runner.worker.java_truncation import (
    PROCESS_URN,
    TRUNCATE_URN,
    UntruncatableJavaDoFn,
    truncate_descriptor,
)


def _stage(side_input=False):
    d = beam_fn_api_pb2.ProcessBundleDescriptor(id="stage")
    d.coders["wire"].spec.urn = "beam:coder:windowed_value:v1"
    d.coders["elem"].spec.urn = "beam:coder:bytes:v1"
    d.windowing_strategies["ws"].window_coder_id = "elem"
    d.environments["java"].urn = "beam:env:process:v1"
    d.pcollections["restrictions"].coder_id = "elem"
    d.pcollections["restrictions"].windowing_strategy_id = "ws"
    d.pcollections["records"].coder_id = "elem"
    port = beam_fn_api_pb2.RemoteGrpcPort(coder_id="wire")
    read = d.transforms["read"]
    read.spec.urn, read.spec.payload = DATA_INPUT_URN, port.SerializeToString()
    read.outputs["out"] = "restrictions"
    payload = beam_runner_api_pb2.ParDoPayload()
    payload.do_fn.urn = "beam:dofn:javasdk:0.1"
    payload.do_fn.payload = b"the DoFn"
    if side_input:
        payload.side_inputs["view"].access_pattern.urn = "beam:side_input:iterable:v1"
    process = d.transforms["process"]
    process.unique_name = "ReadFromKafka/Process"
    process.spec.urn, process.spec.payload = PROCESS_URN, payload.SerializeToString()
    process.environment_id = "java"
    process.inputs["main"] = "restrictions"
    if side_input:
        process.inputs["view"] = "records"
    process.outputs["out"] = "records"
    return d


def test_the_truncation_runs_the_dofns_own_payload_between_ports_of_the_stages_input_coder():
    stage = _stage()
    d = truncate_descriptor(stage, "read")
    by_urn = {t.spec.urn: t for t in d.transforms.values()}
    assert sorted(by_urn) == sorted([DATA_INPUT_URN, TRUNCATE_URN, DATA_OUTPUT_URN])
    truncate = by_urn[TRUNCATE_URN]
    assert truncate.spec.payload == stage.transforms["process"].spec.payload
    assert truncate.environment_id == "java" and list(truncate.inputs) == ["main"]
    assert truncate.unique_name == "ReadFromKafka/Process/Truncate"
    read_out = list(by_urn[DATA_INPUT_URN].outputs.values())
    assert read_out == list(truncate.inputs.values())
    assert list(by_urn[DATA_OUTPUT_URN].inputs.values()) == list(truncate.outputs.values())
    for urn in (DATA_INPUT_URN, DATA_OUTPUT_URN):
        assert beam_fn_api_pb2.RemoteGrpcPort.FromString(by_urn[urn].spec.payload).coder_id == "wire"
    for pcollection in truncate.inputs.values():
        assert d.pcollections[pcollection] == stage.pcollections["restrictions"]
    assert set(d.coders) == set(stage.coders) and set(d.environments) == {"java"}


def test_a_dofn_with_side_inputs_is_refused_naming_it():
    with pytest.raises(UntruncatableJavaDoFn, match="ReadFromKafka/Process reads side inputs"):
        truncate_descriptor(_stage(side_input=True), "read")
