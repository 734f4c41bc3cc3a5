"""Checkpointing: the exactly-once streaming file sink and the checkpoint coordinator.

    .venv/bin/python benchmarks/checkpointing.py                  # ~5 min (busy 2-core machine)
    .venv/bin/python benchmarks/checkpointing.py --quick          # smoke run, ~3 min
    .venv/bin/python benchmarks/checkpointing.py --json out.json  # + every number
    .venv/bin/python benchmarks/checkpointing.py --chunks 120 --reps 5   # sizes: see --help

One process, one SparkSession (master local[2], 2 key-groups) created up
front, so JVM start-up is excluded from the Spark timings (printed apart).
Three measurements, in this order:

sink_throughput    A streaming windowed count on SparkRunner --streaming:
    `Chunks`, an unbounded splittable DoFn, emits --per_batch chunk numbers
    per call and defers the rest of its range (the runner resumes it in a
    later micro-batch, or more than once in the first: seen with --quick),
    chunk c at event time c / per_batch s (1 s of event time per call); a
    FlatMap fans each chunk out into --fan elements (i % 1000, None); 2 s
    FixedWindows; `Count.PerKey()`; a DoFn formats "key,count" lines (and
    counts panes and elements in Beam counters). Then either
    `beam.io.WriteToText` (the runner replaces it with its exactly-once sink:
    a GroupByKey per window, each pane staged, published after the batch's
    checkpoint completed) -- variant "sink"; the same pipeline without a
    sink commit: the same GroupByKey per window, and a DoFn writing each
    pane's lines straight to its final file in the worker (no staging, no
    publication after the checkpoint: at-least-once) -- variant "direct";
    or a Map that drops the lines -- variant "no_sink" (no files at all).
    Same elements for all. Time = p.run() to wait_until_finish() (query
    start, first batch and the tail batches that close the last windows
    included), after one warm-up run of the sink variant (excluded). The
    variants alternate (sink, direct, no_sink, ...) for --reps rounds;
    throughput = elements / time; the headline ratio is median(sink) /
    median(direct): what the commit protocol costs, target >= 0.9;
    median(sink) / median(no_sink), what writing files with Beam's
    semantics costs at all, is printed too. Also printed per run: the
    rate after the first micro-batch (which starts the query and its Python
    workers), the CPU of this process tree and of the others (/proc: a
    shared machine is noisy; n/a if the first batch fanned out every
    element), micro-batch durations (the runner's "Beam
    streaming (Spark batch N) ... took X ms" log lines) and the coordinator's
    time in the driver per batch (pre_commit; committed, which includes
    release, i.e. publishing the panes' files). Checked: both variants' counters saw every
    (window, key) pane once and every element; the sink's and direct's files
    hold windows x 1000 lines whose counts sum to the elements, with no
    staged file left. A failed check makes the headline MISS.
coordinator        `CheckpointCoordinator` alone (no Spark): --epochs epochs of
    begin, 2 operators x 4 key-group acknowledgements, one side effect
    (~300 bytes), pre_commit, committed (release a no-op), microseconds per
    epoch over three stores in a temporary directory: the benchmark's own
    (tmp file + os.replace), the runner's for a local checkpoint
    (LocalCheckpointFiles, Python calls) and the runner's for any other URI
    (CheckpointFiles: Hadoop FileSystem through py4j, a tenth of the
    epochs). Informational.
restart            tests/faults/sink_pipeline.py (PeriodicImpulse every 0.25 s
    into WriteToText and fileio.WriteToFiles, 2 s windows) as a fresh
    process: seconds from its start to its first published file (cold:
    JVM start-up included), then its process group is SIGKILLed and the
    same command is started again on the same checkpoint: seconds from that
    start to the first published file that was not there before (restart:
    JVM start-up, recovery of the checkpoint and the replay of the
    interrupted batch included). --restarts rounds, each with a new
    checkpoint; restart / cold printed, informational (no target).
"""

import argparse
import functools
import glob
import json
import logging
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

