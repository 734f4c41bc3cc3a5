"""The report of benchmarks/streaming.py: every run's details and the table
of the benchmark's targets (PASS / MISS). Kept apart so the benchmark script
stays readable; the numbers it prints are defined in that script's
docstring."""

import statistics


def _fmt(value, spec="%.2f", unit=""):
    return "n/a" if value is None else (spec % value) + unit


def _verdict(ok):
    return "n/a" if ok is None else ("PASS" if ok else "MISS")


def report(args, query, session_s, warm, nt, nl, bt, bl, b3, b1=None, bp=None, n1=None, pf=None, rounds=(), pc=None):
    """Prints every run's details and the targets table; `query` describes the query.
    `rounds`: the throughput rounds, (Beam events/s, native rows/s, native
    rows per batch, ratio) each; the target is judged on their median ratio."""
    print("\n== Streaming benchmark: %s, --seconds %d" % (query, args.seconds))
    print(
        "SparkSession start-up %.1f s and warm-up runs %s (excluded)"
        % (session_s, ", ".join("%s %.1f s" % kv for kv in warm.items()))
    )
    _print_native_runs(nt, n1, pf)
    for run in (bt, bp, bl, b1, b3):
        if run:
            _print_beam_run(run)
    if nl:
        print(
            "native latency run: %d batches (%d with rows), %s rows/s offered by the rate source%s"
            % (nl["batches"], nl["data_batches"], _fmt(nl["rows_per_s"], "%.0f"), _cpu(nl))
        )
    ratios = _print_rounds(rounds)

    print("\n| measurement | native Spark | Beam on SparkRunner | ratio | target | |")
    print("|---|---:|---:|---:|---|---|")
    _print_throughput_targets(args, ratios, nt, bt, bp, n1, pf, pc)
    _print_latency_targets(args, nl, bl, b3, b1)


def _cpu(run):
    """The run's CPU use, as a suffix of its line ('' if not measured)."""
    c = run.get("cpu") if run else None
    return (
        ""
        if not c
        else "  [own CPU %.0f s, other processes' CPU %.0f s over %.0f s wall]"
        % (c["own_cpu_s"], c["other_cpu_s"], c["wall_s"])
    )


def _print_native_runs(nt, n1, pf):
    """The native throughput runs and python_floor."""
    for run in (nt, n1):
        if run:
            print(
                "native throughput: %d batches of %d rows after warm-up, %s rows/s; batch p50 %s p99 %s%s"
                % (
                    run["batches"],
                    run["rows_per_batch"],
                    _fmt(run["rows_per_s"], "%.0f"),
                    _fmt(run["batch_p50_s"], "%.2f", " s"),
                    _fmt(run["batch_p99_s"], "%.2f", " s"),
                    _cpu(run),
                )
            )
            check = run.get("counts_check")
            if check:
                print(
                    "    counts checked: the %d windows in the query's state hold exactly the %d rows "
                    "generated into them (%d windows evicted before); no row dropped"
                    % (check["windows"], check["rows"], check["evicted_windows"])
                )
    if pf:
        print(
            "python_floor: %d batches of %d events after warm-up, %s events/s; batch p50 %s%s"
            % (
                pf["batches"],
                pf["events_per_batch"],
                _fmt(pf["events_per_s"], "%.0f"),
                _fmt(pf["batch_p50_s"], "%.2f", " s"),
                _cpu(pf),
            )
        )


def _print_beam_run(run):
    """One Beam run: rates, batches, panes, where Spark says the time went, and its count check."""
    print(
        "%s: offered %.0f events/s for %s s; %d events in %.1f s wall (query start %.1f s, tail "
        "after the last tick %s); busy %s events/s, whole run %s events/s; %d batches, p50 %s "
        "p99 %s; kept up with the offered rate: %s; panes %s; sampled events %d/%d%s"
        % (
            run["label"],
            run["offered_per_s"],
            _fmt(run["gen_s"], "%.0f"),
            run["events"],
            run["wall_s"],
            run["first_batch_s"] or 0,
            _fmt(run["tail_s"], "%.1f", " s"),
            _fmt(run["events_per_s_busy"], "%.0f"),
            _fmt(run["events_per_s_run"], "%.0f"),
            run["batches"],
            _fmt(run["batch_p50_s"], "%.2f", " s"),
            _fmt(run["batch_p99_s"], "%.2f", " s"),
            "no (saturated)" if run["saturated"] else "yes",
            run["panes"],
            run["probes"],
            run["probes_total"],
            _cpu(run),
        )
    )
    if run.get("spark"):
        sp = run["spark"]
        print(
            "    Spark's progress, batches 2+: %.1f s in batches = addBatch %.1f + query planning %.1f + "
            "source offsets %.1f + WAL/commit %.1f; summed over the 2 tasks of each keyed operator "
            "(task time, not wall): %s"
            % (
                sp.get("triggerExecution", 0),
                sp.get("addBatch", 0),
                sp.get("queryPlanning", 0),
                sp.get("latestOffset", 0),
                sp.get("walCommit", 0) + sp.get("commitOffsets", 0),
                ", ".join("%s %.1f s" % (k, v) for k, v in sp.items() if ":" in k),
            )
        )
    if run["counted_events"] is not None:
        print(
            "    sum of the last pane's count over keys and windows: %d of %d events generated (%s)"
            % (
                run["counted_events"],
                run["events"],
                "complete" if run["counted_events"] == run["events"] else "MISMATCH",
            )
        )


