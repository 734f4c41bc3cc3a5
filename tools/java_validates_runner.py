"""Beam's Java ValidatesRunner suite against this runner's job service.

    python tools/java_validates_runner.py [--mode batch] [--mode streaming]
        [--slice tools/validates_runner_slice.txt] [--classes REGEX]
        [--job-endpoint HOST:PORT] [--class-timeout 900] [--out DIR]

The tests are Beam Java's own: every test of `beam-sdks-java-core`'s test
jar (Beam Java `JAVA_VERSION`, the newest release whose `PortableRunner`
client Maven Central serves) in JUnit's `ValidatesRunner` category. Each
test's `TestPipeline` runs on `beamsparkrunner.vr.SparkJobServiceRunner`
(java/validates_runner/): Beam Java's `PortableRunner` submits it to the
job service (`beam-spark-job-server`, started here unless `--job-endpoint`
names one), and a test passes only if its pipeline ended DONE with every
PAssert reporting success in the job's metrics. Streaming mode passes
Beam's `--streaming` test option.

What does not run is decided by one file, `tools/validates_runner_exclusions.yaml`:
categories and single tests, each with its reason. The `--slice` file
names the tests CI runs (every category at least once).

Jars come from Maven Central by pinned version into the runner's jar cache
(`beam_spark_runner.maven_jars`); the Java runner classes are compiled
with `javac` into the same cache. Each test class runs in its own JVM
under `--class-timeout`; a class that hits it has its unfinished tests reported as timed out.

Output: a line per test class (passed / passed without a pipeline /
failed / skipped / excluded / timed out: a test whose pass submitted no
pipeline, a check at construction, is not counted as a pass of this
runner), the totals per category, and `<out>/results.json` with every
test's outcome. Exit status 1 if any test that ran did not pass.
"""

import argparse
import collections
import dataclasses
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Dict, FrozenSet, List, Optional, Sequence, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from beam_spark_runner.maven_jars import JarSet, MavenArtifact, cache_root, resolve  # noqa: E402

JAVA_VERSION = "2.65.0"
JAVA_SOURCES = os.path.join(ROOT, "java", "validates_runner")
EXCLUSIONS = os.path.join(ROOT, "tools", "validates_runner_exclusions.yaml")
FLINK_CONFIG = os.path.join(ROOT, "tools", "flink_portable_validates_runner.yaml")
SLICE = os.path.join(ROOT, "tools", "validates_runner_slice.txt")
VALIDATES_RUNNER = "org.apache.beam.sdk.testing.ValidatesRunner"
# Tests that expand transforms in an expansion service at -DexpansionPort.
EXPANSION_SERVICE = "org.apache.beam.sdk.testing.UsesPythonExpansionService"
MODES = ("batch", "streaming")
# The job server's local executors share its driver's heap: GroupByKeyTest's
# 100 MB keys need more than Spark's default 1 GiB in streaming, where a
# shuffle row holds a whole key (Beam's Flink suite excludes these tests
# for their memory, "LargeKeys$Above10MB").
DRIVER_MEMORY = "3g"
# The outcome of a test that passed without submitting a pipeline.
NO_PIPELINE = "passed without a pipeline"
RUNNER_CLASS = "beamsparkrunner.vr.SparkJobServiceRunner"
MAIN_CLASS = "beamsparkrunner.vr.ValidatesRunnerMain"
_BEAM = "org.apache.beam"


def jar_set(version=JAVA_VERSION) -> JarSet:
    """Beam Java's test jar, its client and JUnit, resolved together."""
    return JarSet(
        "beam-java-validates-runner-%s" % version,
        (
            MavenArtifact(_BEAM, "beam-sdks-java-core", version, classifier="tests"),
            MavenArtifact(_BEAM, "beam-sdks-java-core", version),
            MavenArtifact(_BEAM, "beam-runners-portability-java", version),
            # The test jar's own test-scope dependencies, which its pom does not carry.
            MavenArtifact("junit", "junit", "4.13.2"),
            MavenArtifact("org.hamcrest", "hamcrest", "2.1"),
            MavenArtifact("org.mockito", "mockito-core", "4.11.0"),
            MavenArtifact("org.slf4j", "slf4j-jdk14", "2.0.16"),
        ),
    )


def tests_jar(jars: Sequence[str], version=JAVA_VERSION) -> str:
    name = "beam-sdks-java-core-%s-tests.jar" % version
    for path in jars:
        if os.path.basename(path) == name:
            return path
    raise SystemExit("%s is not among the resolved jars" % name)


