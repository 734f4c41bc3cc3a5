"""Every private Beam and PySpark API the runner uses is still where the
runner reaches it (worker/beam_internals.PRIVATE_APIS,
execution/spark_internals.PRIVATE_APIS): after an upgrade of apache-beam or
pyspark, this test names each one that moved, and where the runner uses it."""

import pytest

from beam_spark_runner.execution import spark_internals
from beam_spark_runner.worker import beam_internals


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


def test_the_private_pyspark_apis_the_runner_uses_are_there():
    _check("pyspark", spark_internals.PRIVATE_APIS)


def test_a_moved_api_is_named_with_its_user():
    with pytest.raises(AssertionError, match="apache-beam Gone.attr, used by the test"):
        _check("apache-beam", [("Gone.attr", "the test", lambda: False)])