import apache_beam as beam  # noqa: E402
from apache_beam.io.restriction_trackers import OffsetRange, OffsetRestrictionTracker  # noqa: E402
from apache_beam.io.watermark_estimators import ManualWatermarkEstimator  # noqa: E402
from apache_beam.metrics import Metrics  # noqa: E402
from apache_beam.metrics.metric import MetricsFilter  # noqa: E402
from apache_beam.options.pipeline_options import PipelineOptions  # noqa: E402
from apache_beam.transforms import window  # noqa: E402
from apache_beam.transforms.core import RestrictionProvider  # noqa: E402
from apache_beam.utils.timestamp import Duration, Timestamp  # noqa: E402

# Sibling modules: benchmarks/ is the script's directory.
from headline import headline  # noqa: E402
from procstat import CpuMeter  # noqa: E402
from runner_session import start_runner_session  # noqa: E402

MASTER = "local[2]"
PARTITIONS = 2
KEYS = 1000
WINDOW_S = 2
NAMESPACE = "checkpointing_bench"
# Logs every micro-batch at DEBUG ("Streaming batch N took X ms; ...").
STREAMING_LOGGER = "beam_spark_runner.streaming.driver_sink"
SINK_PIPELINE = os.path.join(REPO_ROOT, "tests", "faults", "sink_pipeline.py")
# --quick / full: chunks in all, chunks per micro-batch, elements per chunk, pairs, restarts, epochs.
SIZES = {
    "quick": dict(chunks=12, per_batch=4, fan=25_000, reps=1, restarts=1, epochs=300),
    "full": dict(chunks=60, per_batch=6, fan=100_000, reps=3, restarts=2, epochs=2000),
}


# -- the pipeline -------------------------------------------------------------------


class _Offsets(RestrictionProvider):
    def initial_restriction(self, element):
        return OffsetRange(0, element[0])

    def create_tracker(self, restriction):
        return OffsetRestrictionTracker(restriction)

    def restriction_size(self, element, restriction):
        return restriction.size()

    def truncate(self, element, restriction):
        return None


