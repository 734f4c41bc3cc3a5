"""A streaming checkpoint records the plan its state belongs to, and a run
whose plan differs where the state depends on it is refused at submission;
the records go through the checkpoint's Hadoop file system."""

import json
import time
import typing

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.runner import PipelineState
from apache_beam.transforms.periodicsequence import PeriodicImpulse

from beam_spark_runner import SparkRunner
from beam_spark_runner.errors import CheckpointMismatchError


def _run(checkpoint, extra_group=False, parallelism=2, typed=False):
    start = int(time.time()) - 10  # ticks in the past fire at once
    p = beam.Pipeline(
        runner=SparkRunner(),
        options=PipelineOptions(["--streaming", "--checkpoint_dir=%s" % checkpoint, "--parallelism=%d" % parallelism]),
    )
    ticks = (
        p
        | PeriodicImpulse(start_timestamp=start, stop_timestamp=start + 2, fire_interval=1)
        | beam.Map(lambda t: ("k", int(t))).with_output_types(typing.Tuple[str, int] if typed else typing.Any)
        | beam.WindowInto(beam.window.FixedWindows(5))
    )
    sums = ticks | "sum" >> beam.CombinePerKey(sum)
    if extra_group:
        sums | "again" >> beam.GroupByKey()
    return p.run()


def test_a_checkpoint_records_its_plan_and_refuses_a_different_one(tmp_path):
    checkpoint = "file://%s" % (tmp_path / "checkpoint")
    assert _run(checkpoint).wait_until_finish() == PipelineState.DONE
    record = json.loads((tmp_path / "checkpoint" / "beam" / "plan.json").read_text())
    assert record["format_version"] == 2 and record["key_groups"] == 2
    assert all(op["coders"] for op in record["operators"])
    assert [op["name"] for op in record["operators"]][-1] == "sum/GroupByKey" or any(
        "sum" in op["name"] for op in record["operators"]
    )
    assert (tmp_path / "checkpoint" / "beam" / "holds").is_dir()
    # The same pipeline resumes (here: finds nothing left to do).
    assert _run(checkpoint).wait_until_finish() == PipelineState.DONE

    with pytest.raises(CheckpointMismatchError) as added:
        _run(checkpoint, extra_group=True)
    message = str(added.value)
    assert "again" in message and "new in this pipeline" in message
    assert str(tmp_path / "checkpoint") in message

    with pytest.raises(CheckpointMismatchError) as regrouped:
        _run(checkpoint, parallelism=3)
    assert "2 key-groups" in str(regrouped.value) and "--parallelism=2" in str(regrouped.value)


def test_a_changed_coder_is_refused_naming_it_and_an_old_record_is_upgraded(tmp_path):
    """The sums' state holds values encoded with the coder Beam inferred in
    the first run; a type hint that changes it is refused at submission,
    not found deep inside a micro-batch. A record written before coders
    were recorded (format 1) is accepted, and recorded in full from then on."""
    checkpoint = tmp_path / "checkpoint"
    assert _run(str(checkpoint)).wait_until_finish() == PipelineState.DONE
    with pytest.raises(CheckpointMismatchError) as typed:
        _run(str(checkpoint), typed=True)
    message = str(typed.value)
    assert (
        "the coder of grouped input was" in message
        and "is now beam:coder:windowed_value:v1[beam:coder:kv:v1[beam:coder:string_utf8:v1" in message
    ), message

    plan_file = checkpoint / "beam" / "plan.json"
    old = json.loads(plan_file.read_text())
    for op in old["operators"]:
        del op["coders"]
    old["format_version"] = 1
    plan_file.write_text(json.dumps(old))
    assert _run(str(checkpoint)).wait_until_finish() == PipelineState.DONE
    upgraded = json.loads(plan_file.read_text())
    assert upgraded["format_version"] == 2 and all(op["coders"] for op in upgraded["operators"])


def test_a_damaged_plan_record_is_named(tmp_path):
    checkpoint = tmp_path / "checkpoint"
    (checkpoint / "beam").mkdir(parents=True)
    (checkpoint / "beam" / "plan.json").write_text('{"format_version": 1, "key_gro')
    with pytest.raises(CheckpointMismatchError) as damaged:
        _run(str(checkpoint))
    assert "plan.json is not a readable plan record" in str(damaged.value)
