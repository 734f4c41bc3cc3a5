#!/usr/bin/env python
"""Run Beam's own TestPipeline test modules (from the installed wheel) on
DirectRunner and/or SparkRunner and compare the outcomes.

Each module runs in its own pytest subprocess with the
`tests.beam_suite_plugin` plugin (which makes `TestPipeline()` default to the
runner in BEAM_SPARK_TEST_PIPELINE_OPTIONS), a per-test timeout
(pytest-timeout), a per-module wall-clock limit and a JUnit XML report, one
module at a time (sequentially: the test machine has 2 cores).

    .venv/bin/python tools/beam_suites.py --runner both --json /tmp/beam_suites.json
    .venv/bin/python tools/beam_suites.py --modules apache_beam/transforms/core_test --runner spark
    .venv/bin/python tools/beam_suites.py --report-only --json /tmp/beam_suites.json

It prints a markdown table (module | per runner: passed on that runner / passed
without a pipeline / passed on another runner / failed / skipped | tests passing
on Direct but failing on Spark) and writes every per-test outcome, with the
runners its pipelines ran on (tests/pipeline_runs.py), to the --json file
(rewritten after each module, so a long run can be watched and resumed with
--resume).
"""

import argparse
import datetime
import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

RUNNER_OPTIONS = {
    "direct": "--runner=DirectRunner",
    "spark": "--runner=beam_spark_runner.SparkRunner",
}
RUNNER_TITLES = {"direct": "Direct", "spark": "Spark"}
# The runner classes tests/pipeline_runs.py records for each runner under test.
RUNNER_LABELS = {
    "direct": frozenset(["DirectRunner", "SwitchingDirectRunner", "BundleBasedDirectRunner"]),
    "spark": frozenset(["SparkRunner"]),
}
RUNNERS_PROPERTY = "pipeline_runners"
MAX_NAMES_IN_TABLE = 6

# Modules named explicitly in addition to apache_beam/transforms/*_test.py.
EXTRA_MODULES = [
    "apache_beam/pipeline_test",
    "apache_beam/metrics/metric_test",
    "apache_beam/transforms/combinefn_lifecycle_test",
    "apache_beam/transforms/dofn_lifecycle_test",
    # Outside transforms/, with tests marked it_validatesrunner (packed
    # combiners; RunInference).
    "apache_beam/runners/portability/fn_api_runner/translations_test",
    "apache_beam/ml/inference/base_test",
]

# Modules that use TestPipeline but are left out of the default list, and why.
EXCLUDED = {
    "apache_beam/transforms/sql_test": "SqlTransform is a Java cross-language transform: needs the Beam SQL "
    "expansion-service jar (large Maven download, network) and a runner "
    "that stages Java artifacts",
    "apache_beam/examples/snippets/transforms/elementwise/runinference_test": "needs PyTorch (not installed) and GCP; models are downloaded from gs://",
    "apache_beam/examples/snippets/transforms/elementwise/mltransform_test": "needs tensorflow_transform (not installed; module skips itself)",
    "apache_beam/examples/ml_transform/mltransform_one_hot_encoding_test": "needs tensorflow_transform (not installed; module skips itself)",
    "apache_beam/examples/cookbook/group_with_coder_test": "needs GCP dependencies (gcsio; the class skips itself without them)",
    "apache_beam/examples/cookbook/ordered_window_elements/batch_test": "pins --runner=PrismRunner in its own options, so it never runs on the "
    "runner under test; skips itself without a Go toolchain",
    "apache_beam/examples/fastavro_it_test": "Avro load test from Beam's post-commit: needs an --output option "
    "(gs:// there) and writes and reads back 1,000,000 records by default",
    "apache_beam/examples/cookbook/ordered_window_elements/streaming_test": "pins --runner=PrismRunner in its own options, so it never runs on the "
    "runner under test; skips itself without a Go toolchain",
}
# Example integration tests that only need a --temp_location, which may be a
# local directory (the tool passes one): they write their input there, run the
# example and read its output back.
LOCAL_IT_EXAMPLES = frozenset(
    [
        "apache_beam/examples/avro_nyc_trips_it_test",
        "apache_beam/examples/complete/tfidf_it_test",
        "apache_beam/examples/cookbook/custom_ptransform_it_test",
    ]
)
IO_IT_REASON = (
    "io integration or performance test (*_it_test, *_perf_test): written for Beam's "
    "post-commit; needs external services (MongoDB, GCS, an HTTP endpoint) or a large "
    "generated data set"
)
IT_EXAMPLE_REASON = (
    "example integration test (*_it_test): written for Beam's post-commit on "
    "Dataflow; needs --temp_location on GCS and/or GCP services (GCS, "
    "BigQuery, Pub/Sub, Datastore, Bigtable) or docker"
)


