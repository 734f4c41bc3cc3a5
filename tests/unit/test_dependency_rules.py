"""The package dependency rules of docs/architecture.md, checked on imports.

- windowing/ and triggers/ never import pyspark or grpc;
- translation/ and worker/ (planning and executor-side code) never import
  pyspark: only execution/, session.py and streaming/spark_*.py talk to Spark.
"""
import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

RULES = [
    ("windowing", {"pyspark", "grpc", "beam_spark_runner"}),
    ("triggers", {"pyspark", "grpc", "beam_spark_runner"}),
    ("beam_spark_runner/translation", {"pyspark"}),
    ("beam_spark_runner/worker", {"pyspark"}),
    # Streaming: only its spark_*.py modules may talk to Spark.
    ("beam_spark_runner/streaming", {"pyspark"}),
]


def imported_top_level_modules(path):
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name.split(".")[0], node.lineno
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module.split(".")[0], node.lineno


@pytest.mark.parametrize("package,forbidden", RULES, ids=[r[0] for r in RULES])
def test_package_does_not_import(package, forbidden):
    files = sorted(f for f in (ROOT / package).rglob("*.py") if not f.name.startswith("spark_"))
    assert files, "no Python files under %s" % package
    violations = [
        "%s:%d imports %s" % (f.relative_to(ROOT), line, mod)
        for f in files for mod, line in imported_top_level_modules(f) if mod in forbidden]
    assert not violations, "\n".join(violations)


def test_checker_sees_forbidden_imports(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import grpc\nfrom pyspark.sql import SparkSession\n")
    assert {m for m, _ in imported_top_level_modules(bad)} == {"grpc", "pyspark"}
