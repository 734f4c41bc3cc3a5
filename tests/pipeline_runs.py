"""pytest plugin: which runner every pipeline a test ran used, so that Beam's
own tests are counted honestly.

A Beam test (one defined in an `apache_beam` module) counts as *passed on
SparkRunner* only if it ran at least one pipeline and every pipeline it ran
ran on SparkRunner. A passing Beam test that ran no pipeline (a unit test of
Beam's own code) or ran one on another runner (`beam.Pipeline()` is
DirectRunner; some tests pin FnApiRunner) is reported apart, never as a
Spark pass.

Every test's call-phase report carries a `pipeline_runners` user property
(comma-separated runner classes, "SparkRunner" for SparkRunner and its
subclasses; JUnit XML writes it as a testcase property), and the terminal
summary ends with the counts. With BEAM_SPARK_PIPELINE_RUNS=path the
per-test records are also written there as JSON.
"""

import json
import os

import pytest

SPARK = "SparkRunner"
# A pipeline Beam's PortableRunner submitted, and a run of one by this
# runner's job service (in this process): a PortableRunner pipeline counts
# as a Spark run only when the job service ran it.
PORTABLE = "PortableRunner"
SERVED = "SparkRunner via job service"
PROPERTY = "pipeline_runners"
BEAM_TEST = "beam_test"

_current = None  # runners of the pipelines the running test ran so far
_records = {}  # nodeid -> {"beam": bool, "outcome": ..., "runners": [...]}


def runner_label(runner):
    """ "SparkRunner" for SparkRunner and its subclasses, else the class name."""
    from beam_spark_runner import SparkRunner

    return SPARK if isinstance(runner, SparkRunner) else type(runner).__name__


def classify(outcome, runners):
    """One of: "spark" (passed, every pipeline on SparkRunner, at least one),
    "no pipeline", "other runner" (passed), "failed", "skipped"."""
    if outcome != "passed":
        return outcome
    if not runners:
        return "no pipeline"
    submitted, served = runners.count(PORTABLE), runners.count(SERVED)
    on_spark = all(r in (SPARK, PORTABLE, SERVED) for r in runners) and submitted <= served
    return "spark" if on_spark else "other runner"


def _is_beam_test(item):
    function = getattr(item, "function", None)
    return bool(function is not None and getattr(function, "__module__", "").startswith("apache_beam."))


def pytest_configure(config):
    from apache_beam import pipeline

    if getattr(pipeline.Pipeline.run, "_records_runner", False):
        return
    original = pipeline.Pipeline.run

    def run(self, *args, **kwargs):
        if _current is not None:
            _current.append(runner_label(self.runner))
        return original(self, *args, **kwargs)

    run._records_runner = True
    pipeline.Pipeline.run = run

    from beam_spark_runner.job_service.servicer import JobServiceRunner

    served = JobServiceRunner.run_portable_pipeline

    def run_served(self, *args, **kwargs):
        if _current is not None:
            _current.append(SERVED)
        return served(self, *args, **kwargs)

    JobServiceRunner.run_portable_pipeline = run_served


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    global _current
    _current = []
    try:
        yield
    finally:
        _current = None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    # Carried on the reports, which pytest-xdist hands from its worker
    # processes to the one that prints the summary (pytest_runtest_logreport).
    if call.when == "setup":
        item.user_properties.append((BEAM_TEST, "1" if _is_beam_test(item) else "0"))
    if call.when == "call":
        item.user_properties.append((PROPERTY, ",".join(_current or ())))
    yield


def pytest_runtest_logreport(report):
    record_report(_records, report)


def record_report(records, report):
    """Adds one phase's report to `records` (nodeid -> record)."""
    properties = dict(report.user_properties)
    record = records.setdefault(report.nodeid, {"beam": False, "outcome": "passed", "runners": []})
    if BEAM_TEST in properties:
        record["beam"] = properties[BEAM_TEST] == "1"
    if report.when == "call":
        record["runners"] = [r for r in properties.get(PROPERTY, "").split(",") if r]
    if report.failed:
        record["outcome"] = "failed"
    elif report.skipped and record["outcome"] == "passed":
        record["outcome"] = "skipped"


def summary(records):
    counts = {k: 0 for k in ("spark", "no pipeline", "other runner", "failed", "skipped")}
    for record in records.values():
        if record["beam"]:
            counts[classify(record["outcome"], record["runners"])] += 1
    return counts


def pytest_terminal_summary(terminalreporter):
    if hasattr(terminalreporter.config, "workerinput"):
        return  # a pytest-xdist worker: the controller counts
    counts = summary(_records)
    if sum(counts.values()):
        terminalreporter.write_line(
            "Beam's tests: %(spark)d passed on SparkRunner, %(no pipeline)d passed without running a "
            "pipeline, %(other runner)d passed on another runner, %(failed)d failed, %(skipped)d skipped" % counts
        )
    path = os.environ.get("BEAM_SPARK_PIPELINE_RUNS")
    if path:
        with open(path, "w") as f:
            json.dump({"counts": counts, "tests": _records}, f, indent=1, sort_keys=True)