def _sources():
    return sorted(os.path.join(d, f) for d, _, files in os.walk(JAVA_SOURCES) for f in files if f.endswith(".java"))


def classes_dir() -> str:
    """Where java/validates_runner's classes are cached: named by the
    sources' contents and their names inside java/validates_runner, so a
    checkout anywhere else with the same sources uses the same classes."""
    digest = hashlib.sha256()
    for path in _sources():
        with open(path, "rb") as f:
            digest.update(os.path.relpath(path, JAVA_SOURCES).encode() + b"\0" + f.read())
    return os.path.join(cache_root(), "validates-runner-classes-" + digest.hexdigest()[:16])


def compiled_classes(jars: Sequence[str]) -> str:
    """java/validates_runner compiled into the cache (once per content)."""
    sources = _sources()
    out = classes_dir()
    if os.path.isdir(out):
        return out
    javac = shutil.which("javac")
    if javac is None:
        raise SystemExit("javac (a JDK) is needed to compile %s" % JAVA_SOURCES)
    work = tempfile.mkdtemp(prefix="validates-runner-classes.", dir=cache_root())
    done = subprocess.run(
        [javac, "-nowarn", "-d", work, "-cp", os.pathsep.join(jars)] + sources,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    if done.returncode != 0:
        shutil.rmtree(work, ignore_errors=True)
        raise SystemExit("javac failed on %s:\n%s" % (JAVA_SOURCES, done.stdout.decode("utf-8", "replace")))
    try:
        os.replace(work, out)
    except OSError:
        # Another process (the other test process of a run) compiled the
        # same sources first: its classes are these.
        if not os.path.isdir(out):
            raise
        shutil.rmtree(work, ignore_errors=True)
    return out


@dataclasses.dataclass(frozen=True)
class TestCase:
    class_name: str
    method: str
    categories: Tuple[str, ...]

    @property
    def id(self):
        return "%s#%s" % (self.class_name, self.method)


@dataclasses.dataclass(frozen=True)
class Exclusions:
    """What one mode does not run, each with its reason."""

    categories: Dict[str, str]
    tests: Dict[str, str]

    def reason(self, test: TestCase) -> Optional[str]:
        if test.id in self.tests:
            return self.tests[test.id]
        for category in test.categories:
            if category in self.categories:
                return "%s: %s" % (category.rsplit(".", 1)[-1], self.categories[category])
        return None


def load_exclusions(mode, path=EXCLUSIONS) -> Exclusions:
    """The `all` section and the mode's own (the mode's reason wins)."""
    import yaml

    with open(path) as f:
        data = yaml.safe_load(f) or {}
    unknown = set(data) - {"all"} - set(MODES)
    if unknown:
        raise SystemExit("%s: unknown sections %s (expected all, %s)" % (path, sorted(unknown), ", ".join(MODES)))
    categories, tests = {}, {}
    for section in ("all", mode):
        part = data.get(section) or {}
        categories.update(part.get("categories") or {})
        tests.update(part.get("tests") or {})
    for what, entries in (("categories", categories), ("tests", tests)):
        for name, reason in entries.items():
            if not isinstance(reason, str) or not reason.strip():
                raise SystemExit("%s: %s entry %s has no reason" % (path, what, name))
    return Exclusions(categories, tests)


def load_slice(path) -> List[str]:
    with open(path) as f:
        # One Class#method per line; lines starting with "#" are comments.
        return [line.strip() for line in f if line.strip() and not line.lstrip().startswith("#")]


def list_tests(classpath: str, jar: str) -> List[TestCase]:
    """Every test of `jar` in the ValidatesRunner category (cached per jar)."""
    listing = os.path.join(cache_root(), "validates-runner-tests-%s.jsonl" % os.path.basename(jar))
    if not os.path.exists(listing):
        tmp = "%s.tmp%d" % (listing, os.getpid())  # another process may be listing it too
        _java(classpath, [MAIN_CLASS, "list", tmp, jar], timeout=600)
        os.replace(tmp, listing)
    cases = []
    with open(listing) as f:
        for line in f:
            row = json.loads(line)
            if VALIDATES_RUNNER in row["categories"]:
                cases.append(TestCase(row["class"], row["method"], tuple(row["categories"])))
    return cases


def _java(classpath, args, timeout, system_properties=()):
    java = os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else "java"
    command = [java, "-Xmx1g", "-cp", classpath] + ["-D%s=%s" % p for p in system_properties] + args
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    if done.returncode != 0:
        raise SystemExit("%s failed (%d):\n%s" % (" ".join(args[:2]), done.returncode, done.stdout.decode()[-4000:]))
    return done


# The jars a test's Java stages need beyond Beam Java's harness, core and
# their dependencies (which the runner adds, by the release the environment
# declares): the tests themselves and the matchers PAssert runs. Staging the
# client's whole classpath instead copies 43 jars to the job service per test.
STAGED_JARS = (
    "beam-sdks-java-core-%s-tests.jar" % JAVA_VERSION,
    "hamcrest-2.1.jar",
    "junit-4.13.2.jar",
    "hamcrest-core-1.3.jar",
)


def pipeline_options(endpoint, mode, classpath="") -> List[str]:
    options = ["--runner=" + RUNNER_CLASS, "--jobEndpoint=" + endpoint]
    staged = [p for p in classpath.split(os.pathsep) if os.path.basename(p) in STAGED_JARS]
    if staged:
        options.append("--filesToStage=" + ",".join(staged))
    if mode == "streaming":
        options.append("--streaming=true")
    return options


def run_tests(classpath, to_run, endpoint, mode, timeout, work, name, expansion_port=None) -> List[dict]:
    """Runs `to_run` ({class: [methods]}) in one JVM, class after class,
    under `timeout` seconds; a result per test (one the JVM never finished
    is `timeout` or `crashed`). `name` names the run's files in `work`.
    `expansion_port`: the Python test expansion service's, for the
    cross-language tests."""
    stem = os.path.join(work, "%s.%s" % (mode, name))
    if os.path.exists(stem + ".jsonl"):
        os.remove(stem + ".jsonl")  # an earlier run's, which must not count as this one's
    with open(stem + ".tests", "w") as f:
        f.write("".join("%s#%s\n" % (c, m) for c, methods in to_run.items() for m in methods))
    java = os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else "java"
    command = [
        java,
        "-Xmx1g",
        "-cp",
        classpath,
        "-DbeamTestPipelineOptions=" + json.dumps(pipeline_options(endpoint, mode, classpath)),
    ]
    if expansion_port is not None:
        command.append("-DexpansionPort=%d" % expansion_port)
    command += [MAIN_CLASS, "run", stem + ".tests", stem + ".jsonl"]
    with open(stem + ".log", "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            process.wait(timeout=timeout)
            ended = "crashed (exit code %d, log %s)" % (process.returncode, stem + ".log")
            outcome_of_unfinished = "crashed"
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            ended = "the time limit of %d s ran out" % timeout
            outcome_of_unfinished = "timeout"
        except BaseException:
            # The tool itself is stopped (SIGTERM, Ctrl-C): its test JVM,
            # in a session of its own, goes with it.
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise
    results = {}
    if os.path.exists(stem + ".jsonl"):
        with open(stem + ".jsonl") as f:
            for line in f:
                try:
                    row = json.loads(line)
                except ValueError:
                    continue  # the JVM was killed mid-line
                test = (row["class"], row["method"])
                if row["outcome"] == "started":
                    results.setdefault(test, dict(row, outcome=None))
                elif results.get(test, {}).get("outcome") in (None, "passed"):
                    if row["outcome"] == "passed" and row.get("pipelines") == 0:
                        # Passed without submitting a pipeline (a check at
                        # construction): not a pass of this runner.
                        row = dict(row, outcome=NO_PIPELINE)
                    results[test] = row
    out = []
    for class_name, methods in to_run.items():
        for method in methods:
            row = results.get((class_name, method))
            if row is None or row["outcome"] is None:
                out.append({"class": class_name, "method": method, "outcome": outcome_of_unfinished, "message": ended})
            else:
                out.append(row)
    return out


class PythonExpansionService:
    """Beam Python's test expansion service (shipped in the apache-beam
    wheel: the transforms ValidateRunnerXlangTest expands from its Java
    pipelines), on a free port, in its own process."""

    def __init__(self, log_path):
        import socket

        with socket.socket() as probe:
            probe.bind(("localhost", 0))
            self.port = probe.getsockname()[1]
        self._log = open(log_path, "wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "apache_beam.runners.portability.expansion_service_test", "--port", str(self.port)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 120
        while True:
            try:
                with socket.create_connection(("localhost", self.port), timeout=1):
                    return
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise SystemExit("Beam's Python test expansion service did not start; its log: %s" % log_path)
                time.sleep(0.5)

    def stop(self):
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
        self._log.close()


class JobServer:
    """`beam-spark-job-server` on a free port, in its own process, its
    local Spark's driver (whose heap its executors share) given
    `driver_memory`."""

    def __init__(self, log_path, driver_memory):
        self._log = open(log_path, "wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "beam_spark_runner.job_server", "--port", "0", "--log_level", "WARNING"]
            + ["--spark_conf", "spark.driver.memory=%s" % driver_memory],
            stdout=subprocess.PIPE,
            stderr=self._log,
            cwd=ROOT,
            start_new_session=True,
        )
        line = self.process.stdout.readline().decode()
        match = re.search(r"listening on (\S+)", line)
        if match is None:
            self.stop()
            raise SystemExit("beam-spark-job-server did not start; its log: %s" % log_path)
        self.endpoint = match.group(1)

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
        self._log.close()


def plan(tests: Sequence[TestCase], exclusions: Exclusions, chosen: Optional[set], classes: Optional[str]):
    """{class: [methods to run]} and [(test, reason)] of those excluded,
    among the tests `chosen` (a slice) and whose class matches `classes`."""
    to_run = collections.OrderedDict()
    excluded = []
    for test in tests:
        if chosen is not None and test.id not in chosen:
            continue
        if classes and not re.search(classes, test.class_name):
            continue
        reason = exclusions.reason(test)
        if reason is not None:
            excluded.append((test, reason))
        else:
            to_run.setdefault(test.class_name, []).append(test.method)
    return to_run, excluded


def summarize(mode, results: List[dict], excluded, tests: Sequence[TestCase]):
    """Lines per class and per category."""
    by_id = {t.id: t for t in tests}
    per_class = collections.defaultdict(collections.Counter)
    per_category = collections.defaultdict(collections.Counter)
    for row in results:
        per_class[row["class"]][row["outcome"]] += 1
        for category in by_id[row["class"] + "#" + row["method"]].categories:
            per_category[category][row["outcome"]] += 1
    for test, _ in excluded:
        per_class[test.class_name]["excluded"] += 1
        for category in test.categories:
            per_category[category]["excluded"] += 1
    lines = ["== %s ==" % mode]
    for name in sorted(per_class):
        lines.append("%-70s %s" % (name, _counts(per_class[name])))
    lines.append("-- by category --")
    for name in sorted(per_category):
        lines.append("%-70s %s" % (name.rsplit(".", 1)[-1], _counts(per_category[name])))
    total = collections.Counter()
    for c in per_class.values():
        total.update(c)
    lines.append("%s total: %s" % (mode, _counts(total)))
    return lines, total


@dataclasses.dataclass(frozen=True)
class SuiteSelection:
    """Which tests another runner's ValidatesRunner configuration runs in
    one mode: those of `include_category` in none of `exclude_categories`
    and not in `exclude_tests`."""

    include_category: str
    exclude_categories: FrozenSet[str]
    exclude_tests: FrozenSet[str]

    def runs(self, test: TestCase) -> bool:
        return (
            self.include_category in test.categories
            and not self.exclude_categories.intersection(test.categories)
            and test.id not in self.exclude_tests
        )


def load_flink_selection(mode, path=FLINK_CONFIG) -> SuiteSelection:
    """Beam's Flink portable runner's selection for `mode` (its shared
    exclusions and the mode's own)."""
    import yaml

    with open(path) as f:
        data = yaml.safe_load(f)
    categories, tests = set(), set()
    for section in ("all", mode):
        part = data.get(section) or {}
        categories.update(part.get("exclude_categories") or ())
        tests.update(part.get("exclude_tests") or ())
    return SuiteSelection(data["include_category"], frozenset(categories), frozenset(tests))


def compare_with(selection: SuiteSelection, tests: Sequence[TestCase], mode_report: dict):
    """This runner's outcomes over the tests `selection` runs: a Counter of
    outcomes ("excluded" for the ones this runner excluded, "not run" for
    those a partial run left out) and the ids of those that did not pass
    here, each with its outcome."""
    outcomes = {r["class"] + "#" + r["method"]: r["outcome"] for r in mode_report["results"]}
    outcomes.update({e["class"] + "#" + e["method"]: "excluded" for e in mode_report["excluded"]})
    counts, not_passed = collections.Counter(), []
    for test in tests:
        if selection.runs(test):
            outcome = outcomes.get(test.id, "not run")
            counts[outcome] += 1
            if outcome != "passed":
                not_passed.append((test.id, outcome))
    return counts, sorted(not_passed)


def flink_lines(mode, tests, mode_report):
    """What this runner did with the tests Beam's Flink portable runner
    runs in `mode`."""
    counts, not_passed = compare_with(load_flink_selection(mode), tests, mode_report)
    lines = [
        "-- the %d tests Beam's Flink portable runner runs in %s --" % (sum(counts.values()), mode),
        "here: %s" % _counts(counts),
    ]
    lines.extend("  %s: %s" % (test_id, outcome) for test_id, outcome in not_passed)
    return lines, counts


def _counts(counter):
    order = ("passed", NO_PIPELINE, "failed", "skipped", "ignored", "timeout", "crashed", "excluded", "not run")
    return ", ".join("%d %s" % (counter[k], k) for k in order if counter.get(k))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", action="append", choices=MODES, help="batch and/or streaming (default: both)")
    parser.add_argument("--slice", help="a file of Class#method lines: run only those")
    parser.add_argument("--classes", help="run only test classes whose name matches this regular expression")
    parser.add_argument("--job-endpoint", help="a running beam-spark-job-server (default: start one)")
    parser.add_argument("--class-timeout", type=int, default=900, help="seconds per test class (default 900)")
    parser.add_argument(
        "--compare-flink",
        metavar="RESULTS_JSON",
        help="run nothing: count a results.json's outcomes over the tests Beam's Flink portable runner runs",
    )
    parser.add_argument(
        "--driver-memory",
        default=DRIVER_MEMORY,
        help="the started job server's spark.driver.memory (default %s)" % DRIVER_MEMORY,
    )
    parser.add_argument("--out", default=os.path.join(ROOT, "build", "validates-runner"), help="results directory")
    args = parser.parse_args(argv)
    # Stopped with SIGTERM (a `timeout`, a CI job's end), the tool unwinds
    # as on Ctrl-C: the test JVM and the job server it started stop too.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    modes = args.mode or list(MODES)
    os.makedirs(args.out, exist_ok=True)

    jars = resolve(jar_set())
    classpath = os.pathsep.join([compiled_classes(jars)] + list(jars))
    tests = list_tests(classpath, tests_jar(jars))
    by_id = {t.id: t for t in tests}
    if args.compare_flink:
        with open(args.compare_flink) as f:
            for mode, mode_report in json.load(f)["modes"].items():
                print("\n".join(flink_lines(mode, tests, mode_report)[0]))
        return 0
    chosen = set(load_slice(args.slice)) if args.slice else None
    if chosen is not None:
        unknown = chosen - {t.id for t in tests}
        if unknown:
            raise SystemExit(
                "%s names tests that are not ValidatesRunner tests of the jar: %s" % (args.slice, sorted(unknown))
            )

    server = None if args.job_endpoint else JobServer(os.path.join(args.out, "job-server.log"), args.driver_memory)
    endpoint = args.job_endpoint or server.endpoint
    expansion = None
    report = {"beam_java": JAVA_VERSION, "endpoint": endpoint, "modes": {}}
    failed = False
    try:
        for mode in modes:
            exclusions = load_exclusions(mode)
            to_run, excluded = plan(tests, exclusions, chosen, args.classes)
            results = []
            started = time.monotonic()
            for class_name, methods in to_run.items():
                class_started = time.monotonic()
                if expansion is None and any(
                    EXPANSION_SERVICE in by_id[class_name + "#" + m].categories for m in methods
                ):
                    expansion = PythonExpansionService(os.path.join(args.out, "expansion-service.log"))
                rows = run_tests(
                    classpath,
                    {class_name: methods},
                    endpoint,
                    mode,
                    args.class_timeout,
                    args.out,
                    class_name,
                    expansion.port if expansion is not None else None,
                )
                results.extend(rows)
                counts = collections.Counter(r["outcome"] for r in rows)
                print(
                    "%s %s: %s (%.0f s)" % (mode, class_name, _counts(counts), time.monotonic() - class_started),
                    flush=True,
                )
            lines, total = summarize(mode, results, excluded, tests)
            print("\n".join(lines), flush=True)
            print("%s: %.0f s" % (mode, time.monotonic() - started), flush=True)
            failed = failed or any(r["outcome"] not in ("passed", NO_PIPELINE, "skipped", "ignored") for r in results)
            report["modes"][mode] = {
                "seconds": round(time.monotonic() - started, 1),
                "totals": dict(total),
                "results": results,
                "excluded": [{"class": t.class_name, "method": t.method, "reason": r} for t, r in excluded],
            }
            lines, flink = flink_lines(mode, tests, report["modes"][mode])
            print("\n".join(lines), flush=True)
            report["modes"][mode]["flink_selection"] = dict(flink)
    finally:
        if expansion is not None:
            expansion.stop()
        if server is not None:
            server.stop()
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(report, f, indent=1, sort_keys=True)
    print("results: %s" % os.path.join(args.out, "results.json"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
