"""A grouping under Beam Java's `AfterProcessingTime.pastFirstElementInPane()`
(an AfterProcessingTime with no timestamp transforms, which this Python
SDK's own trigger reader fails on) runs on SparkRunner as a delay of zero:
its panes are those of Python's `AfterProcessingTime(0)`."""

import glob

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import trigger, window

from beam_spark_runner import SparkRunner
from beam_spark_runner.translation.planner import pipeline_proto_of


def _panes(tmp_path, name, monkeypatch, java_form):
    from beam_spark_runner import runner

    cleared = []

    def as_java_writes_it(pipeline):
        proto = pipeline_proto_of(pipeline)
        for strategy in proto.components.windowing_strategies.values():
            if strategy.trigger.WhichOneof("trigger") == "repeat":
                del strategy.trigger.repeat.subtrigger.after_processing_time.timestamp_transforms[:]
                cleared.append(strategy)
        return proto

    if java_form:
        monkeypatch.setattr(runner, "pipeline_proto_of", as_java_writes_it)
    p = beam.Pipeline(runner=SparkRunner(), options=PipelineOptions([]))
    _ = (
        p
        | beam.Create([("k", 1), ("k", 2), ("j", 3)])
        | beam.WindowInto(
            window.FixedWindows(10),
            trigger=trigger.Repeatedly(trigger.AfterProcessingTime(0)),
            accumulation_mode=trigger.AccumulationMode.DISCARDING,
        )
        | "Group" >> beam.GroupByKey()
        | beam.MapTuple(lambda k, vs: repr((k, sorted(vs))))
        | beam.io.WriteToText(str(tmp_path / name / "panes"))
    )
    assert p.run().wait_until_finish() == "DONE"
    monkeypatch.undo()
    assert bool(cleared) == java_form
    lines = []
    for path in glob.glob(str(tmp_path / name / "panes*")):
        with open(path) as f:
            lines.extend(f.read().splitlines())
    return sorted(lines)


def test_a_java_past_first_element_in_pane_trigger_runs_as_a_delay_of_zero(tmp_path, monkeypatch):
    python = _panes(tmp_path, "python", monkeypatch, java_form=False)
    assert {"('k', [1, 2])", "('j', [3])"} <= set(python)
    assert _panes(tmp_path, "java", monkeypatch, java_form=True) == python
