"""Batch word count: SparkRunner vs hand-written PySpark vs Beam's DirectRunner.

    .venv/bin/python benchmarks/batch_wordcount.py                 # 1M lines, ~10M words
    .venv/bin/python benchmarks/batch_wordcount.py --lines 20000   # smoke run
    .venv/bin/python benchmarks/batch_wordcount.py --phases        # + time read / split / count / write
    .venv/bin/python benchmarks/batch_wordcount.py --lines 200000 --profile  # + cProfile of the workers

Generates a deterministic (seeded) text file, then in ONE process times the
same word count (read, split, count per word, write `word: count`) three ways:

  spark_runner  examples/wordcount.build, --runner=beam_spark_runner.SparkRunner
  pyspark       the same job hand-written with RDDs and Python lambdas
  direct        examples/wordcount.build, --runner=DirectRunner

spark_runner and pyspark share one SparkSession (master local[2]) created up
front, so JVM start-up is excluded from both (it is reported separately).
All three outputs are parsed and compared with each other and with the counts
known from generation; the exit status is 1 if any differs.

Memory: a sampler process (forked before the JVM, so it takes no GIL time from
the driver) polls /proc every 0.1 s and keeps, per variant, the peak RSS of
the driver Python process, of the Spark JVM, and of the sum over the PySpark
Python worker processes (daemon + workers). The driver's and JVM's peaks are
exact (VmHWM, reset through /proc/PID/clear_refs before each variant when
permitted); the Python workers' sum is sampled. The sampler also adds up the
CPU time of this process tree and of every other process, per variant: on a
shared machine the CPU ratio is the steadier number, and "other CPU s" says
how noisy the wall times are. Results are in docs/performance.md.
"""

import argparse
import collections
import glob
import importlib.util
import json
import multiprocessing
import operator
import os
import platform
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

from headline import headline  # benchmarks/ is the script's directory
from procstat import process_table

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES_DIR = os.path.join(REPO_ROOT, "examples")
MASTER = "local[2]"
PARTITIONS = 2  # shuffle partitions of both Spark variants (= cores of local[2])

# The tokenizer of examples/wordcount.py; the generated text is lowercase
# ASCII words separated by single spaces, so it agrees with str.split().
WORD_RE = re.compile(r"[\w\']+", re.UNICODE)


# -- input ------------------------------------------------------------------