def _print_rounds(rounds):
    """Prints the throughput rounds' ratios (if any); returns them."""
    ratios = [r[3] for r in rounds if r[3] is not None]
    if ratios:
        print(
            "throughput rounds (Beam then native, back to back): %s; median %.3fx, range %.3fx-%.3fx"
            % (
                ", ".join("%.0f / %.0f = %.3fx" % (r[0], r[1], r[3]) for r in rounds if r[3] is not None),
                statistics.median(ratios),
                min(ratios),
                max(ratios),
            )
        )
    return ratios


def _print_throughput_targets(args, ratios, nt, bt, bp, n1, pf, pc=None):
    """The table's throughput rows: the target (median of the rounds' ratios) and the comparisons beside it."""
    thr_ratio = statistics.median(ratios) if ratios else None
    print(
        "| sustained throughput, events/s (native at Beam's median batch size; ratio: median of %d "
        "rounds, first round's rates shown) | %s | %s%s | %s | >= 0.5x | %s |"
        % (
            len(ratios),
            _fmt(nt and nt["rows_per_s"], "%.0f"),
            _fmt(bt and bt["events_per_s_busy"], "%.0f"),
            "" if not bt or bt["saturated"] else " (not saturated: a lower bound)",
            _fmt(thr_ratio, "%.3f", "x"),
            _verdict(None if thr_ratio is None else thr_ratio >= 0.5),
        )
    )
    n1_ratio = (
        (bt["events_per_s_busy"] / n1["rows_per_s"])
        if bt and n1 and bt["events_per_s_busy"] and n1["rows_per_s"]
        else None
    )
    print(
        "| the same, native at 1M rows per batch | %s | %s | %s | | |"
        % (
            _fmt(n1 and n1["rows_per_s"], "%.0f"),
            _fmt(bt and bt["events_per_s_busy"], "%.0f"),
            _fmt(n1_ratio, "%.3f", "x"),
        )
    )
    pf_rate = pf and pf["events_per_s"]
    print(
        "| the Beam run's DoFn alone in PySpark, events dropped (python_floor; no SparkRunner, no count) "
        "| %s | %s | %s | | |"
        % (
            _fmt(nt and nt["rows_per_s"], "%.0f"),
            _fmt(pf_rate, "%.0f"),
            _fmt(pf_rate / nt["rows_per_s"] if pf_rate and nt and nt["rows_per_s"] else None, "%.3f", "x"),
        )
    )
    print(
        "| Beam on SparkRunner / python_floor (the user code's own rate) | | %s | %s | | |"
        % (
            _fmt(bt and bt["events_per_s_busy"], "%.0f"),
            _fmt(
                bt["events_per_s_busy"] / pf_rate if pf_rate and bt and bt["events_per_s_busy"] else None, "%.3f", "x"
            ),
        )
    )
    pc_rate = pc and pc["events_per_s"]
    print(
        "| the DoFn, each event windowed and counted per key and window in a Python dict "
        "(python_count_floor) / python_floor: the best Beam / python_floor when counting in Python | | %s | %s | | |"
        % (_fmt(pc_rate, "%.0f"), _fmt(pc_rate / pf_rate if pc_rate and pf_rate else None, "%.3f", "x"))
    )
    bp_ratio = (
        (bp["events_per_s_busy"] / nt["rows_per_s"])
        if bp and nt and bp["events_per_s_busy"] and nt["rows_per_s"]
        else None
    )
    print(
        "| the same with latency probes in 1 of %d events (the latency runs' query) | | %s | %s | | |"
        % (args.probe_every, _fmt(bp and bp["events_per_s_busy"], "%.0f"), _fmt(bp_ratio, "%.3f", "x"))
    )


