"""--profile of benchmarks/batch_wordcount.py: the Spark stages of a run
(from the UI's REST API: stage_breakdown, print_stages, which the timed runs
also print), and profile_main, which re-runs both Spark variants under
PySpark's worker profiler and prints the top functions."""

import json
import os
import shutil
import sys
import time

from wordcount_beam import run_beam
from wordcount_config import MASTER, REPO_ROOT
from wordcount_pyspark import run_pyspark, start_session


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