def _vocabulary(rng, size):
    """`size` distinct lowercase words of 2-10 letters."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    words, seen = [], set()
    while len(words) < size:
        w = "".join(rng.choice(letters) for _ in range(rng.randint(2, 10)))
        if w not in seen:
            seen.add(w)
            words.append(w)
    return words


def generate_input(path, lines, words_per_line, vocabulary_size, seed):
    """Writes `lines` lines of 1..2*words_per_line-1 words (mean words_per_line),
    words drawn Zipf-like (weight 1/rank) from a fixed vocabulary. Returns the
    true Counter of words."""
    rng = random.Random(seed)
    vocab = _vocabulary(rng, vocabulary_size)
    cum, total = [], 0.0
    for rank in range(1, len(vocab) + 1):
        total += 1.0 / rank
        cum.append(total)
    counts = collections.Counter()
    chunk = 10000
    with open(path, "w") as f:
        for start in range(0, lines, chunk):
            n = min(chunk, lines - start)
            lengths = [rng.randint(1, 2 * words_per_line - 1) for _ in range(n)]
            words = rng.choices(vocab, cum_weights=cum, k=sum(lengths))
            counts.update(words)
            out, pos = [], 0
            for length in lengths:
                out.append(" ".join(words[pos : pos + length]))
                pos += length
            f.write("\n".join(out))
            f.write("\n")
    return counts


def parse_counts(pattern):
    """Parses `word: count` lines of all files matching pattern."""
    counts = {}
    paths = [
        p for p in sorted(glob.glob(pattern)) if os.path.isfile(p) and not os.path.basename(p).startswith((".", "_"))
    ]
    for path in paths:
        with open(path) as f:
            for line in f:
                word, sep, count = line.rstrip("\n").rpartition(": ")
                if not sep:
                    raise ValueError("%s: malformed line %r" % (path, line))
                if word in counts:
                    raise ValueError("%s: word %r written twice" % (path, word))
                counts[word] = int(count)
    return counts, len(paths)


# -- memory sampling (separate process) --------------------------------------


def _read_status(pid):
    fields = {}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM", "PPid"):
                    fields[key] = int(value.split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return fields


def _cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def _descendants(root, exclude, table=None):
    children = collections.defaultdict(list)
    for pid, (ppid, _) in (table if table is not None else process_table()).items():
        children[ppid].append(pid)
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        for child in children.get(pid, ()):
            if child not in exclude:
                out.append(child)
                todo.append(child)
    return out


def _sampler_main(driver_pid, conn, interval):
    """Answers 'reset' and 'peaks' on conn; samples RSS (kB) in between."""
    me = os.getpid()
    peaks = collections.Counter()
    ticks = os.sysconf("SC_CLK_TCK")
    last_cpu = {}  # pid -> cpu ticks at the previous sample, for processes not ours
    primed = []

    def sample():
        table = process_table()
        ours = set(_descendants(driver_pid, {me}, table))
        # CPU used by processes outside the benchmark: a noisy neighbour.
        foreign = own = 0
        for pid, (_, cpu) in table.items():
            if pid == me:
                continue
            if primed:  # a process new since the last sample counts in full
                delta = max(0, cpu - last_cpu.get(pid, 0))
                if pid in ours or pid == driver_pid:
                    own += delta
                else:
                    foreign += delta
            last_cpu[pid] = cpu
        primed.append(True) if not primed else None
        peaks["foreign_cpu_s"] += foreign / float(ticks)
        peaks["own_cpu_s"] += own / float(ticks)
        jvm = workers = 0
        for pid in ours:
            status = _read_status(pid)
            if not status or "VmRSS" not in status:
                continue
            cmd = _cmdline(pid)
            exe = os.path.basename(cmd[0]).decode(errors="replace") if cmd and cmd[0] else ""
            if exe == "java":
                jvm += status["VmRSS"]
            elif exe.startswith("python") or any(b"pyspark" in c for c in cmd):
                workers += status["VmRSS"]
        driver = (_read_status(driver_pid) or {}).get("VmRSS", 0)
        for key, value in (("driver", driver), ("jvm", jvm), ("workers", workers), ("total", driver + jvm + workers)):
            peaks[key] = max(peaks[key], value)

    while True:
        if conn.poll(interval):
            cmd = conn.recv()
            if cmd == "stop":
                return
            sample()
            if cmd == "reset":
                peaks.clear()
                peaks["foreign_cpu_s"] = peaks["own_cpu_s"] = 0.0
                conn.send(None)
            elif cmd == "peaks":
                conn.send(dict(peaks))
        else:
            sample()


class MemoryMonitor:
    def __init__(self, interval=0.1):
        ctx = multiprocessing.get_context("fork")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_sampler_main, args=(os.getpid(), child, interval), daemon=True)
        self._proc.start()
        self.hwm_reset_ok = None

    def _jvm_pids(self):
        return [
            pid
            for pid in _descendants(os.getpid(), {self._proc.pid})
            if _cmdline(pid)[:1] and os.path.basename(_cmdline(pid)[0]) == b"java"
        ]

    def reset(self):
        """Starts a new measurement; resets the kernel's peak RSS where allowed."""
        ok = True
        for pid in [os.getpid()] + self._jvm_pids():
            try:
                with open("/proc/%d/clear_refs" % pid, "w") as f:
                    f.write("5")
            except OSError:
                ok = False
        self.hwm_reset_ok = ok if self.hwm_reset_ok is None else (self.hwm_reset_ok and ok)
        self._conn.send("reset")
        self._conn.recv()

    def peaks(self):
        """Peaks (MiB) since reset: sampled, raised to VmHWM where exact."""
        self._conn.send("peaks")
        kb = self._conn.recv()
        if self.hwm_reset_ok:
            kb["driver"] = max(kb.get("driver", 0), (_read_status(os.getpid()) or {}).get("VmHWM", 0))
            jvm_hwm = sum((_read_status(p) or {}).get("VmHWM", 0) for p in self._jvm_pids())
            kb["jvm"] = max(kb.get("jvm", 0), jvm_hwm)
        cpu = {k: kb.pop(k, 0.0) for k in ("foreign_cpu_s", "own_cpu_s")}
        out = {k: v / 1024.0 for k, v in kb.items()}
        out.update(cpu)
        return out

    def stop(self):
        try:
            self._conn.send("stop")
        except OSError:
            pass
        self._proc.join(5)


