"""tools/java_validates_runner.py's choices, apart from any JVM: which
tests a mode runs or excludes (and why), the exclusions file's rules, and
the outcome of a test class whose JVM ended before its tests did."""

import importlib.util
import json
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_SPEC = importlib.util.spec_from_file_location(
    "java_validates_runner", os.path.join(REPO, "tools", "java_validates_runner.py")
)
vr = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(vr)

VR = vr.VALIDATES_RUNNER
STATE = "org.apache.beam.sdk.testing.UsesStatefulParDo"
TEST_STREAM = "org.apache.beam.sdk.testing.UsesTestStream"


def _case(cls, method, *categories):
    return vr.TestCase(cls, method, (VR,) + categories)


def _write(tmp_path, text):
    path = tmp_path / "exclusions.yaml"
    path.write_text(text)
    return str(path)


def test_a_modes_exclusions_are_the_shared_ones_and_its_own_with_the_modes_reason_winning(tmp_path):
    path = _write(
        tmp_path,
        """
all:
  categories:
    org.apache.beam.sdk.testing.UsesTestStream: shared reason
  tests:
    a.B#c: shared test reason
streaming:
  categories:
    org.apache.beam.sdk.testing.UsesTestStream: streaming reason
""",
    )
    batch, streaming = vr.load_exclusions("batch", path), vr.load_exclusions("streaming", path)
    stream_test = _case("x.Y", "z", TEST_STREAM)
    assert batch.reason(stream_test) == "UsesTestStream: shared reason"
    assert streaming.reason(stream_test) == "UsesTestStream: streaming reason"
    assert batch.reason(_case("a.B", "c")) == "shared test reason"
    assert batch.reason(_case("a.B", "d", STATE)) is None


@pytest.mark.parametrize(
    "text, problem",
    [
        ("all:\n  categories:\n    org.Foo: ''\n", "org.Foo has no reason"),
        ("all:\n  tests:\n    a.B#c:\n", "a.B#c has no reason"),
        ("bach:\n  categories: {}\n", "unknown sections ['bach']"),
    ],
)
def test_an_exclusion_without_a_reason_or_an_unknown_section_is_refused_naming_it(tmp_path, text, problem):
    with pytest.raises(SystemExit, match=problem.replace("[", r"\[").replace("]", r"\]")):
        vr.load_exclusions("batch", _write(tmp_path, text))


def test_plan_runs_what_is_not_excluded_grouped_by_class_within_the_slice_and_the_class_pattern():
    tests = [
        _case("p.ParDoTest$StateTests", "a", STATE),
        _case("p.ParDoTest$StateTests", "b", STATE, TEST_STREAM),
        _case("p.CreateTest", "c"),
        _case("p.FlattenTest", "d"),
    ]
    exclusions = vr.Exclusions({TEST_STREAM: "no test stream"}, {"p.FlattenTest#d": "a known difference"})
    to_run, excluded = vr.plan(tests, exclusions, chosen=None, classes=None)
    assert dict(to_run) == {"p.ParDoTest$StateTests": ["a"], "p.CreateTest": ["c"]}
    assert [(t.id, r) for t, r in excluded] == [
        ("p.ParDoTest$StateTests#b", "UsesTestStream: no test stream"),
        ("p.FlattenTest#d", "a known difference"),
    ]
    to_run, _ = vr.plan(tests, exclusions, chosen={"p.CreateTest#c", "p.ParDoTest$StateTests#b"}, classes=None)
    assert dict(to_run) == {"p.CreateTest": ["c"]}
    to_run, _ = vr.plan(tests, exclusions, chosen=None, classes=r"ParDoTest")
    assert dict(to_run) == {"p.ParDoTest$StateTests": ["a"]}


def test_the_committed_exclusions_file_loads_for_every_mode_and_every_entry_has_a_reason():
    for mode in vr.MODES:
        exclusions = vr.load_exclusions(mode)
        assert all(r.strip() for r in list(exclusions.categories.values()) + list(exclusions.tests.values()))


