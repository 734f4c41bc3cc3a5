"""The measured runs of benchmarks/streaming.py, in the order it makes them:
the warm-up runs, the throughput rounds (beam_throughput, then
native_throughput at its median batch), the throughput runs beside the
target (python_floor, native_throughput_1m, beam_throughput_probes) and the
latency runs; each through _Attempts, which leaves a failed run out and
sets the exit status when a native query counted wrong."""

import collections
import functools
import sys
import time

from procstat import CpuMeter
from streaming_analysis import _round
from streaming_beam import run_beam
from streaming_config import EARLY_S, PARTITIONS, WINDOW_S, _warmup_of
from streaming_floor import python_floor
from streaming_native import _run_native, native_latency, native_throughput
from streaming_native_check import NativeCountsWrong
from streaming_pipeline import GenerateEvents
from streaming_report import _fmt


class _Attempts:
    """Runs one measurement at a time. A failure is printed and leaves the run
    out (the exit status stays 0: a measurement, not a test); so do native
    counts that disagree with the rows generated (NativeCountsWrong), but those
    are recorded and make the exit status 1: a ratio against a query that
    computes a wrong answer is no measurement."""

    def __init__(self, skip):
        self.skip = skip
        self.wrong_counts = []  # "run: what is wrong"

    def __call__(self, name, fn, *a):
        """fn(*a) with its CPU use, or None if skipped or failed."""
        if name in self.skip:
            return None
        cpu = CpuMeter().start()
        try:
            out = fn(*a)
        except NativeCountsWrong as e:
            print("%s: native query counts WRONG, run left out: %s" % (name, e), flush=True)
            self.wrong_counts.append("%s: %s" % (name, e))
            return None
        except Exception as e:  # noqa: BLE001 -- a measurement, not a test
            print("%s FAILED: %s" % (name, str(e).splitlines()[0] if str(e) else repr(e)), flush=True)
            return None
        out.setdefault("cpu", cpu.stop())
        return out

    def exit_status(self):
        """0, or 1 (saying why, as the last line) if a native query counted wrong."""
        if not self.wrong_counts:
            return 0
        print(
            "FAILED: the native query's counts disagree with the rows it generated in %d run(s), which "
            "are left out of the results: %s" % (len(self.wrong_counts), "; ".join(self.wrong_counts)),
            flush=True,
        )
        return 1


def _warm_up(spark, listener, args, attempt):
    """Short runs of each side (excluded from the results) that start the Python
    workers; returns {side: wall seconds}."""
    warm = collections.OrderedDict()
    for name, fn, a in (
        ("beam", run_beam, (spark, listener, 200, 3, args.fire_interval, args.probe_every, 3, "warm-up")),
        ("native", native_throughput, (spark, listener, 10_000, 3, 0)),
    ):
        t = time.perf_counter()
        attempt("warm-up " + name, fn, *a)
        warm[name] = time.perf_counter() - t
    print("warm-up runs (excluded): %s" % ", ".join("%s %.1f s" % kv for kv in warm.items()), flush=True)
    return warm


def _throughput_rounds(spark, listener, args, attempt, runs):
    """beam_throughput, then native_throughput at its median batch, --rounds
    times back to back; the first pair goes into `runs`. Returns (the rounds,
    as _round gives them; the first native run's rows per batch)."""
    warmup = _warmup_of(args.seconds)
    bt = attempt(
        "beam_throughput",
        run_beam,
        spark,
        listener,
        args.beam_offered_rate,
        args.seconds,
        args.fire_interval,
        0,
        1,
        "beam_throughput",
        args.verbose,
    )
    if bt:
        print(
            "beam_throughput: %s events/s (saturated: %s, median batch %s events)"
            % (_fmt(bt["events_per_s_busy"], "%.0f"), bt["saturated"], _fmt(bt["batch_events_p50"], "%.0f")),
            flush=True,
        )
    rows_per_batch = args.native_rows_per_batch or int(round((bt and bt["batch_events_p50"]) or 1_000_000, -5))
    nt = attempt("native_throughput", native_throughput, spark, listener, rows_per_batch, args.seconds, warmup)
    if nt:
        print(
            "native_throughput at %d rows per batch: %s rows/s" % (rows_per_batch, _fmt(nt["rows_per_s"], "%.0f")),
            flush=True,
        )
    runs["beam_throughput"], runs["native_throughput"] = bt, nt
    rounds = [_round(bt, nt)] if bt and nt else []
    for i in range(2, args.rounds + 1):
        # Further (Beam, native) pairs back to back: the machine's speed drifts
        # by tens of percent over minutes, so one pair's ratio is a sample.
        b = attempt(
            "beam_throughput",
            run_beam,
            spark,
            listener,
            args.beam_offered_rate,
            args.seconds,
            args.fire_interval,
            0,
            1,
            "beam_throughput round %d" % i,
        )
        n = b and attempt(
            "native_throughput",
            native_throughput,
            spark,
            listener,
            args.native_rows_per_batch or int(round(b["batch_events_p50"] or 1_000_000, -5)),
            args.seconds,
            warmup,
        )
        if b and n:
            rounds.append(_round(b, n))
            print(
                "round %d: beam %.0f events/s, native %.0f rows/s at %d rows per batch: %.3fx" % (i, *rounds[-1]),
                flush=True,
            )
    return rounds, rows_per_batch


