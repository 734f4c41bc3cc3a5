"""--phases of benchmarks/batch_wordcount.py: each Spark variant's job timed
as prefixes (read; read+split; read+split+count; the full job), and the
table of each part's increment in wall and CPU time."""

import os
import shutil
import time

from wordcount_beam import _beam_phase, run_beam
from wordcount_config import MASTER
from wordcount_pyspark import _pyspark_phase, run_pyspark


# Each phase is a prefix of the word count, ending in a cheap global aggregate
# instead of the write; differences between phases give each part's cost.
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
