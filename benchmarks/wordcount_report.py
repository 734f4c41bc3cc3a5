"""The results of benchmarks/batch_wordcount.py: the versions it ran with,
each variant's runs summed up (median wall and CPU time, peak memory), the
check of every output against the generated counts, the results table and
the ratios of SparkRunner to the other variants."""

import collections
import os
import platform
import subprocess

from wordcount_config import MASTER
from wordcount_profile import print_stages


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
