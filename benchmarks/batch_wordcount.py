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

The code, in benchmarks/: this script parses the command line and makes
the timed runs; wordcount_config.py holds the shared settings,
wordcount_input.py the generated input and the parsing of outputs,
wordcount_memory.py the sampler, wordcount_pyspark.py the session and the
hand-written PySpark job, wordcount_beam.py the Beam job,
wordcount_phases.py --phases, wordcount_profile.py --profile and the
Spark stages, wordcount_report.py the checks and the tables.
"""

import argparse
import collections
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

# The sibling modules below are imported by their own names: benchmarks/ is
# the script's directory, and is put on the path when this module is
# imported as benchmarks.batch_wordcount.
BENCHMARKS_DIR = os.path.dirname(os.path.abspath(__file__))
if BENCHMARKS_DIR not in sys.path:
    sys.path.insert(0, BENCHMARKS_DIR)

from headline import headline  # noqa: E402
from wordcount_beam import run_beam  # noqa: E402
from wordcount_config import MASTER, PARTITIONS  # noqa: E402
from wordcount_input import generate_input, parse_counts  # noqa: E402
from wordcount_memory import MemoryMonitor  # noqa: E402
from wordcount_phases import print_phases, time_phases  # noqa: E402
from wordcount_profile import max_stage_id, profile_main, stage_breakdown  # noqa: E402
from wordcount_pyspark import run_pyspark, start_session  # noqa: E402
from wordcount_report import (  # noqa: E402
    _print_fastest_stages,
    _print_ratios,
    _print_results_table,
    _summarize_runs,
    _verify_outputs,
    _versions,
)


# -- main --------------------------------------------------------------------


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
