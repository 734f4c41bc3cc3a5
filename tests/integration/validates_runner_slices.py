"""What the two ValidatesRunner slice tests share
(test_java_validates_runner.py in batch, test_java_validates_runner_streaming.py
in streaming): Beam Java's test jars and the tool that runs them
(tools/java_validates_runner.py), and one slice's run through Beam Java's
PortableRunner against this runner's job service. Each test's pipeline
runs here: a pass needs the job DONE and every PAssert's success in the
job's metrics (java/validates_runner)."""

import importlib.util
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_SPEC = importlib.util.spec_from_file_location(
    "java_validates_runner", os.path.join(REPO, "tools", "java_validates_runner.py")
)
vr = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(vr)
SLICES = {"batch": vr.SLICE, "streaming": os.path.join(REPO, "tools", "validates_runner_slice_streaming.txt")}


@pytest.fixture(scope="module")
def suite():
    """(classpath, every ValidatesRunner test of Beam Java's test jar)."""
    jars = vr.resolve(vr.jar_set())
    classpath = os.pathsep.join([vr.compiled_classes(jars)] + list(jars))
    return classpath, vr.list_tests(classpath, vr.tests_jar(jars))


def run_slice(suite, job_endpoint, tmp_path, mode):
    """Runs the mode's slice in one JVM; asserts every test of it passed."""
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