def _print_latency_targets(args, nl, bl, b3, b1):
    """The table's latency rows: event-to-output against the native micro-batch, and the lag per extra stage."""
    lat_ratio = (bl["e2o_p50_s"] / nl["batch_p50_s"]) if bl and nl and bl["e2o_p50_s"] and nl["batch_p50_s"] else None
    lags = [x for pair in (b3["stage_lags"] if b3 else []) for x in pair]
    max_lag = max(lags) if lags else None
    mean_lag = statistics.mean(lags) if lags else None
    rate = bl["offered_per_s"] if bl else (nl and args.rate)
    print(
        "| at %s events/s: micro-batch duration p50 / p99, s | %s / %s | %s / %s | | | |"
        % (
            _fmt(rate, "%.0f"),
            _fmt(nl and nl["batch_p50_s"]),
            _fmt(nl and nl["batch_p99_s"]),
            _fmt(bl and bl["batch_p50_s"]),
            _fmt(bl and bl["batch_p99_s"]),
        )
    )
    print(
        "| at %s events/s: event-to-output latency p50 / p99, s | %s / %s | %s / %s | %s | | |"
        % (
            _fmt(rate, "%.0f"),
            _fmt(nl and nl["e2o_p50_s"]),
            _fmt(nl and nl["e2o_p99_s"]),
            _fmt(bl and bl["e2o_p50_s"]),
            _fmt(bl and bl["e2o_p99_s"]),
            _fmt(
                (bl["e2o_p50_s"] / nl["e2o_p50_s"]) if bl and nl and bl["e2o_p50_s"] and nl["e2o_p50_s"] else None,
                "%.1f",
                "x",
            ),
        )
    )
    print(
        "| Beam event-to-output p50 / native micro-batch p50 | %s | %s | %s | <= 2x | %s |"
        % (
            _fmt(nl and nl["batch_p50_s"], "%.2f", " s"),
            _fmt(bl and bl["e2o_p50_s"], "%.2f", " s"),
            _fmt(lat_ratio, "%.1f", "x"),
            _verdict(None if lat_ratio is None else lat_ratio <= 2.0),
        )
    )
    lat1_ratio = (b1["e2o_p50_s"] / nl["batch_p50_s"]) if b1 and nl and b1["e2o_p50_s"] and nl["batch_p50_s"] else None
    print(
        "| the same with early firings every 1 s of processing time (not the native cadence) | %s | %s | %s | | |"
        % (
            _fmt(nl and nl["batch_p50_s"], "%.2f", " s"),
            _fmt(b1 and b1["e2o_p50_s"], "%.2f", " s"),
            _fmt(lat1_ratio, "%.1f", "x"),
        )
    )
    print(
        "| watermark lag per extra GroupByKey, micro-batches (max / mean over windows) | | %s / %s | | <= 1 | %s |"
        % (_fmt(max_lag, "%d"), _fmt(mean_lag, "%.2f"), _verdict(None if max_lag is None else max_lag <= 1))
    )
    print(
        "| on-time pane delay after window end p50, 1 vs 3 GroupByKeys, s (in each run's batches) | | "
        "%s (%s) vs %s (%s) | %s batches per extra stage | | |"
        % (
            _fmt(bl and bl["on_time_p50_s"]),
            _fmt(_in_batches(bl, "on_time_p50_s"), "%.1f"),
            _fmt(b3 and b3["on_time_p50_s"]),
            _fmt(_in_batches(b3, "on_time_p50_s"), "%.1f"),
            _fmt(_per_extra_stage(bl, b3, "on_time_p50_s"), "%+.2f"),
        )
    )
    print(
        "| event-to-output p50, 1 vs 3 GroupByKeys, s (in each run's batches) | | %s (%s) vs %s (%s) | "
        "%s batches per extra stage | | |"
        % (
            _fmt(bl and bl["e2o_p50_s"]),
            _fmt(_in_batches(bl, "e2o_p50_s"), "%.1f"),
            _fmt(b3 and b3["e2o_p50_s"]),
            _fmt(_in_batches(b3, "e2o_p50_s"), "%.1f"),
            _fmt(_per_extra_stage(bl, b3, "e2o_p50_s"), "%+.2f"),
        )
    )
    print(
        "| micro-batch p50, 1 vs 3 GroupByKeys, s | | %s vs %s | | | |"
        % (_fmt(bl and bl["batch_p50_s"]), _fmt(b3 and b3["batch_p50_s"]))
    )


def _per_extra_stage(bl, b3, key):
    """(3-GBK value / its batch p50 - 1-GBK value / its batch p50) / extra stages."""
    if not (b3 and bl and b3[key] is not None and bl[key] is not None and b3["batch_p50_s"] and bl["batch_p50_s"]):
        return None
    return (b3[key] / b3["batch_p50_s"] - bl[key] / bl["batch_p50_s"]) / (b3["groups"] - bl["groups"])


def _in_batches(run, key):
    if not run or run[key] is None or not run["batch_p50_s"]:
        return None
    return run[key] / run["batch_p50_s"]
