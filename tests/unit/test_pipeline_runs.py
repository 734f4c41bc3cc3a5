"""tests/pipeline_runs.py: how a Beam test's outcome is counted."""

import apache_beam as beam

from tests import pipeline_runs
from tests.pipeline_runs import classify, summary


def test_a_pass_counts_for_spark_only_if_every_pipeline_ran_there():
    assert classify("passed", ["SparkRunner"]) == "spark"
    assert classify("passed", ["SparkRunner", "SparkRunner"]) == "spark"
    assert classify("passed", []) == "no pipeline"
    assert classify("passed", ["SwitchingDirectRunner"]) == "other runner"
    assert classify("passed", ["SparkRunner", "FnApiRunner"]) == "other runner"
    assert classify("failed", ["SparkRunner"]) == "failed"
    assert classify("skipped", []) == "skipped"


def test_summary_counts_beam_tests_only():
    records = {
        "a": {"beam": True, "outcome": "passed", "runners": ["SparkRunner"]},
        "b": {"beam": True, "outcome": "passed", "runners": []},
        "c": {"beam": True, "outcome": "passed", "runners": ["SwitchingDirectRunner"]},
        "d": {"beam": True, "outcome": "skipped", "runners": []},
        "e": {"beam": False, "outcome": "passed", "runners": ["SparkRunner"]},
    }
    assert summary(records) == {"spark": 1, "no pipeline": 1, "other runner": 1, "failed": 0, "skipped": 1}


def test_pipeline_run_is_recorded_with_its_runner(monkeypatch):
    # The plugin is active in this session (pytest.ini): Pipeline.run records.
    from apache_beam.runners.direct.direct_runner import DirectRunner
    from beam_spark_runner import SparkRunner

    assert getattr(beam.Pipeline.run, "_records_runner", False)
    seen = []
    monkeypatch.setattr(pipeline_runs, "_current", seen)
    with beam.Pipeline(runner=DirectRunner()) as p:
        p | beam.Create([1])
    assert seen == ["SwitchingDirectRunner"]  # what DirectRunner() builds
    assert pipeline_runs.runner_label(SparkRunner()) == "SparkRunner"

    class MySpark(SparkRunner):
        pass

    assert pipeline_runs.runner_label(MySpark()) == "SparkRunner"


def test_records_come_from_the_reports_alone_as_pytest_xdist_forwards_them():
    from types import SimpleNamespace

    def report(nodeid, when, properties, outcome="passed"):
        return SimpleNamespace(
            nodeid=nodeid,
            when=when,
            user_properties=properties,
            failed=outcome == "failed",
            skipped=outcome == "skipped",
        )

    beam_test = [(pipeline_runs.BEAM_TEST, "1")]
    ran = beam_test + [(pipeline_runs.PROPERTY, "SparkRunner")]
    records = {}
    for r in [
        report("a", "setup", beam_test),
        report("a", "call", ran),
        report("a", "teardown", ran),
        report("b", "setup", beam_test, "skipped"),
        report("c", "setup", [(pipeline_runs.BEAM_TEST, "0")]),
        report("c", "call", [(pipeline_runs.BEAM_TEST, "0"), (pipeline_runs.PROPERTY, "SparkRunner")]),
        report("d", "setup", beam_test),
        report("d", "call", beam_test + [(pipeline_runs.PROPERTY, "")], "failed"),
    ]:
        pipeline_runs.record_report(records, r)
    assert summary(records) == {"spark": 1, "no pipeline": 0, "other runner": 0, "failed": 1, "skipped": 1}
