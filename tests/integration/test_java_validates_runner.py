"""Beam Java's ValidatesRunner suite, the slice CI runs in batch
(tools/validates_runner_slice.txt: every category the runner runs, at least
once), through Beam Java's PortableRunner against this runner's job
service (tests/integration/validates_runner_slices.py). The streaming
slice: test_java_validates_runner_streaming.py. The whole suite:
`python tools/java_validates_runner.py` (docs/conformance.md)."""

import pytest

from tests.integration.validates_runner_slices import run_slice, suite, vr  # noqa: F401  (suite: a fixture)

pytestmark = pytest.mark.timeout(1200)


def test_the_slice_covers_every_category_the_batch_suite_runs_and_no_excluded_test(suite):  # noqa: F811
    _, tests = suite
    exclusions = vr.load_exclusions("batch")
    chosen = set(vr.load_slice(vr.SLICE))
    assert chosen <= {t.id for t in tests}, "the slice names tests the jar does not hold"
    to_run, excluded = vr.plan(tests, exclusions, chosen, None)
    assert not excluded, "the slice holds excluded tests: %s" % [(t.id, r) for t, r in excluded]
    runnable, _ = vr.plan(tests, exclusions, None, None)
    runnable_ids = {"%s#%s" % (c, m) for c, methods in runnable.items() for m in methods}
    by_id = {t.id: t for t in tests}
    suite_categories = {c for i in runnable_ids for c in by_id[i].categories}
    slice_categories = {c for i in chosen for c in by_id[i].categories}
    assert suite_categories - slice_categories == set()


def test_the_batch_slice_of_beams_java_validates_runner_tests_passes(suite, job_endpoint, tmp_path):  # noqa: F811
    run_slice(suite, job_endpoint, tmp_path, "batch")
