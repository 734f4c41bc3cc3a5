"""The dependency rules of docs/architecture.md, checked on the code.

* Layers, bottom up: each module imports only from its own layer and the
  layers below (`LAYERS`); nothing imports back up.
* Spark's APIs (pyspark, py4j) only in execution/ and session.py; gRPC
  nowhere in the engine-agnostic core.
* The modules Spark loads in its helper processes (the streaming source's
  planning process, the stateful operators' set-up) import no Beam and,
  but for the Spark glue among them, no pyspark: checked by importing them
  in a fresh interpreter.
"""

import ast
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

# Bottom to top. A module may import its own group and the groups below.
LAYERS = [
    ("core", ["windowing", "triggers"]),
    (
        "leaves",
        [
            "beam_spark_runner.errors",
            "beam_spark_runner.metrics_merge",
            "beam_spark_runner.batch_progress",
            "beam_spark_runner.progress_bar",
            "beam_spark_runner.maven_jars",
            "beam_spark_runner.versions",
            "beam_spark_runner.builtin_modules",
        ],
    ),
    ("worker", ["beam_spark_runner.worker"]),
    # The PipelineResult: Beam's metrics query over MonitoringInfos (worker/beam_internals.py).
    ("result", ["beam_spark_runner.result"]),
    # External systems' clients and exactly-once protocols, no Spark: in
    # each connector's package under io/ (the shared ones in connectors/).
    (
        "connectors",
        [
            "beam_spark_runner.connectors",
            "beam_spark_runner.io.database.sink_protocol",
            "beam_spark_runner.io.database.reads",
            "beam_spark_runner.io.database.sql_dialects",
            "beam_spark_runner.io.database.postgresql_copy",
            "beam_spark_runner.io.nats.client",
            "beam_spark_runner.io.redis_streams.client",
            "beam_spark_runner.io.kafka.config",
            "beam_spark_runner.io.kafka.transactions",
        ],
    ),
    ("plans", ["beam_spark_runner.plans"]),
    ("streaming semantics", ["beam_spark_runner.streaming"]),
    # Planning, and each connector's own (registered in translation/runner_io.py).
    (
        "planning",
        [
            "beam_spark_runner.translation",
            "beam_spark_runner.io.spark.planning",
            "beam_spark_runner.io.database.planning",
            "beam_spark_runner.io.kafka.planning",
        ],
    ),
    ("options", ["beam_spark_runner.options"]),
    # Beam's Java jars and expansion services for cross-language transforms.
    ("cross-language", ["beam_spark_runner.cross_language"]),
    # Spark glue, and each connector's own (registered in execution/runner_io_glue.py).
    (
        "spark glue",
        [
            "beam_spark_runner.session",
            "beam_spark_runner.execution",
            "beam_spark_runner.io.spark.schema_glue",
            "beam_spark_runner.io.spark.batch_glue",
            "beam_spark_runner.io.spark.streaming_glue",
            "beam_spark_runner.io.database.spark_glue",
            "beam_spark_runner.io.kafka.spark_glue",
        ],
    ),
    # The user's I/O transforms: they check their arguments (never with Spark).
    ("io", ["beam_spark_runner.io"]),
    ("entry points", ["beam_spark_runner.runner", "beam_spark_runner.cli", "beam_spark_runner"]),
    # The Job API over gRPC: a client of the runner, never imported by it.
    ("job service", ["beam_spark_runner.job_service", "beam_spark_runner.job_server"]),
]
# Third-party modules a group may not import at all.
FORBIDDEN = {
    "core": {"pyspark", "py4j", "grpc"},
    "leaves": {"pyspark", "py4j", "grpc"},
    "worker": {"pyspark", "py4j"},
    "result": {"pyspark", "py4j", "grpc"},
    "connectors": {"pyspark", "py4j"},
    "plans": {"pyspark", "py4j"},
    "streaming semantics": {"pyspark", "py4j"},
    "planning": {"pyspark", "py4j"},
    "options": {"pyspark", "py4j"},
    "cross-language": {"pyspark", "py4j"},
    "io": {"pyspark", "py4j"},
}
# Loaded by Spark in helper processes: no Beam there (and no Spark API but
# in the Spark glue among them).
HELPER_PROCESS_MODULES = {
    "beam_spark_runner.streaming.source_planner": False,
    "beam_spark_runner.streaming.source_watermarks": False,
    "beam_spark_runner.streaming.rows": False,
    "beam_spark_runner.streaming.watermarks": False,
    "beam_spark_runner.streaming.watermark_lanes": False,
    "beam_spark_runner.streaming.timestamp_summary": False,
    "beam_spark_runner.streaming.key_groups": False,
    "beam_spark_runner.streaming.operator_cache": False,
    "beam_spark_runner.execution.streaming_udfs": True,  # may import pyspark
}