def beam_root():
    import apache_beam

    return os.path.dirname(os.path.abspath(apache_beam.__file__))


def _uses_test_pipeline(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return "TestPipeline" in f.read()


def _module_of(path, root):
    rel = os.path.relpath(path, os.path.dirname(root))
    return rel[: -len(".py")].replace(os.sep, "/")


def default_modules():
    """(modules in priority order, {excluded module: reason})."""
    root = beam_root()
    excluded = {}
    transforms = sorted(
        _module_of(p, root) for p in glob.glob(os.path.join(root, "transforms", "*_test.py")) if _uses_test_pipeline(p)
    )
    modules = []
    for m in transforms + EXTRA_MODULES:
        if m in EXCLUDED:
            excluded[m] = EXCLUDED[m]
        elif m not in modules:
            modules.append(m)
    # Beam's io/ tests that run pipelines through TestPipeline: the runner
    # replaces text reads and file writes, so they matter here.
    io_modules = sorted(
        _module_of(p, root) for p in glob.glob(os.path.join(root, "io", "*_test.py")) if _uses_test_pipeline(p)
    )
    for m in io_modules:
        if m in EXCLUDED:
            excluded[m] = EXCLUDED[m]
        elif m.endswith("_it_test") or m.endswith("_perf_test"):
            excluded[m] = IO_IT_REASON
        elif m not in modules:
            modules.append(m)
    examples = sorted(
        _module_of(p, root)
        for p in glob.glob(os.path.join(root, "examples", "**", "*_test.py"), recursive=True)
        if _uses_test_pipeline(p)
    )
    for m in examples:
        if m in EXCLUDED:
            excluded[m] = EXCLUDED[m]
        elif m.endswith("_it_test") and m not in LOCAL_IT_EXAMPLES:
            excluded[m] = IT_EXAMPLE_REASON
        else:
            modules.append(m)
    return modules, excluded


def _ordered(modules, defaults):
    """The default list's order first (transforms, then examples), then the rest."""
    rank = {m: i for i, m in enumerate(defaults)}
    return sorted(modules, key=lambda m: (rank.get(m, len(rank)), modules.index(m)))


def normalize(module):
    m = module.strip()
    if m.endswith(".py"):
        m = m[:-3]
    if "site-packages/" in m:
        m = m.split("site-packages/", 1)[1]
    return m.replace(".", "/")


def dotted(module):
    return module.replace("/", ".")


# ---------------------------------------------------------------- running


def run_module(module, runner, args, workdir):
    """Runs one module on one runner; returns the module record (with tests)."""
    stem = "%s.%s" % (dotted(module), runner)
    xml_path = os.path.join(workdir, stem + ".xml")
    log_path = os.path.join(workdir, stem + ".log")
    for p in (xml_path, log_path):
        if os.path.exists(p):
            os.remove(p)
    cmd = [
        args.python,
        "-m",
        "pytest",
        "-p",
        "tests.beam_suite_plugin",
        "--pyargs",
        dotted(module),
        "-q",
        "-rN",
        "-p",
        "no:cacheprovider",
        "--timeout",
        str(args.test_timeout),
        "--junitxml",
        xml_path,
        "-o",
        "junit_family=xunit2",
    ] + list(args.pytest_arg or [])
    env = dict(os.environ)
    env["BEAM_SPARK_TEST_PIPELINE_OPTIONS"] = args.spark_options if runner == "spark" else args.direct_options
    env.setdefault("PYTHONUNBUFFERED", "1")
    status = "ok"
    started = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    head = git_head()
    start = time.time()
    with open(log_path, "w") as log:
        log.write(
            "$ BEAM_SPARK_TEST_PIPELINE_OPTIONS=%r %s\n\n" % (env["BEAM_SPARK_TEST_PIPELINE_OPTIONS"], " ".join(cmd))
        )
        log.flush()
        proc = subprocess.Popen(
            cmd, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            proc.wait(timeout=args.module_timeout)
        except subprocess.TimeoutExpired:
            status = "timeout"
            # SIGINT first: pytest stops and still writes the JUnit XML of the
            # tests that finished.
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                _kill_group(proc.pid)
                proc.wait()
        finally:
            _kill_group(proc.pid)  # leftover Spark JVM / Python workers of this run
    duration = time.time() - start
    tests = parse_junit(xml_path) if os.path.exists(xml_path) else {}
    if status == "ok" and not os.path.exists(xml_path):
        status = "crashed"
    if status == "ok" and proc.returncode not in (0, 1, 5):
        # 2 = interrupted / collection errors, 3 = internal error, 4 = usage error
        status = "exit %d" % proc.returncode
    return {
        "options": env["BEAM_SPARK_TEST_PIPELINE_OPTIONS"],
        "started": started,
        "git_head": head,
        "status": status,
        "returncode": proc.returncode,
        "duration_s": round(duration, 1),
        "xml": xml_path,
        "log": log_path,
        "counts": count(tests, runner),
        "tests": tests,
    }


def git_head():
    """The repository's HEAD commit (read-only), to tell which runner code ran:
    the runner may change between modules while a long run goes on."""
    try:
        out = subprocess.run(
            ["git", "-C", REPO_ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
        )
        head = out.stdout.strip()
        dirty = subprocess.run(
            ["git", "--no-optional-locks", "-C", REPO_ROOT, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        return head + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def _kill_group(pgid):
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _first_line(text):
    """The first non-empty line; when it ends with ':' (a heading such as
    "The Spark runner cannot run this pipeline:"), the next line too."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    if not lines:
        return ""
    first = lines[0]
    if first.endswith(":") and len(lines) > 1:
        first += " " + lines[1]
    return first[:400]


def _class_name(classname):
    """Beam's dotted class name: pytest prefixes the path from its rootdir
    (".venv.lib.python3.11.site-packages.apache_beam...")."""
    marker = "site-packages."
    return classname.split(marker, 1)[1] if marker in classname else classname


def parse_junit(xml_path):
    """{test id: {"outcome", "message", "time", "detail"}} from a JUnit XML."""
    try:
        tree = ET.parse(xml_path)
    except ET.ParseError as e:
        return {"<junit xml unreadable>": {"outcome": "error", "message": str(e)}}
    tests = {}
    for case in tree.iter("testcase"):
        if not case.get("name"):
            continue  # the test a timeout interrupted: pytest writes an empty record
        test_id = "%s::%s" % (_class_name(case.get("classname", "")), case.get("name", ""))
        outcome, message, detail = "passed", "", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[child.tag]
                message = _first_line(child.get("message")) or _first_line(child.text)
                if child.tag != "skipped":
                    text = child.text or ""
                    detail = text[-2500:]
                break
        record = {"outcome": outcome, "time": float(case.get("time") or 0)}
        runners = [prop.get("value") for prop in case.iter("property") if prop.get("name") == RUNNERS_PROPERTY]
        if runners:
            # tests/pipeline_runs.py: the runner of every pipeline the test ran.
            record["runners"] = [r for r in runners[0].split(",") if r]
        if message:
            record["message"] = message
        if detail:
            record["detail"] = detail
        tests[test_id] = record
    return tests


def count(tests, runner):
    """Outcome counts, with passed tests split by where their pipelines ran
    (tests/pipeline_runs.py): "on_runner" only if every pipeline ran on the
    runner under test and at least one did."""
    counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0, "on_runner": 0, "no_pipeline": 0, "other_runner": 0}
    for t in tests.values():
        counts[t["outcome"]] = counts.get(t["outcome"], 0) + 1
        if t["outcome"] == "passed":
            counts[_where(t.get("runners"), runner)] += 1
    return counts


def _where(runners, runner):
    if runners is None:
        return "other_runner"  # not recorded: cannot be counted for the runner
    if not runners:
        return "no_pipeline"
    return "on_runner" if all(r in RUNNER_LABELS[runner] for r in runners) else "other_runner"


def _failing(outcome):
    return outcome in ("failed", "error")


def compare(record):
    """Tests passing on Direct but failing (failed/error) on Spark, per module."""
    out = {}
    for module, runs in record["modules"].items():
        d = runs.get("direct", {}).get("tests", {})
        s = runs.get("spark", {}).get("tests", {})
        regressions = sorted(
            t for t, r in d.items() if r["outcome"] == "passed" and _failing(s.get(t, {}).get("outcome"))
        )
        if regressions:
            out[module] = [{"test": t, "message": s[t].get("message", "")} for t in regressions]
    return out


# ---------------------------------------------------------------- reporting


def _cell(run):
    if not run:
        return "not run"
    c = run["counts"]
    text = "%d / %d / %d / %d / %d" % (
        c.get("on_runner", 0),
        c.get("no_pipeline", 0),
        c.get("other_runner", 0),
        c["failed"] + c["error"],
        c["skipped"],
    )
    if run["status"] != "ok":
        text += " (%s after %ds)" % (run["status"], run["duration_s"])
    return text


def markdown(record):
    runners = record["runners"]
    regressions = compare(record) if set(runners) >= {"direct", "spark"} else {}
    lines = []
    header = ["module"] + [
        "%s: passed on it / no pipeline / other runner / fail / skip" % RUNNER_TITLES[r] for r in runners
    ]
    both = set(runners) >= {"direct", "spark"}
    if both:
        header.append("passing on Direct, failing on Spark")
    header.append("time (s)")
    lines.append("| " + " | ".join(header) + " |")
    lines.append("| " + " | ".join(["---"] + ["---:"] * len(runners) + (["---"] if both else []) + ["---:"]) + " |")
    totals = {
        r: {"passed": 0, "failed": 0, "error": 0, "skipped": 0, "on_runner": 0, "no_pipeline": 0, "other_runner": 0}
        for r in runners
    }
    n_regressions = 0
    for module in record["order"]:
        runs = record["modules"].get(module, {})
        row = ["`%s`" % dotted(module)]
        for r in runners:
            row.append(_cell(runs.get(r)))
            if runs.get(r):
                for k, v in runs[r]["counts"].items():
                    totals[r][k] = totals[r].get(k, 0) + v
        if both:
            names = [x["test"].rsplit(".", 1)[-1] for x in regressions.get(module, [])]  # Class::test
            n_regressions += len(names)
            if len(names) > MAX_NAMES_IN_TABLE:
                names = names[:MAX_NAMES_IN_TABLE] + ["... (all in the JSON)"]
            row.append("%d: %s" % (len(regressions.get(module, [])), ", ".join(names)) if names else "0")
        row.append("%s" % " + ".join(str(int(runs[r]["duration_s"])) for r in runners if runs.get(r)))
        lines.append("| " + " | ".join(row) + " |")
    row = ["**total**"]
    for r in runners:
        t = totals[r]
        row.append(
            "**%d / %d / %d / %d / %d**"
            % (t["on_runner"], t["no_pipeline"], t["other_runner"], t["failed"] + t["error"], t["skipped"])
        )
    if both:
        row.append("**%d**" % n_regressions)
    row.append("")
    lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    lines.append(
        "passed on it: every pipeline the test ran ran on that runner, at least one "
        "(tests/pipeline_runs.py); no pipeline: passed without running one; other runner: "
        "passed with a pipeline on another runner (e.g. `beam.Pipeline()`, which is "
        "DirectRunner, or a pinned FnApiRunner). fail = failed + error (pytest `error` = "
        "failure in setup/teardown or collection); %s"
        % ", ".join("%s errors: %d" % (RUNNER_TITLES[r], totals[r]["error"]) for r in runners)
    )
    if record.get("not_run"):
        lines.append("")
        lines.append("Not run (time budget): " + ", ".join("`%s`" % dotted(m) for m in record["not_run"]))
    return "\n".join(lines)


def save(record, path):
    record["direct_pass_spark_fail"] = compare(record)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(record, f, indent=1, sort_keys=False)
    os.replace(tmp, path)


def versions():
    out = {"python": sys.version.split()[0]}
    for name in ("apache_beam", "pyspark", "pytest"):
        try:
            out[name] = __import__(name).__version__
        except Exception:  # pragma: no cover
            out[name] = None
    return out


def main(argv=None):
    args = _parse_args(argv)
    if args.report_only:
        return _report_only(args)

    defaults, excluded = default_modules()
    if args.list:
        _print_module_list(defaults, excluded)
        return 0

    modules = [normalize(m) for m in args.modules] if args.modules else defaults
    runners = ["direct", "spark"] if args.runner == "both" else [args.runner]
    workdir = args.workdir or tempfile.mkdtemp(prefix="beam_suites_")
    os.makedirs(workdir, exist_ok=True)
    json_path = args.json or os.path.join(workdir, "beam_suites.json")
    _set_temp_location(args, workdir)

    record = _load_record(args, json_path, modules, runners, defaults, excluded, workdir)
    print("workdir: %s\njson: %s" % (workdir, json_path), file=sys.stderr)
    _run_modules(args, record, modules, runners, workdir, json_path)
    _print_table(record, args.markdown)
    return 0


def _parse_args(argv):
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--modules",
        nargs="+",
        help="modules to run, as apache_beam/x/y_test or apache_beam.x.y_test (default: see --list)",
    )
    parser.add_argument("--runner", choices=("spark", "direct", "both"), default="both")
    parser.add_argument("--json", default=None, help="write all per-test outcomes here")
    parser.add_argument("--markdown", default=None, help="also write the table to this file")
    parser.add_argument("--workdir", default=None, help="where JUnit XML and logs go (default: a new temp dir)")
    parser.add_argument("--test-timeout", type=int, default=300, help="seconds per test")
    parser.add_argument("--module-timeout", type=int, default=25 * 60, help="wall-clock seconds per module and runner")
    parser.add_argument(
        "--budget-minutes",
        type=float,
        default=None,
        help="start no new module after this many minutes; the rest is recorded as not run",
    )
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument(
        "--spark-options", default=RUNNER_OPTIONS["spark"], help="TestPipeline options for the Spark run"
    )
    parser.add_argument(
        "--direct-options", default=RUNNER_OPTIONS["direct"], help="TestPipeline options for the Direct run"
    )
    parser.add_argument(
        "--pytest-arg", action="append", help="extra pytest argument (repeatable), e.g. --pytest-arg=-x"
    )
    parser.add_argument(
        "--resume", action="store_true", help="keep module runs already in --json and run only the missing ones"
    )
    parser.add_argument(
        "--rerun",
        action="store_true",
        help="keep --json and re-run the selected modules (--modules), replacing their earlier runs",
    )
    parser.add_argument(
        "--temp-location",
        default=None,
        help="passed as --temp_location to both runners (the examples' "
        "integration-style tests need one); default <workdir>/temp_location, "
        "'' for none",
    )
    parser.add_argument("--report-only", action="store_true", help="print the table of an existing --json and exit")
    parser.add_argument(
        "--reparse", action="store_true", help="with --report-only: re-read the JUnit XML files named in --json"
    )
    parser.add_argument("--list", action="store_true", help="print the default modules and the excluded ones, and exit")
    return parser.parse_args(argv)


def _print_table(record, markdown_path):
    """Prints the markdown table of `record`; also writes it to `markdown_path` if given."""
    table = markdown(record)
    print(table)
    if markdown_path:
        with open(markdown_path, "w") as f:
            f.write(table + "\n")


def _report_only(args):
    """--report-only: the table of an existing --json (with --reparse, re-read
    from its JUnit XML files first)."""
    with open(args.json) as f:
        record = json.load(f)
    if args.reparse:  # re-read every run's JUnit XML (after a parser change)
        for runs in record["modules"].values():
            for runner, run in runs.items():
                if os.path.exists(run["xml"]):
                    run["tests"] = parse_junit(run["xml"])
                    run["counts"] = count(run["tests"], runner)
        save(record, args.json)
    _print_table(record, args.markdown)
    return 0


def _print_module_list(defaults, excluded):
    """--list: the default modules, then the excluded ones with the reason."""
    for m in defaults:
        print(m)
    print("\n# excluded")
    for m, why in excluded.items():
        print("%s  # %s" % (m, why))


def _set_temp_location(args, workdir):
    """Adds --temp_location (default <workdir>/temp_location) to both runners'
    options unless they have one or --temp-location is ''."""
    if args.temp_location is None:
        args.temp_location = os.path.join(workdir, "temp_location")
    if args.temp_location:
        os.makedirs(args.temp_location, exist_ok=True)
        for attr in ("spark_options", "direct_options"):
            if "--temp_location" not in getattr(args, attr):
                setattr(args, attr, "%s --temp_location=%s" % (getattr(args, attr), args.temp_location))


def _load_record(args, json_path, modules, runners, defaults, excluded, workdir):
    """The run's record: the one in --json with --resume or --rerun, else a new
    one; this invocation, the versions, runners, module order and settings added."""
    record = None
    if (args.resume or args.rerun) and os.path.exists(json_path):
        with open(json_path) as f:
            record = json.load(f)
    settings = {
        "test_timeout_s": args.test_timeout,
        "module_timeout_s": args.module_timeout,
        "budget_minutes": args.budget_minutes,
        "spark_options": args.spark_options,
        "direct_options": args.direct_options,
        "pytest_args": args.pytest_arg or [],
    }
    invocation = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "argv": sys.argv[1:],
        "settings": settings,
    }
    if record is None:
        record = {"modules": {}, "order": [], "excluded": {}, "not_run": [], "invocations": []}
        record["date"] = invocation["date"]
    record.setdefault("invocations", []).append(invocation)
    order = record.get("order", [])
    record.update(
        {
            "versions": versions(),
            "runners": sorted(set(record.get("runners", [])) | set(runners), key=["direct", "spark"].index),
            "order": _ordered(order + [m for m in modules if m not in order], defaults),
            "settings": settings,
            "workdir": workdir,
        }
    )
    if not args.modules:
        record["excluded"] = excluded
    for m in modules:
        if m in record["excluded"]:
            del record["excluded"][m]
    record["not_run"] = [m for m in record.get("not_run", []) if m not in modules]
    return record


def _run_modules(args, record, modules, runners, workdir, json_path):
    """Runs every module on every runner (skipping runs kept by --resume and,
    past --budget-minutes, recording the module as not run), saving the
    record to `json_path` after each run."""
    start = time.time()
    for i, module in enumerate(modules):
        runs = record["modules"].setdefault(module, {})
        for runner in runners:
            if args.resume and not args.rerun and runner in runs:
                continue
            if args.budget_minutes is not None and time.time() - start > args.budget_minutes * 60:
                if module not in record["not_run"]:
                    record["not_run"].append(module)
                continue
            print("[%d/%d] %s on %s ..." % (i + 1, len(modules), dotted(module), runner), file=sys.stderr, flush=True)
            runs[runner] = run_module(module, runner, args, workdir)
            r = runs[runner]
            print("    %s in %.0fs: %s" % (r["status"], r["duration_s"], r["counts"]), file=sys.stderr, flush=True)
            save(record, json_path)
    save(record, json_path)


if __name__ == "__main__":
    sys.exit(main())
