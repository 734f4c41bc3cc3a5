"""Beam Java's ValidatesRunner suite, the slice CI runs
(tools/validates_runner_slice.txt: every category the runner runs, at least
once) in batch, and a smaller one in streaming
(tools/validates_runner_slice_streaming.txt), through Beam Java's
PortableRunner against this runner's job service. Each test's pipeline runs here: a pass needs the job DONE and
every PAssert's success in the job's metrics (java/validates_runner). The
whole suite: `python tools/java_validates_runner.py` (docs/conformance.md)."""

import importlib.util
import os

import pytest


pytestmark = pytest.mark.timeout(1200)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_SPEC = importlib.util.spec_from_file_location(
    "java_validates_runner", os.path.join(REPO, "tools", "java_validates_runner.py")
)
vr = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(vr)
SLICES = {"batch": vr.SLICE, "streaming": os.path.join(REPO, "tools", "validates_runner_slice_streaming.txt")}


@pytest.fixture(scope="module")
def suite():
    jars = vr.resolve(vr.jar_set())
    classpath = os.pathsep.join([vr.compiled_classes(jars)] + list(jars))
    return classpath, vr.list_tests(classpath, vr.tests_jar(jars))


def test_the_slice_covers_every_category_the_batch_suite_runs_and_no_excluded_test(suite):
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


@pytest.mark.parametrize("mode", ["batch", "streaming"])
def test_the_slice_of_beams_java_validates_runner_tests_passes(suite, job_endpoint, tmp_path, mode):
    classpath, tests = suite
    to_run, excluded = vr.plan(tests, vr.load_exclusions(mode), set(vr.load_slice(SLICES[mode])), None)
    assert not excluded, "the %s slice holds excluded tests: %s" % (mode, [(t.id, r) for t, r in excluded])
    expansion = None
    if any(vr.EXPANSION_SERVICE in t.categories for t in tests if t.method in to_run.get(t.class_name, ())):
        expansion = vr.PythonExpansionService(str(tmp_path / "expansion-service.log"))
    try:
        # One JVM for the whole slice: a JVM per class costs seconds each.
        results = vr.run_tests(
            classpath,
            to_run,
            job_endpoint,
            mode,
            900,
            str(tmp_path),
            "slice-" + mode,
            expansion.port if expansion is not None else None,
        )
    finally:
        if expansion is not None:
            expansion.stop()
    assert len(results) == sum(len(m) for m in to_run.values())
    failed = [
        "%s#%s: %s\n%s" % (r["class"], r["method"], r["outcome"], (r.get("message") or "")[:1500])
        for r in results
        if r["outcome"] != "passed"
    ]
    assert not failed, "\n\n".join(failed)
