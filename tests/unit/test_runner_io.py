"""The I/O contract's registries (translation/runner_io.py for planning,
execution/runner_io_glue.py for Spark): the built-in connectors register
through them, a connector the runner does not ship (tests/toy_connector.py)
is planned and checked like them, and the core names no connector."""

import ast
import pathlib

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_stream import TestStream

from beam_spark_runner.errors import UnsupportedPipelineError
from beam_spark_runner.execution import runner_io_glue
from beam_spark_runner.translation import runner_io
from beam_spark_runner.translation.planner import pipeline_proto_of, plan_streaming_pipeline
from beam_spark_runner.translation.requirements import check_pipeline
from tests import toy_connector

ROOT = pathlib.Path(runner_io.__file__).resolve().parents[1]


def test_the_built_in_connectors_register_each_urn_with_its_role_and_engines():
    from beam_spark_runner.translation import native_io_overrides
    from beam_spark_runner.io.database import planning as database_io
    from beam_spark_runner.io.spark import planning as spark_io

    expected = {
        native_io_overrides.READ_TEXT_URN: (runner_io.IORole.SOURCE, True, False),
        native_io_overrides.WRITE_FILES_URN: (runner_io.IORole.SINK, True, False),
        spark_io.READ_SPARK_URN: (runner_io.IORole.SOURCE, True, True),
        spark_io.WRITE_SPARK_URN: (runner_io.IORole.SINK, True, True),
        database_io.WRITE_DATABASE_URN: (runner_io.IORole.SINK, True, True),
    }
    for urn, described in expected.items():
        io = runner_io.lookup(urn)
        assert (io.role, io.batch, io.streaming) == described, urn
    assert set(expected) - {native_io_overrides.READ_TEXT_URN, native_io_overrides.WRITE_FILES_URN} <= (
        runner_io.urns(streaming=True)
    )
    assert native_io_overrides.READ_TEXT_URN not in runner_io.urns(streaming=True)
    assert runner_io.lookup("beam:transform:pardo:v1") is None


def test_another_transform_under_a_registered_urn_is_refused_naming_it():
    taken = runner_io.lookup(toy_connector.WRITE_LINES_URN)
    assert runner_io.register(taken) is taken  # the same one again: a module imported twice
    with pytest.raises(ValueError, match=toy_connector.WRITE_LINES_URN):
        runner_io.register(runner_io.RunnerIO(toy_connector.WRITE_LINES_URN, runner_io.IORole.SOURCE))


def test_a_urn_without_spark_glue_is_an_error_naming_it():
    with pytest.raises(ValueError, match="example:no-glue:v1 has no batch stage"):
        runner_io_glue.batch_stage("example:no-glue:v1")
    with pytest.raises(ValueError, match="example:no-glue:v1 has no micro-batch staging"):
        runner_io_glue.micro_batch_staging("example:no-glue:v1", None)


def _lines_pipeline(tmp_path, streaming):
    p = beam.Pipeline(options=PipelineOptions(["--streaming"] if streaming else []))
    source = p | TestStream().add_elements([("a", 1)]) if streaming else p | beam.Create([("a", 1)])
    _ = source | beam.Map(lambda kv: [kv[0], kv[1] * 2]) | "Lines" >> toy_connector.WriteLines(str(tmp_path))
    return pipeline_proto_of(p)


def test_a_connector_outside_the_runner_is_planned_as_a_sink_of_the_query(tmp_path):
    plan = plan_streaming_pipeline(_lines_pipeline(tmp_path, streaming=True))
    (sink,) = plan.spark_sinks
    assert sink.urn == toy_connector.WRITE_LINES_URN and sink.display_name == "Lines"
    assert any(sink.dest in op.output_dests() for op in plan.operators)


def test_a_streaming_only_connector_in_a_batch_pipeline_is_refused_at_submission(tmp_path):
    with pytest.raises(UnsupportedPipelineError, match="Lines.*%s is a streaming-only" % toy_connector.WRITE_LINES_URN):
        check_pipeline(_lines_pipeline(tmp_path, streaming=False), streaming=False)


# The modules of the built-in connectors: their URNs appear nowhere else.
_CONNECTOR_MODULES = {
    "translation/native_io_overrides.py",
    "translation/native_io_protos.py",
    "io/spark/planning.py",
    "io/database/planning.py",
    "execution/batch_native_io.py",
    "io/spark/batch_glue.py",
    "io/spark/schema_glue.py",
    "io/database/spark_glue.py",
    "io/spark/streaming_glue.py",
}
_URN_NAMES = {
    "READ_TEXT_URN",
    "WRITE_FILES_URN",
    "NATIVE_IO_URNS",
    "READ_SPARK_URN",
    "WRITE_SPARK_URN",
    "SPARK_IO_URNS",
    "WRITE_DATABASE_URN",
    "DATABASE_IO_URNS",
}
# The sinks' commits: told apart by the contract (worker/sink_commits.py), never by class.
_COMMIT_CLASSES = {"Publication", "DatabasePublication", "StagedEpochPublication"}


def _names(node):
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)
    }


def test_the_core_names_no_connector_urn_and_dispatches_on_no_commit_class():
    """No module outside a connector names its URNs; the modules that run
    sinks' commits (through `sink_commits.run_commits`) name no commit
    class, and nothing tells commits apart by class."""
    urn_uses, class_checks, runners = [], [], []
    for path in sorted(ROOT.rglob("*.py")):
        relative = str(path.relative_to(ROOT))
        tree = ast.parse(path.read_text())
        if relative not in _CONNECTOR_MODULES and _names(tree) & _URN_NAMES:
            urn_uses.append((relative, sorted(_names(tree) & _URN_NAMES)))
        if "run_commits" in _names(tree) and _names(tree) & _COMMIT_CLASSES:
            runners.append((relative, sorted(_names(tree) & _COMMIT_CLASSES)))
        for call in ast.walk(tree):
            if isinstance(call, ast.Call) and getattr(call.func, "id", None) in ("isinstance", "issubclass"):
                if len(call.args) == 2 and _names(call.args[1]) & _COMMIT_CLASSES:
                    class_checks.append((relative, call.lineno))
    assert urn_uses == [] and class_checks == [] and runners == []
