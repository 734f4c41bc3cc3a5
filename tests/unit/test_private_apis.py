"""Every private Beam and PySpark API the runner uses is still where the
runner reaches it (worker/beam_internals.PRIVATE_APIS,
translation/beam_translations.PRIVATE_APIS,
execution/spark_internals.PRIVATE_APIS): after an upgrade of apache-beam or
pyspark, this test names each one that moved, and where the runner uses it.
And no other module reaches Beam's private modules itself."""

import ast
import pathlib

import pytest

from beam_spark_runner.execution import spark_internals
from beam_spark_runner.translation import beam_translations
from beam_spark_runner.worker import beam_internals

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHIMS = {"beam_spark_runner/worker/beam_internals.py", "beam_spark_runner/translation/beam_translations.py"}
# Beam's modules that are not its public API.
BEAM_PRIVATE_PREFIXES = (
    "apache_beam.internal",
    "apache_beam.runners.portability.fn_api_runner",
    "apache_beam.runners.worker",
)


def _check(library, entries):
    missing = []
    for what, used_by, check in entries:
        try:
            present = check()
        except Exception as e:  # noqa: BLE001 -- a moved API fails in many ways
            present, what = False, "%s (%s: %s)" % (what, type(e).__name__, e)
        if not present:
            missing.append("%s %s, used by %s" % (library, what, used_by))
    assert not missing, "private APIs that moved:\n  " + "\n  ".join(missing)


def test_the_private_beam_apis_the_runner_uses_are_there():
    _check("apache-beam", beam_internals.PRIVATE_APIS)


def test_the_private_beam_planning_apis_the_runner_uses_are_there():
    _check("apache-beam", beam_translations.PRIVATE_APIS)


def test_beams_private_modules_are_imported_by_the_shims_alone():
    offenders = []
    for path in sorted((ROOT / "beam_spark_runner").rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        if rel in SHIMS:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + ["%s.%s" % (node.module, a.name) for a in node.names]
            if any(n == p or n.startswith(p + ".") for n in names for p in BEAM_PRIVATE_PREFIXES):
                offenders.append("%s:%d" % (rel, node.lineno))
    assert not offenders, "Beam private modules imported outside the shims: " + ", ".join(offenders)


def test_every_planning_use_of_beams_phases_is_listed():
    used = set()
    for path in (ROOT / "beam_spark_runner").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "translations":
                used.add(node.attr)
    assert used and used <= set(beam_translations.USED_NAMES), sorted(used - set(beam_translations.USED_NAMES))


def test_the_private_pyspark_apis_the_runner_uses_are_there():
    _check("pyspark", spark_internals.PRIVATE_APIS)


def test_a_moved_api_is_named_with_its_user():
    with pytest.raises(AssertionError, match="apache-beam Gone.attr, used by the test"):
        _check("apache-beam", [("Gone.attr", "the test", lambda: False)])