class Chunks(beam.DoFn):
    """(total, per_batch) -> chunk numbers 0..total-1, per_batch of them per
    call (the rest is deferred: resumed in the next micro-batch), chunk c at
    event time c / per_batch s; the watermark follows."""

    @beam.DoFn.unbounded_per_element()
    def process(
        self,
        element,
        tracker=beam.DoFn.RestrictionParam(_Offsets()),
        estimator=beam.DoFn.WatermarkEstimatorParam(ManualWatermarkEstimator.default_provider()),
    ):
        total, per_batch = element
        start = tracker.current_restriction().start
        stop = min(start + per_batch, total)
        if not tracker.try_claim(stop - 1):
            return
        for c in range(start, stop):
            yield window.TimestampedValue(c, Timestamp(micros=c * 1_000_000 // per_batch))
        estimator.set_watermark(Timestamp(micros=stop * 1_000_000 // per_batch))
        if stop < total:
            tracker.defer_remainder(Duration(micros=0))


def fan_out(chunk, fan):
    Metrics.counter(NAMESPACE, "fanned").inc(fan)
    for i in range(chunk * fan, (chunk + 1) * fan):
        yield i % KEYS, None


class FormatCounts(beam.DoFn):
    def __init__(self):
        self.panes = Metrics.counter(NAMESPACE, "panes")
        self.counted = Metrics.counter(NAMESPACE, "counted")

    def process(self, kv):
        self.panes.inc()
        self.counted.inc(kv[1])
        yield "%d,%d" % kv


class WritePaneDirect(beam.DoFn):
    """Variant "direct": a window's pane written straight to its final file
    by the worker, as a sink without a commit protocol would."""

    def __init__(self, out_dir):
        self.out_dir = out_dir

    def process(self, kv, w=beam.DoFn.WindowParam, pane=beam.DoFn.PaneInfoParam):
        path = os.path.join(self.out_dir, "counts-%d-%d" % (int(w.start), pane.index))
        with open(path, "w") as f:
            f.writelines(line + "\n" for line in kv[1])


def build(p, size, out_dir, mode):
    lines = (
        p
        | beam.Impulse()
        | "Spec" >> beam.Map(lambda _, total=size["chunks"], per=size["per_batch"]: (total, per))
        | "Chunks" >> beam.ParDo(Chunks())
        | "FanOut" >> beam.FlatMap(fan_out, size["fan"])
        | beam.WindowInto(window.FixedWindows(WINDOW_S))
        | beam.combiners.Count.PerKey()
        | "Format" >> beam.ParDo(FormatCounts())
    )
    if mode == "sink":
        lines | beam.io.WriteToText(os.path.join(out_dir, "counts"))
    elif mode == "direct":
        (
            lines
            | "KeyByWindow" >> beam.Map(lambda line: (None, line))
            | "GroupPanes" >> beam.GroupByKey()
            | "WritePanes" >> beam.ParDo(WritePaneDirect(out_dir))
        )
    else:
        lines | "Drop" >> beam.Map(lambda line: None)


def expected(size):
    elements = size["chunks"] * size["fan"]
    windows = -(-size["chunks"] // (size["per_batch"] * WINDOW_S))  # 1 s of event time per batch
    return elements, windows * KEYS


# -- instrumentation ------------------------------------------------------------------


class _BatchLog(logging.Handler):
    """The runner's per-batch log line ("Streaming batch N took X ms; ...",
    DEBUG, logged once the batch's metrics are merged): when, its duration
    (ms) and the elements fanned out so far (Beam counter)."""

    TOOK = re.compile(r"Streaming batch \d+ took (\d+) ms")

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.batches, self.result = [], None

    def emit(self, record):
        m = self.TOOK.match(record.getMessage())
        if m:
            fanned = None
            if self.result is not None:
                fanned = sum(c.committed for c in _counters(self.result) if c.key.metric.name == "fanned")
            self.batches.append((time.perf_counter(), int(m.group(1)), fanned))


def _counters(result):
    return result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))["counters"]


_COORD = {"pre_commit": [], "committed": [], "release": []}


def _timed(name, fn):
    @functools.wraps(fn)
    def wrapper(*a, **kw):
        t = time.perf_counter()
        try:
            return fn(*a, **kw)
        finally:
            _COORD[name].append(time.perf_counter() - t)

    return wrapper


def instrument_coordinator():
    """Times the driver's coordinator calls in the Spark runs (the runner
    binds `streaming_commits.release` when a run starts)."""
    from beam_spark_runner.execution import streaming_commits
    from beam_spark_runner.streaming.checkpoint_coordinator import CheckpointCoordinator

    CheckpointCoordinator.pre_commit = _timed("pre_commit", CheckpointCoordinator.pre_commit)
    CheckpointCoordinator.committed = _timed("committed", CheckpointCoordinator.committed)
    streaming_commits.release = _timed("release", streaming_commits.release)


# -- sink throughput ------------------------------------------------------------------


def start_session():
    return start_runner_session(
        MASTER,
        "beam-spark-checkpointing-benchmark",
        **{
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": str(PARTITIONS),
            "spark.default.parallelism": str(PARTITIONS),
        },
    )


def check_published(out_dir, size):
    """Problems with the sink's published files (empty: none)."""
    elements, panes = expected(size)
    lines, total, seen = 0, 0, set()
    for path in glob.glob(os.path.join(out_dir, "counts*")):
        with open(path) as f:
            for line in f:
                key, count = line.split(",")
                seen.add((os.path.basename(path), key))
                lines, total = lines + 1, total + int(count)
    problems = []
    if lines != panes or len(seen) != lines:
        problems.append("%d lines (%d distinct window/key), expected %d" % (lines, len(seen), panes))
    if total != elements:
        problems.append("counts sum to %d, expected %d" % (total, elements))
    staged = [n for n in os.listdir(out_dir) if n.startswith("beam-temp-")]
    if staged:
        problems.append("staged files left: %s" % staged)
    return problems


def run_pipeline(size, mode, label):
    out_dir = tempfile.mkdtemp(prefix="beam-spark-ckpt-bench-")
    log = _BatchLog()
    logger = logging.getLogger(STREAMING_LOGGER)
    logger.setLevel(logging.DEBUG)
    logger.addHandler(log)
    logger.propagate = False
    for calls in _COORD.values():
        calls.clear()
    try:
        options = ["--runner=beam_spark_runner.SparkRunner", "--streaming", "--parallelism=%d" % PARTITIONS]
        p = beam.Pipeline(options=PipelineOptions(options))
        build(p, size, out_dir, mode)
        cpu = CpuMeter().start()
        started = time.perf_counter()
        result = log.result = p.run()
        result.wait_until_finish()
        ended = time.perf_counter()
        wall = ended - started
        cpu = cpu.stop()
        counters = {c.key.metric.name: c.committed for c in _counters(result)}
        elements, panes = expected(size)
        problems = []
        if [counters.get(n) for n in ("panes", "counted", "fanned")] != [panes, elements, elements]:
            problems.append("counters %s, expected %d panes, %d elements" % (counters, panes, elements))
        if mode != "no_sink":
            problems.extend(check_published(out_dir, size))
    finally:
        logger.removeHandler(log)
        logger.propagate = True
        shutil.rmtree(out_dir, ignore_errors=True)
    # After the first batch (query start, Python workers): elements not yet
    # fanned out then / time from its end to the end of the run.
    first = log.batches[0] if log.batches else (None, None, None)
    steady = (elements - first[2]) / (ended - first[0]) if first[2] is not None and first[2] < elements else None
    run = {
        "variant": mode,
        "wall_s": wall,
        "elements_per_s": elements / wall,
        "steady_elements_per_s": steady,
        "own_cpu_s": cpu["own_cpu_s"],
        "other_cpu_s": cpu["other_cpu_s"],
        "batches_ms": [b[1] for b in log.batches],
        "coordinator_ms": {k: [round(v * 1000, 2) for v in calls] for k, calls in _COORD.items()},
        "problems": problems,
    }
    batches = run["batches_ms"]
    first_ms = batches[0] if batches else -1
    rest = ", median of the rest %d ms" % statistics.median(batches[1:]) if len(batches) > 1 else ""
    shown = (label, run["variant"], wall, elements / wall, _fmt(steady, "%.0f"), cpu["own_cpu_s"], cpu["other_cpu_s"])
    print(
        "  %-8s %-7s %5.1f s %7.0f elements/s (after batch 1: %s)  cpu own %4.1f s, other %4.1f s  " % shown
        + "%d batches: first %d ms%s" % (len(batches), first_ms, rest)
        + ("  PROBLEMS: " + "; ".join(problems) if problems else ""),
        flush=True,
    )
    if _COORD["committed"]:
        times = tuple(f(_COORD[k]) * 1000 for k in ("pre_commit", "committed", "release") for f in (_median, max))
        print(
            "           coordinator per batch, median / max ms: pre_commit %.1f / %.1f, committed %.1f / %.1f "
            "(of which release, i.e. publishing: %.1f / %.1f)" % times,
            flush=True,
        )
    return run


def _median(values):
    return statistics.median(values) if values else 0.0


VARIANTS = ("sink", "direct", "no_sink")


def sink_throughput(size):
    elements, panes = expected(size)
    shape = (elements, size["chunks"], size["fan"], size["per_batch"], KEYS, WINDOW_S, panes, size["reps"])
    print(
        "sink_throughput: %d elements (%d chunks x %d, %d chunks per micro-batch), %d keys, %d s windows, "
        "%d panes; a warm-up, then sink / direct / no_sink alternating x %d" % shape,
        flush=True,
    )
    warm = dict(size, chunks=size["per_batch"] * WINDOW_S)
    warm_up = run_pipeline(warm, "sink", "warm-up")
    runs = []
    for i in range(size["reps"]):
        for mode in VARIANTS:
            runs.append(run_pipeline(size, mode, "round %d" % (i + 1)))
    med = {
        (v, m): _median([r[m] for r in runs if r["variant"] == v and r[m] is not None])
        for v in VARIANTS
        for m in ("elements_per_s", "steady_elements_per_s", "own_cpu_s")
    }

    def ratio_of(metric, base):
        return med["sink", metric] / (med[base, metric] or float("nan"))

    ratio = ratio_of("elements_per_s", "direct")
    rounds = [runs[i : i + 3] for i in range(0, len(runs), 3)]
    per_round = [a["elements_per_s"] / b["elements_per_s"] for a, b, _ in rounds]
    print(
        "  median throughput: sink %.0f, direct %.0f, no_sink %.0f elements/s -> sink/direct %.3f, sink/no_sink %.3f"
        % (
            med["sink", "elements_per_s"],
            med["direct", "elements_per_s"],
            med["no_sink", "elements_per_s"],
            ratio,
            ratio_of("elements_per_s", "no_sink"),
        ),
        flush=True,
    )
    print("    sink/direct per round: %s" % ", ".join("%.3f" % r for r in per_round), flush=True)
    print(
        "    after batch 1 (query start excluded): sink/direct %.3f, sink/no_sink %.3f"
        % (ratio_of("steady_elements_per_s", "direct"), ratio_of("steady_elements_per_s", "no_sink")),
        flush=True,
    )
    print(
        "    CPU of this process tree: sink %.1f s, direct %.1f s, no_sink %.1f s"
        % tuple(med[v, "own_cpu_s"] for v in VARIANTS),
        flush=True,
    )
    problems = [p for r in runs + [warm_up] for p in r["problems"]]
    return {
        "ratio": ratio,
        "ratio_vs_no_sink": ratio_of("elements_per_s", "no_sink"),
        "round_ratios": per_round,
        "runs": runs,
        "warm_up": warm_up,
    }, problems


# -- coordinator alone ------------------------------------------------------------------


class LocalStore:
    """The coordinator's store interface over a local directory."""

    def __init__(self, root):
        self.root = root

    def read(self, path):
        full = os.path.join(self.root, path)
        return open(full, "rb").read() if os.path.exists(full) else None

    def write(self, path, data):
        full = os.path.join(self.root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full + ".tmp", "wb") as f:
            f.write(data)
        os.replace(full + ".tmp", full)

    def list(self, path):
        full = os.path.join(self.root, path)
        return sorted(os.listdir(full)) if os.path.isdir(full) else []

    def delete(self, path):
        if os.path.exists(os.path.join(self.root, path)):
            os.remove(os.path.join(self.root, path))


def drive_coordinator(store, epochs):
    """Microseconds per epoch (begin + 8 acknowledgements + one side effect +
    pre_commit + committed) and the number of side effects released."""
    from beam_spark_runner.streaming.checkpoint_coordinator import CheckpointCoordinator
    from beam_spark_runner.streaming.checkpoint_records import SideEffects

    released = []
    coordinator = CheckpointCoordinator(store, released.append, lambda effects: None)
    coordinator.recover(None)
    expected_acks = {(op, "kg%d" % kg) for op in ("op1", "op2") for kg in range(4)}
    effect = SideEffects((os.urandom(300),))
    started = time.perf_counter()
    for epoch in range(epochs):
        pending = coordinator.begin(epoch, expected_acks)
        for who in expected_acks:
            pending.acknowledge(who)
        pending.add_side_effects(effect)
        coordinator.pre_commit(epoch, done=False)
        coordinator.committed(epoch)
    return (time.perf_counter() - started) / epochs * 1e6, len(released)


def coordinator_cost(spark, epochs):
    from beam_spark_runner.execution.checkpoint_files import CheckpointFiles, open_checkpoint_files

    stores = {
        "local_store": lambda root: LocalStore(root),
        # What the runner uses for a local checkpoint (Python's own calls).
        "runner_local": lambda root: open_checkpoint_files(spark, "file://" + root),
        # What it uses for any other URI (Hadoop through py4j), here on file:.
        "runner_hadoop": lambda root: CheckpointFiles(spark, "file://" + root),
    }
    out = {}
    for name, n in (("local_store", epochs), ("runner_local", epochs), ("runner_hadoop", max(50, epochs // 10))):
        root = tempfile.mkdtemp(prefix="beam-spark-coord-bench-")
        try:
            store = stores[name](root)
            us, released = drive_coordinator(store, n)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        out[name] = {"epochs": n, "us_per_epoch": us, "ok": released == n}
        what = "begin + 8 acks + 1 side effect + pre_commit + committed"
        wrong = "" if released == n else ", RELEASED ONLY %d" % released
        print("coordinator (%s): %d epochs, %.0f us per epoch (%s)%s" % (name, n, us, what, wrong), flush=True)
    return out


# -- restart to first output -------------------------------------------------------------


def _published(out):
    """Published files of sink_pipeline.py's two sinks (staged ones excluded)."""
    found = set()
    for sub in ("text", "files"):
        try:
            entries = os.scandir(os.path.join(out, sub))
        except FileNotFoundError:
            continue
        with entries:
            found.update(e.path for e in entries if e.is_file() and not e.name.startswith((".", "beam-temp-")))
    return found


def _first_new_output(out, checkpoint, start, stop, before, log_path, timeout_s=300):
    """Starts sink_pipeline.py; seconds until a published file not in
    `before` appears (None on timeout or exit), then kills its process group."""
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, SINK_PIPELINE, out, checkpoint, str(start), str(stop)],
            cwd=os.path.dirname(log_path),
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=log,
            env=dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p)),
        )
    started = time.perf_counter()
    try:
        while time.perf_counter() - started < timeout_s and proc.poll() is None:
            if _published(out) - before:
                return time.perf_counter() - started
            time.sleep(0.05)
        return None
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the driver and its Spark JVM
        except ProcessLookupError:
            pass
        proc.wait()


def restart_to_first_output(rounds):
    results = []
    for i in range(rounds):
        work = tempfile.mkdtemp(prefix="beam-spark-restart-bench-")
        out, checkpoint, log = (os.path.join(work, n) for n in ("out", "checkpoint", "driver.log"))
        start = int(time.time()) - 4  # the first batch has ticks of a couple of windows
        stop = start + 600
        cold = restart = None
        before = set()
        try:
            cold = _first_new_output(out, "file://" + checkpoint, start, stop, set(), log)
            before = _published(out)
            restart = _first_new_output(out, "file://" + checkpoint, start, stop, before, log) if cold else None
        finally:
            if cold is None or restart is None:
                with open(log, errors="replace") as f:
                    print("  driver log tail:\n" + f.read()[-3000:], flush=True)
            shutil.rmtree(work, ignore_errors=True)
        results.append({"cold_s": cold, "restart_s": restart, "published_before_restart": len(before)})
        print(
            "restart round %d: cold start -> first published file %s s; SIGKILL, restart on the same checkpoint "
            "-> first new published file %s s (%d files published before the kill)"
            % (i + 1, _fmt(cold), _fmt(restart), len(before)),
            flush=True,
        )
    cold = [r["cold_s"] for r in results if r["cold_s"] and r["restart_s"]]
    restart = [r["restart_s"] for r in results if r["cold_s"] and r["restart_s"]]
    ratio = statistics.median(restart) / statistics.median(cold) if cold else None
    medians = (_fmt(_median(cold)), _fmt(_median(restart)), _fmt(ratio, "%.3f"))
    print("restart: median cold %s s, restart %s s, restart/cold %s (informational)" % medians, flush=True)
    return {"rounds": results, "ratio": ratio}


def _fmt(value, spec="%.1f"):
    return "n/a" if value is None else spec % value


# -- main -----------------------------------------------------------------------------------


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="Tiny sizes: a smoke run of a few minutes.")
    parser.add_argument("--json", default=None, help="Also write the results to this JSON file.")
    for name, value in SIZES["full"].items():
        parser.add_argument(
            "--" + name, type=int, default=None, help="Default %d (--quick: %d)." % (value, SIZES["quick"][name])
        )
    args = parser.parse_args(argv)
    size = dict(SIZES["quick" if args.quick else "full"])
    size.update({k: getattr(args, k) for k in size if getattr(args, k) is not None})

    logging.getLogger().setLevel(logging.WARNING)
    started = time.perf_counter()
    spark = start_session()
    session_s = time.perf_counter() - started
    print("SparkSession (%s) start-up: %.1f s (excluded from every timing)" % (MASTER, session_s), flush=True)
    instrument_coordinator()

    sink, problems = sink_throughput(size)
    coordinator = coordinator_cost(spark, size["epochs"])
    problems += [name for name, c in coordinator.items() if not c["ok"]]
    spark.stop()
    restart = restart_to_first_output(size["restarts"])

    if args.json:
        out = {"size": size, "session_s": session_s, "sink_throughput": sink, "coordinator": coordinator}
        with open(args.json, "w") as f:
            json.dump(dict(out, restart=restart, problems=problems), f, indent=2)
    if problems:
        print("results failed their checks: %s" % "; ".join(problems), flush=True)
    headline("checkpointing_sink_throughput", sink["ratio"], 0.9, at_most=False, results_ok=not problems)
    return 0


if __name__ == "__main__":
    sys.exit(main())