def _throughput_comparisons(spark, listener, args, attempt, rows_per_batch, runs):
    """The throughput runs beside the target: python_floor, native at 1M rows
    per batch and Beam with latency probes."""
    warmup = _warmup_of(args.seconds)
    per_tick = max(1, int(round(args.beam_offered_rate * args.fire_interval)))
    # python_floor's workers build GenerateEvents themselves, and benchmarks/
    # is not on their path: PySpark ships streaming_pipeline by value, as it
    # ships streaming_floor (and a script's own classes).
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[GenerateEvents.__module__])
    floor_args = (
        spark,
        listener,
        _run_native,
        PARTITIONS,
        max(1, round(rows_per_batch / per_tick)),
        per_tick,
        args.fire_interval,
        functools.partial(GenerateEvents, per_tick, args.fire_interval, 0),
        args.seconds,
        warmup,
    )
    pf = attempt("python_floor", python_floor, *floor_args)
    if pf:
        print(
            "python_floor (the Beam run's DoFn alone in PySpark): %s events/s" % _fmt(pf["events_per_s"], "%.0f"),
            flush=True,
        )
    pc = attempt("python_count_floor", python_floor, *floor_args, WINDOW_S)
    if pc:
        print(
            "python_count_floor (the DoFn, then a window and a count per key and window in a Python dict): "
            "%s events/s%s"
            % (
                _fmt(pc["events_per_s"], "%.0f"),
                "; %.3fx python_floor: the best Beam / python_floor a runner that counts in Python reaches"
                % (pc["events_per_s"] / pf["events_per_s"])
                if pf and pf["events_per_s"] and pc["events_per_s"]
                else "",
            ),
            flush=True,
        )
    n1 = attempt("native_throughput_1m", native_throughput, spark, listener, 1_000_000, args.seconds, warmup)
    if n1:
        print("native_throughput_1m: %s rows/s" % _fmt(n1["rows_per_s"], "%.0f"), flush=True)
    bp = attempt(
        "beam_throughput_probes",
        run_beam,
        spark,
        listener,
        args.beam_offered_rate,
        args.seconds,
        args.fire_interval,
        args.probe_every,
        1,
        "beam_throughput_probes",
        args.verbose,
    )
    if bp:
        print(
            "beam_throughput_probes: %s events/s (saturated: %s)"
            % (_fmt(bp["events_per_s_busy"], "%.0f"), bp["saturated"]),
            flush=True,
        )
    runs.update(python_floor=pf, python_count_floor=pc, native_throughput_1m=n1, beam_throughput_probes=bp)


def _latency_runs(spark, listener, args, attempt, runs):
    """native_latency and the Beam latency runs at --rate events/s."""
    warmup = _warmup_of(args.seconds)
    rate = max(args.rate, 1.0 / args.fire_interval)
    nl = attempt("native_latency", native_latency, spark, listener, rate, args.seconds, warmup)
    if nl:
        print("native_latency at %.0f rows/s: batch p50 %s s" % (rate, _fmt(nl["batch_p50_s"])), flush=True)
    bl = attempt(
        "beam_latency",
        run_beam,
        spark,
        listener,
        rate,
        args.seconds,
        args.fire_interval,
        args.probe_every,
        1,
        "beam_latency",
        args.verbose,
    )
    if bl:
        print("beam_latency at %.0f events/s: event-to-output p50 %s s" % (rate, _fmt(bl["e2o_p50_s"])), flush=True)
    b1 = attempt(
        "beam_latency_early_1s",
        run_beam,
        spark,
        listener,
        rate,
        args.seconds,
        args.fire_interval,
        args.probe_every,
        1,
        "beam_latency_early_1s",
        args.verbose,
        EARLY_S,
    )
    if b1:
        print(
            "beam_latency_early_1s at %.0f events/s: event-to-output p50 %s s" % (rate, _fmt(b1["e2o_p50_s"])),
            flush=True,
        )
    b3 = attempt(
        "beam_latency_3gbk",
        run_beam,
        spark,
        listener,
        rate,
        args.seconds,
        args.fire_interval,
        args.probe_every,
        3,
        "beam_latency_3gbk",
        args.verbose,
    )
    if b3:
        print("beam_latency_3gbk: stage lags %s" % b3["stage_lags"], flush=True)
    runs.update(native_latency=nl, beam_latency=bl, beam_latency_early_1s=b1, beam_latency_3gbk=b3)
