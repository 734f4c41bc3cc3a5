"""Which output a TestStream event belongs to (streaming/script.py): Beam
Java writes an empty tag for its one output's events, which the
transform's outputs name otherwise; those events were dropped."""

from beam_spark_runner.streaming.script import _output_tag


def test_an_empty_tag_is_the_one_outputs():
    assert _output_tag({"output": object()}, "") == "output"


def test_named_tags_and_several_outputs_stay_as_they_are():
    outputs = {"a": object(), "b": object()}
    assert _output_tag(outputs, "a") == "a"
    assert _output_tag(outputs, "") == ""
    assert _output_tag({"None": object()}, "None") == "None"
    assert _output_tag({}, "") == ""