def test_a_jvm_that_dies_mid_class_reports_its_unfinished_tests_as_crashed_and_keeps_the_finished(tmp_path):
    # A pass that submitted no pipeline is reported as such, not as a pass.
    """The JVM is replaced by a process that writes a results file cut
    short and exits 1: the finished test keeps its outcome, the started one
    and the one never reached are crashed, naming the log."""
    stem = tmp_path / "batch.slice"
    (tmp_path / "batch.slice.jsonl").write_text('{"class": "p.T", "method": "c", "outcome": "passed"}\n')
    rows = [
        {"class": "p.T", "method": "a", "outcome": "started"},
        {"class": "p.T", "method": "a", "outcome": "passed", "message": None, "pipelines": 1},
        {"class": "p.T", "method": "d", "outcome": "started"},
        {"class": "p.T", "method": "d", "outcome": "passed", "message": None, "pipelines": 0},
        {"class": "p.T", "method": "b", "outcome": "started"},
    ]
    (tmp_path / "left").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"class": "p.T", "meth')
    real = vr.subprocess.Popen

    def popen(command, **kwargs):
        # an earlier run's file (method c passed) is gone before the JVM starts
        return real(["sh", "-c", 'cat "$0" > "$1"; exit 1', str(tmp_path / "left"), str(stem) + ".jsonl"], **kwargs)

    vr.subprocess.Popen, saved = popen, vr.subprocess.Popen
    try:
        out = vr.run_tests("cp", {"p.T": ["a", "d", "b", "c"]}, "localhost:1", "batch", 60, str(tmp_path), "slice")
    finally:
        vr.subprocess.Popen = saved
    assert [(r["method"], r["outcome"]) for r in out] == [
        ("a", "passed"),
        ("d", vr.NO_PIPELINE),
        ("b", "crashed"),
        ("c", "crashed"),
    ]
    assert "exit code 1" in out[2]["message"] and str(stem) + ".log" in out[2]["message"]


def test_two_processes_compiling_the_java_sources_at_once_both_get_the_classes(tmp_path, monkeypatch):
    """The README's test command runs the batch and the streaming slice in
    two processes, which on a fresh machine both compile
    java/validates_runner into the cache at once: the one that finishes
    second uses the first one's classes instead of failing."""
    import subprocess

    monkeypatch.setattr(vr, "cache_root", lambda: str(tmp_path))
    first_started = []
    other = []

    def javac(command, **kwargs):
        work = command[command.index("-d") + 1]
        open(os.path.join(work, "Compiled.class"), "w").close()
        if not first_started:
            first_started.append(True)
            other.append(vr.compiled_classes([]))  # the other process, done first
        return subprocess.CompletedProcess(command, 0, b"")

    monkeypatch.setattr(vr.subprocess, "run", javac)
    out = vr.compiled_classes([])
    assert out == other[0] and os.listdir(out) == ["Compiled.class"]
    assert [n for n in os.listdir(tmp_path) if n.startswith("validates-runner-classes.")] == []


def test_the_compiled_classes_do_not_depend_on_where_the_checkout_is(tmp_path, monkeypatch):
    import shutil

    monkeypatch.setattr(vr, "cache_root", lambda: str(tmp_path))
    here = vr.classes_dir()
    elsewhere = str(tmp_path / "checkout" / "validates_runner")
    shutil.copytree(vr.JAVA_SOURCES, elsewhere)
    monkeypatch.setattr(vr, "JAVA_SOURCES", elsewhere)
    assert vr.classes_dir() == here
    with open(os.path.join(elsewhere, "beamsparkrunner", "vr", "SparkJobServiceRunner.java"), "a") as f:
        f.write("// changed\n")
    assert vr.classes_dir() != here


FLINK_EXCLUDED = "org.apache.beam.sdk.testing.UsesMapState"  # in Flink's shared exclusions
UNBOUNDED = "org.apache.beam.sdk.testing.UsesUnboundedPCollections"  # Flink excludes it in batch only


def test_flinks_selection_is_its_shared_exclusions_and_the_modes_own():
    batch, streaming = vr.load_flink_selection("batch"), vr.load_flink_selection("streaming")
    plain, map_state, unbounded = _case("A", "plain"), _case("A", "map", FLINK_EXCLUDED), _case("A", "u", UNBOUNDED)
    assert [batch.runs(t) for t in (plain, map_state, unbounded)] == [True, False, False]
    assert [streaming.runs(t) for t in (plain, map_state, unbounded)] == [True, False, True]
    named = vr.TestCase("org.apache.beam.sdk.transforms.ViewTest", "testWindowedSideInputNotPresent", (VR,))
    assert not batch.runs(named) and not streaming.runs(named)
    assert not batch.runs(vr.TestCase("A", "not_validates_runner", ("org.apache.beam.sdk.testing.NeedsRunner",)))


def test_the_comparison_counts_this_runners_outcomes_over_the_tests_flink_runs():
    tests = [
        _case("A", "passes"),
        _case("A", "fails"),
        _case("A", "excluded_here"),
        _case("A", "left_out"),
        _case("A", "flink_excludes", FLINK_EXCLUDED),
    ]
    report = {
        "results": [
            {"class": "A", "method": "passes", "outcome": "passed"},
            {"class": "A", "method": "fails", "outcome": "failed"},
            {"class": "A", "method": "flink_excludes", "outcome": "passed"},
        ],
        "excluded": [{"class": "A", "method": "excluded_here", "reason": "why"}],
    }
    counts, not_passed = vr.compare_with(vr.load_flink_selection("streaming"), tests, report)
    assert counts == {"passed": 1, "failed": 1, "excluded": 1, "not run": 1}
    assert not_passed == [("A#excluded_here", "excluded"), ("A#fails", "failed"), ("A#left_out", "not run")]