# -- the three variants ------------------------------------------------------


def _wordcount_module():
    if EXAMPLES_DIR not in sys.path:
        sys.path.insert(0, EXAMPLES_DIR)
    spec = importlib.util.spec_from_file_location("wordcount", os.path.join(EXAMPLES_DIR, "wordcount.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules["wordcount"] = module
    spec.loader.exec_module(module)
    return module


def run_beam(runner_args, input_path, output_prefix):
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    wordcount = _wordcount_module()
    p = beam.Pipeline(options=PipelineOptions(runner_args))
    wordcount.build(p, input_path, output_prefix)
    result = p.run()
    state = result.wait_until_finish()
    if str(state) not in ("DONE", "PipelineState.DONE"):
        raise RuntimeError("pipeline finished in state %s" % state)


def _tokenize(line):
    # Character for character the call examples/wordcount.py makes (re's
    # pattern cache lookup included), so both variants run the same user code.
    return re.findall(r"[\w\']+", line, re.UNICODE)


def _format(pair):
    return "%s: %d" % pair


def run_pyspark(sc, input_path, output_dir, tokenizer):
    split = _tokenize if tokenizer == "regex" else str.split
    (
        sc.textFile(input_path)
        .flatMap(lambda line: split(line))
        .map(lambda word: (word, 1))
        .reduceByKey(operator.add, PARTITIONS)
        .map(_format)
        .saveAsTextFile(output_dir)
    )


# -- phase timing (--phases) ---------------------------------------------------
# Each phase is a prefix of the word count, ending in a cheap global aggregate
# instead of the write; differences between phases give each part's cost.


def _beam_phase(runner_args, input_path, phase):
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    p = beam.Pipeline(options=PipelineOptions(runner_args))
    lines = p | "Read" >> beam.io.ReadFromText(input_path)
    if phase == "read":
        tail = lines | "Len" >> beam.Map(len)
    elif phase == "split":
        tail = lines | "Split" >> beam.FlatMap(_tokenize) | "Len" >> beam.Map(len)
    else:  # count: everything but formatting and writing
        tail = (
            lines
            | "Split" >> beam.FlatMap(_tokenize)
            | "PairWithOne" >> beam.Map(lambda w: (w, 1))
            | "Count" >> beam.CombinePerKey(sum)
            | "Values" >> beam.Values()
        )
    tail | "Sum" >> beam.CombineGlobally(sum) | "Drop" >> beam.Filter(lambda x: False)
    p.run().wait_until_finish()


def _pyspark_phase(sc, input_path, phase):
    lines = sc.textFile(input_path)
    if phase == "read":
        return lines.map(len).sum()
    if phase == "split":
        return lines.flatMap(_tokenize).map(len).sum()
    return lines.flatMap(_tokenize).map(lambda w: (w, 1)).reduceByKey(operator.add, PARTITIONS).values().sum()


PHASES = ("read", "split", "count", "full")


def time_phases(sc, input_path, repeat, work, monitor):
    """{variant: {phase: median wall s}} for read / read+split / read+split+count /
    the full job (again, so that all phases run on equally warm workers)."""
    out = {"spark_runner": {}, "pyspark": {}}
    cpu = {"spark_runner": {}, "pyspark": {}}
    for phase in PHASES:
        for variant in out:
            walls, cpus = [], []
            for _ in range(repeat):
                out_dir = os.path.join(work, "phase_out")
                shutil.rmtree(out_dir, ignore_errors=True)
                monitor.reset()
                t0 = time.perf_counter()
                if phase == "full" and variant == "pyspark":
                    run_pyspark(sc, input_path, out_dir, "regex")
                elif phase == "full":
                    run_beam(
                        ["--runner=beam_spark_runner.SparkRunner", "--spark_master=" + MASTER],
                        input_path,
                        out_dir + "/counts",
                    )
                elif variant == "pyspark":
                    _pyspark_phase(sc, input_path, phase)
                else:
                    _beam_phase(
                        ["--runner=beam_spark_runner.SparkRunner", "--spark_master=" + MASTER], input_path, phase
                    )
                walls.append(time.perf_counter() - t0)
                cpus.append(monitor.peaks()["own_cpu_s"])
            out[variant][phase] = sorted(walls)[len(walls) // 2]
            cpu[variant][phase] = sorted(cpus)[len(cpus) // 2]
            print("  phase %-6s %-13s %6.1f s %6.1f CPU s" % (phase, variant, out[variant][phase], cpu[variant][phase]))
    return {"wall_s": out, "cpu_s": cpu}


def print_phases(phases):
    print(
        "\nPhases: prefixes of the job, each ending in a global sum, run after the timed runs "
        "on warm workers; columns are increments (read, +split, +count per word, +format and "
        "write), in wall s and in CPU s of the whole process tree:"
    )
    print("%-13s %-6s %8s %8s %8s %8s %8s" % ("variant", "", "read", "+split", "+count", "+write", "full"))
    for metric in ("wall_s", "cpu_s"):
        for variant, t in phases[metric].items():
            print(
                "%-13s %-6s %8.1f %8.1f %8.1f %8.1f %8.1f"
                % (
                    variant,
                    metric[:-2],
                    t["read"],
                    t["split"] - t["read"],
                    t["count"] - t["split"],
                    t["full"] - t["count"],
                    t["full"],
                )
            )


def start_session(extra_conf=None):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("PYTHONHASHSEED", "0")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Workers import examples/wordcount.py by name if a pickle refers to it.
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (EXAMPLES_DIR, REPO_ROOT, os.environ.get("PYTHONPATH")) if p)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(MASTER)
        .appName("batch-wordcount-benchmark")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.default.parallelism", str(PARTITIONS))
        .config("spark.sql.shuffle.partitions", str(PARTITIONS))
        .config("spark.driver.memory", "2g")
        .config("spark.executorEnv.PYTHONHASHSEED", "0")
        .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
    )
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


# -- profiling (--profile) ---------------------------------------------------


def stage_breakdown(sc, since_stage_id=-1):
    """Per Spark stage of this app (from the UI's REST API): name, tasks,
    executor run time, shuffle bytes. Empty if the UI is off."""
    import urllib.request

    url = sc.uiWebUrl
    if not url:
        return []
    try:
        with urllib.request.urlopen(
            "%s/api/v1/applications/%s/stages?status=complete" % (url, sc.applicationId), timeout=10
        ) as r:
            stages = json.loads(r.read().decode())
    except OSError:
        return []
    rows = []
    for s in sorted(stages, key=lambda s: s["stageId"]):
        if s["stageId"] <= since_stage_id:
            continue
        rows.append(
            {
                "stage": s["stageId"],
                "name": s.get("name", "")[:60],
                "tasks": s.get("numTasks"),
                "run_s": s.get("executorRunTime", 0) / 1000.0,
                "input_mb": s.get("inputBytes", 0) / 2**20,
                "shuffle_write_mb": s.get("shuffleWriteBytes", 0) / 2**20,
                "shuffle_read_mb": s.get("shuffleReadBytes", 0) / 2**20,
                "shuffle_records": s.get("shuffleWriteRecords", 0),
            }
        )
    return rows


def max_stage_id(sc):
    rows = stage_breakdown(sc)
    return max((r["stage"] for r in rows), default=-1)


def print_stages(title, rows):
    print("\n%s" % title)
    print(
        "  %5s  %-60s %5s %8s %8s %9s %9s %10s"
        % ("stage", "name (call site)", "tasks", "task s", "in MB", "shufR MB", "shufW MB", "shufW recs")
    )
    for r in rows:
        print(
            "  %5d  %-60s %5s %8.2f %8.1f %9.1f %9.1f %10d"
            % (
                r["stage"],
                r["name"],
                r["tasks"],
                r["run_s"],
                r["input_mb"],
                r["shuffle_read_mb"],
                r["shuffle_write_mb"],
                r["shuffle_records"],
            )
        )
    print("  (task s = executorRunTime summed over the stage's tasks)")


def profile_main(args, input_path, work):
    """Re-runs spark_runner and pyspark with PySpark's worker profiler
    (cProfile around every RDD's Python functions in the workers) and prints
    the Spark stages and the top functions. Slower than the timed runs."""
    import io

    spark = start_session({"spark.python.profile": "true"})
    sc = spark.sparkContext
    results = {}
    for name in ("spark_runner", "pyspark"):
        before = max_stage_id(sc)
        out = os.path.join(work, "profile_" + name)
        shutil.rmtree(out, ignore_errors=True)
        if name == "spark_runner":
            t0 = time.perf_counter()
            run_beam(
                ["--runner=beam_spark_runner.SparkRunner", "--spark_master=" + MASTER], input_path, out + "/counts"
            )
        else:
            t0 = time.perf_counter()
            run_pyspark(sc, input_path, out, args.pyspark_tokenizer)
        wall = time.perf_counter() - t0
        rows = stage_breakdown(sc, before)
        print_stages("%s (profiled, wall %.1f s): Spark stages" % (name, wall), rows)
        combined = None
        per_rdd = []
        for entry in sc.profiler_collector.profilers:  # [rdd id, profiler, shown]
            st = entry[1].stats() if entry[1] else None
            if st is None:
                continue
            per_rdd.append((st.total_tt, entry[0], st))
        for total, rdd_id, st in sorted(per_rdd, key=lambda t: -t[0]):
            if total < 0.05 * sum(t[0] for t in per_rdd):
                continue
            buf = io.StringIO()
            st.stream = buf
            st.sort_stats("tottime").print_stats(12)
            print("\n%s: Python RDD %s, %.1f s profiled; top 12 by tottime" % (name, rdd_id, total))
            print(_trim_pstats(buf.getvalue()))
        for _, _, st in per_rdd:
            if combined is None:
                combined = st
            else:
                combined.add(st)
        sc.profiler_collector.profilers = []  # also keeps PySpark from printing them at exit
        if combined is not None:
            for order in ("tottime", "cumulative"):
                buf = io.StringIO()
                combined.stream = buf
                combined.sort_stats(order).print_stats(args.profile_top)
                print(
                    "\n%s: top %d functions by %s in Python workers (all tasks summed)"
                    % (name, args.profile_top, order)
                )
                print(_trim_pstats(buf.getvalue()))
        results[name] = {"wall_s": wall, "stages": rows}
    spark.stop()
    return results


def _trim_pstats(text):
    lines = text.splitlines()
    start = next((i for i, l in enumerate(lines) if "ncalls" in l), 0)
    head = [l for l in lines[:start] if "function calls" in l]
    return "\n".join(head + lines[start:]).replace(sys.prefix, "<venv>").replace(REPO_ROOT, "<repo>")


# -- main --------------------------------------------------------------------


def _versions():
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()
    import apache_beam
    import pyspark

    return {
        "python": platform.python_version(),
        "java": java[0] if java else "?",
        "apache_beam": apache_beam.__version__,
        "pyspark": pyspark.__version__,
        "nproc": os.cpu_count(),
        "platform": platform.platform(),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--words_per_line", type=int, default=10, help="Mean words per line.")
    parser.add_argument("--vocabulary", type=int, default=50_000, help="Distinct words.")
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument(
        "--work_dir", default=None, help="Where input and outputs go (default: a new temp dir, removed after)."
    )
    parser.add_argument("--keep", action="store_true", help="Keep the work dir.")
    parser.add_argument(
        "--skip", action="append", default=[], choices=["spark_runner", "pyspark", "direct"], help="Skip a variant."
    )
    parser.add_argument(
        "--plain_daemon",
        action="store_true",
        help="Use PySpark's own worker daemon: Beam is then imported by the "
        "first Beam task in each worker, inside the timed run.",
    )
    parser.add_argument(
        "--pyspark_tokenizer",
        choices=["regex", "split"],
        default="regex",
        help="regex: the exact tokenizer of examples/wordcount.py (same job); "
        "split: str.split (same result on the generated text).",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="Run each variant N times (interleaved); the table shows the median "
        "wall time (and the min) and the max peak RSS.",
    )
    parser.add_argument("--json", default=None, help="Also write the results to this JSON file.")
    parser.add_argument(
        "--phases",
        action="store_true",
        help="Also time prefixes of the job (read; read+split; read+split+count) "
        "on both Spark variants, to see where the time goes.",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="After the timed runs, re-run both Spark variants in a separate "
        "process with PySpark's worker profiler and print a breakdown.",
    )
    parser.add_argument("--profile_only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--profile_top", type=int, default=25)
    args = parser.parse_args(argv)

    work = args.work_dir or tempfile.mkdtemp(prefix="beam-spark-wc-bench-")
    os.makedirs(work, exist_ok=True)
    input_path = os.path.join(work, "input.txt")
    try:
        if args.profile_only:
            profile_main(args, input_path, work)
            return 0
        return _benchmark(args, work, input_path)
    finally:
        if not args.keep and not args.work_dir and not args.profile_only:
            shutil.rmtree(work, ignore_errors=True)


VARIANT_NAMES = ("pyspark", "spark_runner", "direct")  # run in this order in every repetition


def _benchmark(args, work, input_path):
    """The timed runs, their check against the generated counts and the report;
    returns the exit status (1 if any variant's output differs)."""
    monitor = MemoryMonitor()  # fork before anything starts threads or a JVM
    print("work dir: %s" % work)
    truth = _generate(args, input_path)
    versions = _versions()
    spark, session_s = _start_shared_session(args)
    sc = spark.sparkContext
    variants = _variants(args)
    runs, outputs = _run_repetitions(args, sc, monitor, work, input_path, variants)
    results = _summarize_runs(runs, variants)
    _print_fastest_stages(results)
    phases = None
    if args.phases:
        print("\ntiming phases (%d run(s) each, median)" % args.repeat)
        phases = time_phases(sc, input_path, args.repeat, work, monitor)
    driver_maxrss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    spark.stop()
    monitor.stop()

    ok = _verify_outputs(outputs, truth)
    _print_results_table(args, truth, versions, session_s, results, monitor.hwm_reset_ok, driver_maxrss_mib)
    ratios = _print_ratios(results)
    if phases:
        print_phases(phases)
    if args.profile:
        _run_profile_process(args, work)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "lines": args.lines,
                    "words": sum(truth.values()),
                    "distinct": len(truth),
                    "input_mb": os.path.getsize(input_path) / 2**20,
                    "master": MASTER,
                    "versions": versions,
                    "session_startup_s": session_s,
                    "driver_ru_maxrss_mib": driver_maxrss_mib,
                    "results": results,
                    "ratios": ratios,
                    "outputs_identical": ok,
                    "phases": phases,
                },
                f,
                indent=2,
            )
    headline("batch_wordcount", ratios.get("spark_runner_over_pyspark"), 1.10, at_most=True, results_ok=ok)
    return 0 if ok else 1


def _generate(args, input_path):
    """Writes the input file; returns the true Counter of its words."""
    t0 = time.perf_counter()
    truth = generate_input(input_path, args.lines, args.words_per_line, args.vocabulary, args.seed)
    print(
        "generated %d lines, %d words, %d distinct, %.1f MB in %.1f s"
        % (args.lines, sum(truth.values()), len(truth), os.path.getsize(input_path) / 2**20, time.perf_counter() - t0)
    )
    return truth


def _start_shared_session(args):
    """The SparkSession both Spark variants share, its Python workers started;
    returns (spark, start-up seconds)."""
    t0 = time.perf_counter()
    # The session SparkRunner would create: its Python worker daemon imports
    # Beam before forking workers (beam_spark_runner.session), which the
    # warm-up job below starts. Both variants share these workers.
    from beam_spark_runner.session import runner_spark_conf

    spark = start_session(
        {} if args.plain_daemon else {"spark.python.daemon.module": runner_spark_conf()["spark.python.daemon.module"]}
    )
    sc = spark.sparkContext
    sc.parallelize(range(PARTITIONS), PARTITIONS).map(lambda x: x).count()  # start Python workers
    session_s = time.perf_counter() - t0
    print("SparkSession (%s) start-up incl. a first trivial job: %.1f s" % (MASTER, session_s))
    return spark, session_s


def _variants(args):
    """[(name, label)] in the order each repetition runs them."""
    labels = {
        "pyspark": "hand-written PySpark RDDs (%s tokenizer)" % args.pyspark_tokenizer,
        "spark_runner": "Beam on SparkRunner",
        "direct": "Beam on DirectRunner",
    }
    return [(name, labels[name]) for name in VARIANT_NAMES]


def _run_repetitions(args, sc, monitor, work, input_path, variants):
    """--repeat rounds of every variant not skipped, interleaved; returns
    ({name: [run dict per repetition]}, {"name (run i)": word counts})."""
    runs = collections.defaultdict(list)  # name -> one dict per repetition
    outputs = {}
    for rep in range(args.repeat):
        for name, _ in variants:
            if name in args.skip:
                continue
            run, counts = _run_variant(args, sc, monitor, work, input_path, name, rep)
            outputs["%s (run %d)" % (name, rep + 1)] = counts
            runs[name].append(run)
            print(
                "  run %d %-13s %7.1f s  %7.1f CPU s  (%d output files; other processes used "
                "%.1f CPU s meanwhile)"
                % (rep + 1, name, run["wall_s"], run["cpu_s"], run["files"], run["foreign_cpu_s"])
            )
    return runs, outputs


def _run_variant(args, sc, monitor, work, input_path, name, rep):
    """One timed run of one variant; returns (its measurements, its parsed output)."""
    out = os.path.join(work, "out_%s_%d" % (name, rep))
    stages_before = max_stage_id(sc) if name != "direct" else None
    monitor.reset()
    t0 = time.perf_counter()
    if name == "spark_runner":
        run_beam(["--runner=beam_spark_runner.SparkRunner", "--spark_master=" + MASTER], input_path, out + "/counts")
        pattern = out + "/counts-*"
    elif name == "pyspark":
        run_pyspark(sc, input_path, out, args.pyspark_tokenizer)
        pattern = out + "/part-*"
    else:
        run_beam(["--runner=DirectRunner"], input_path, out + "/counts")
        pattern = out + "/counts-*"
    wall = time.perf_counter() - t0
    mem = monitor.peaks()
    counts, files = parse_counts(pattern)
    shutil.rmtree(out, ignore_errors=True)
    foreign = mem.pop("foreign_cpu_s")
    own = mem.pop("own_cpu_s")
    run = dict(
        wall_s=wall, files=files, foreign_cpu_s=foreign, cpu_s=own, **{"peak_%s_mib" % k: v for k, v in mem.items()}
    )
    if name != "direct":
        time.sleep(1)  # let Spark's status listener catch up (outside the timing)
        run["spark_stages"] = stage_breakdown(sc, stages_before)
    return run, counts


def _summarize_runs(runs, variants):
    """{name: the fastest run's record with the median wall and CPU time, the
    minimum wall time, every run's wall time and the maximum peaks}."""
    results = collections.OrderedDict()
    for name, label in variants:
        if runs.get(name):
            walls = sorted(r["wall_s"] for r in runs[name])
            median = (
                walls[len(walls) // 2] if len(walls) % 2 else sum(walls[len(walls) // 2 - 1 : len(walls) // 2 + 1]) / 2
            )
            best = min(runs[name], key=lambda r: r["wall_s"])
            cpus = sorted(r["cpu_s"] for r in runs[name])
            results[name] = dict(
                best,
                label=label,
                wall_s=median,
                wall_min_s=walls[0],
                cpu_s=cpus[len(cpus) // 2],
                wall_runs_s=[r["wall_s"] for r in runs[name]],
                foreign_cpu_s=max(r["foreign_cpu_s"] for r in runs[name]),
                **{k: max(r[k] for r in runs[name]) for k in best if k.startswith("peak_")},
            )
    return results


def _print_fastest_stages(results):
    """The Spark stages of each Spark variant's fastest run."""
    for name, r in results.items():
        if r.get("spark_stages"):
            print_stages(
                "%s: Spark stages of its fastest run (%d, %.1f task s in all)"
                % (name, len(r["spark_stages"]), sum(x["run_s"] for x in r["spark_stages"])),
                r["spark_stages"],
            )


def _verify_outputs(outputs, truth):
    """Compares every run's word counts with the generated ones; prints each
    mismatch and the verdict; returns True if all are identical."""
    ok = True
    for name, counts in outputs.items():
        if counts != truth:
            ok = False
            missing = set(truth) - set(counts)
            extra = set(counts) - set(truth)
            wrong = [w for w in set(truth) & set(counts) if truth[w] != counts[w]]
            print(
                "MISMATCH %s: %d missing, %d extra, %d wrong counts (e.g. %s)"
                % (
                    name,
                    len(missing),
                    len(extra),
                    len(wrong),
                    sorted(missing)[:3] + sorted(extra)[:3] + sorted(wrong)[:3],
                )
            )
    print(
        "outputs %s: %s"
        % ("IDENTICAL" if ok else "DIFFER", ", ".join("%s %d words" % (n, len(c)) for n, c in outputs.items()))
    )
    return ok


def _print_results_table(args, truth, versions, session_s, results, hwm_reset_ok, driver_maxrss_mib):
    """The table of wall time, CPU time and peak memory per variant."""
    print(
        "\nBatch word count, %d lines / %d words, master %s, %s"
        % (
            args.lines,
            sum(truth.values()),
            MASTER,
            ", ".join("%s %s" % kv for kv in versions.items() if kv[0] != "platform"),
        )
    )
    print(
        "SparkSession start-up (excluded below): %.1f s; %d run(s) per variant, "
        "wall s = median" % (session_s, args.repeat)
    )
    print(
        "%-13s %9s %9s %9s %12s %12s %14s %12s %13s"
        % ("variant", "wall s", "min s", "CPU s", "driver MiB", "JVM MiB", "py-workers MiB", "total MiB", "other CPU s")
    )
    for name, r in results.items():
        print(
            "%-13s %9.1f %9.1f %9.1f %12.0f %12.0f %14.0f %12.0f %13.1f"
            % (
                name,
                r["wall_s"],
                r["wall_min_s"],
                r["cpu_s"],
                r.get("peak_driver_mib", 0),
                r.get("peak_jvm_mib", 0),
                r.get("peak_workers_mib", 0),
                r.get("peak_total_mib", 0),
                r["foreign_cpu_s"],
            )
        )
    print(
        "(CPU s = user+sys CPU time of the driver, JVM and Python workers, sampled at 10 Hz; "
        "peak RSS per variant: driver/JVM = VmHWM%s, py-workers = sampled sum of the PySpark "
        "daemon and workers, idle ones left by earlier variants included; driver ru_maxrss "
        "over the whole run: %.0f MiB; 'other CPU s' = CPU time of processes outside this "
        "benchmark during the variant: more than a few s means the wall times are noisy)"
        % ("" if hwm_reset_ok else " NOT reset between variants (sampled only)", driver_maxrss_mib)
    )


def _print_ratios(results):
    """Prints and returns the ratios of the variants measured (SparkRunner over the others)."""
    ratios = {}
    if "spark_runner" in results and "pyspark" in results:
        ratios["spark_runner_over_pyspark"] = results["spark_runner"]["wall_s"] / results["pyspark"]["wall_s"]
        print(
            "SparkRunner / hand-written PySpark: %.2fx (target <= 1.10x: %s)"
            % (ratios["spark_runner_over_pyspark"], "MET" if ratios["spark_runner_over_pyspark"] <= 1.10 else "NOT MET")
        )
    if "spark_runner" in results and "direct" in results:
        ratios["spark_runner_over_direct"] = results["spark_runner"]["wall_s"] / results["direct"]["wall_s"]
        print("SparkRunner / DirectRunner:         %.2fx" % ratios["spark_runner_over_direct"])
    if "spark_runner" in results and "pyspark" in results and results["pyspark"]["cpu_s"]:
        ratios["cpu_spark_runner_over_pyspark"] = results["spark_runner"]["cpu_s"] / results["pyspark"]["cpu_s"]
        print(
            "CPU time, SparkRunner / PySpark:    %.2fx (less sensitive to other load than wall time)"
            % ratios["cpu_spark_runner_over_pyspark"]
        )
    return ratios


def _run_profile_process(args, work):
    """--profile: re-runs both Spark variants under the worker profiler in a new process."""
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--profile_only",
        "--work_dir",
        work,
        "--pyspark_tokenizer",
        args.pyspark_tokenizer,
        "--profile_top",
        str(args.profile_top),
    ]
    print("\n=== profile run (separate process): %s" % " ".join(cmd))
    sys.stdout.flush()
    subprocess.run(cmd, check=False)


if __name__ == "__main__":
    sys.exit(main())