def _module_name(path):
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _group_of(module):
    """(index, name) of the layer group a module belongs to (most specific prefix)."""
    best = None
    for index, (name, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[2]:
                    best = (index, name, len(prefix))
    return None if best is None else best[:2]


def imported_modules(path):
    """(module, line) of every import in a file, absolute names."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                # `from package import module` imports the module (the
                # package's own __init__ is lazy), else a name of the module.
                sub = "%s.%s" % (node.module, alias.name)
                yield (sub if _is_our_module(sub) else node.module), node.lineno


def _is_our_module(name):
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _source_files():
    files = []
    for package in ("windowing", "triggers", "beam_spark_runner"):
        files.extend(sorted((ROOT / package).rglob("*.py")))
    return files


def test_every_module_is_in_a_layer():
    unplaced = [str(f.relative_to(ROOT)) for f in _source_files() if _group_of(_module_name(f)) is None]
    assert not unplaced


def test_no_import_runs_up_the_layers():
    violations = []
    for f in _source_files():
        own_index, own_name = _group_of(_module_name(f))
        for module, line in imported_modules(f):
            target = _group_of(module)
            if target is not None and target[0] > own_index:
                violations.append(
                    "%s:%d (%s) imports %s (%s)" % (f.relative_to(ROOT), line, own_name, module, target[1])
                )
    assert not violations, "\n".join(violations)


@pytest.mark.parametrize("group", sorted(FORBIDDEN))
def test_groups_do_not_import_forbidden_libraries(group):
    violations = []
    for f in _source_files():
        if _group_of(_module_name(f))[1] != group:
            continue
        for module, line in imported_modules(f):
            if module.split(".")[0] in FORBIDDEN[group]:
                violations.append("%s:%d imports %s" % (f.relative_to(ROOT), line, module))
    assert not violations, "\n".join(violations)


def test_modules_spark_loads_in_helper_processes_import_no_beam():
    code = (
        "import importlib, json, sys\n"
        "out = {}\n"
        "for m in %r:\n"
        "    before = set(sys.modules)\n"
        "    importlib.import_module(m)\n"
        "out = sorted({k.split('.')[0] for k in sys.modules if k.split('.')[0] in ('apache_beam', 'pyspark')})\n"
        "print(json.dumps(out))\n"
    )
    for module, may_use_spark in HELPER_PROCESS_MODULES.items():
        result = subprocess.run(
            [sys.executable, "-c", code % ([module],)], cwd=ROOT, capture_output=True, text=True, check=True
        )
        loaded = set(eval(result.stdout.strip().splitlines()[-1]))
        allowed = {"pyspark"} if may_use_spark else set()
        assert loaded <= allowed, "%s loads %s" % (module, sorted(loaded - allowed))


def test_checker_sees_imports_of_every_form(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import grpc\nfrom pyspark.sql import SparkSession\nfrom beam_spark_runner import runner\n")
    found = {m for m, _ in imported_modules(bad)}
    assert found == {"grpc", "pyspark.sql", "beam_spark_runner.runner"}
