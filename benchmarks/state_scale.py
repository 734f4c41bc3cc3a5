"""Per-batch cost of streaming keyed state as the number of keys held grows.

    python benchmarks/state_scale.py [--keys 1000,100000,1000000] [--touched 1000] [--ticks 20]

One streaming pipeline per K: a stateful DoFn (one `ReadModifyWriteState`
count per key) and a GroupByKey in the global window with an
`AfterCount(2)` trigger read the same keys. A first PeriodicImpulse loads
K keys (100,000 per tick, so no batch holds more than that); a second one,
starting once the load is due to be done, sends the same `--touched` keys
every 2 s. Both operators then hold K keys in state while each measured
micro-batch touches `--touched` of them.

Reported per K: the median and 90th percentile of the measured batches'
wall time (Spark's `durationMs.triggerExecution` of the Beam query, the
batches that start after the load, less the first two), the state rows
Spark's store holds, and the memory (Pss) of the Python workers during the
measured batches (until the last touch is due; the batch where the input
ends makes every key due): the peak, the total at the first sample
(workers are reused, and Python keeps the heap the load batches grew), and
per process: the most any one grew during the measured batches, and what
processes started meanwhile took (a new worker is not growth). A Beam counter checks that the stateful DoFn
saw every key and every touch.

Headline: median per-batch time at the largest K over that at
the smallest, against 1.5: `state_scale ratio=<x> target<=1.5 PASS|MISS`.
"""

import argparse
import os
import statistics
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

from benchmarks.headline import headline  # noqa: E402
from benchmarks.runner_session import start_runner_session  # noqa: E402
from spark_progress import iso_ms, progress_listener  # noqa: E402

MASTER = "local[2]"
TARGET = 1.5
LOAD_CHUNK = 100_000
LOAD_RATE = 4_000  # keys/s the schedule allows for loading (the measured phase waits for it)
INTERVAL = 2.0
NAMESPACE = "state_scale"


def _pipeline(keys, touched, ticks, load_start, measure_start):
    import apache_beam as beam
    from apache_beam.metrics import Metrics
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.transforms import trigger, userstate, window
    from apache_beam.transforms.periodicsequence import PeriodicImpulse

    from beam_spark_runner import SparkRunner

    class CountPerKey(beam.DoFn):
        COUNT = userstate.ReadModifyWriteStateSpec("count", beam.coders.VarIntCoder())

        def __init__(self):
            self.new_keys = Metrics.counter(NAMESPACE, "new_keys")
            self.touches = Metrics.counter(NAMESPACE, "touches")

        def process(self, kv, count=beam.DoFn.StateParam(COUNT)):
            total = (count.read() or 0) + 1
            count.write(total)
            if total == 1:
                self.new_keys.inc()
            else:
                self.touches.inc()
            yield kv[0], total

    load_ticks = -(-keys // LOAD_CHUNK)

    def load(t):
        first = int(round((float(t) - load_start))) * LOAD_CHUNK
        return (("k%d" % i, 1) for i in range(first, min(keys, first + LOAD_CHUNK)))

    def touch(_):
        return (("k%d" % i, 1) for i in range(touched))

    p = beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(["--streaming", "--parallelism=2"]))
    loaded = (
        p
        | "LoadTicks"
        >> PeriodicImpulse(start_timestamp=load_start, stop_timestamp=load_start + load_ticks, fire_interval=1)
        | "Load" >> beam.FlatMap(load)
    )
    touches = (
        p
        | "TouchTicks"
        >> PeriodicImpulse(
            start_timestamp=measure_start, stop_timestamp=measure_start + ticks * INTERVAL, fire_interval=INTERVAL
        )
        | "Touch" >> beam.FlatMap(touch)
    )
    keyed = (loaded, touches) | beam.Flatten()
    _ = keyed | beam.ParDo(CountPerKey())
    _ = (
        keyed
        | beam.WindowInto(
            window.GlobalWindows(),
            trigger=trigger.Repeatedly(trigger.AfterCount(2)),
            accumulation_mode=trigger.AccumulationMode.DISCARDING,
        )
        | beam.GroupByKey()
    )
    return p


class WorkerMemory:
    """Memory (MB) of the Python worker processes under this process
    (PySpark's daemons and their forked workers), sampled every 0.2 s while
    `measuring` is set, as proportional set sizes (Pss), so pages the
    forked workers share with their daemon count once:

    - `peak_mb`: the largest sum over the processes alive at one sample;
    - `first_mb`: that sum at the first sample;
    - per process: its Pss when first sampled and its peak, so the growth
      of each one during the measured phase is known (`growth()`), and a
      process that started meanwhile is told apart from one that grew."""

    def __init__(self):
        self.peak_mb = 0.0
        self.first_mb = None  # at the first sample of the measured phase
        self.processes = 0  # most worker processes seen at once
        self.first_kb = {}  # pid -> Pss at its first sample
        self.peak_kb = {}  # pid -> its largest Pss
        self.roles = {}  # pid -> what the process runs (its command's module)
        self.started = set()  # pids first seen after the first sample
        self.series = {}  # pid -> [Pss at each sample]
        self.measuring = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _workers(self):
        from procstat import process_table

        table = process_table()
        children = {}
        for pid, (ppid, _) in table.items():
            children.setdefault(ppid, []).append(pid)
        out, todo = [], list(children.get(os.getpid(), ()))
        while todo:
            pid = todo.pop()
            todo.extend(children.get(pid, ()))
            try:
                with open("/proc/%d/cmdline" % pid, "rb") as f:
                    cmd = f.read()
            except OSError:
                continue
            argv = cmd.split(b"\0")
            # The program itself, not its arguments: the JVM's class path
            # names pyspark's python directory too.
            if b"python" in os.path.basename(argv[0]):
                out.append((pid, argv))
        return out

    @staticmethod
    def _role(argv):
        words = [w.decode(errors="replace") for w in argv if w]
        return " ".join(words[words.index("-m") + 1 :]) if "-m" in words else " ".join(words[1:2])

    @staticmethod
    def _pss_kb(pid):
        try:
            with open("/proc/%d/smaps_rollup" % pid) as f:
                for line in f:
                    if line.startswith("Pss:"):
                        return int(line.split()[1])
        except OSError:
            return None
        return None

    def _loop(self):
        while not self._stop.wait(0.2):
            if not self.measuring.is_set():
                continue
            total = 0
            workers = self._workers()
            self.processes = max(self.processes, len(workers))
            first_sample = self.first_mb is None
            for pid, argv in workers:
                kb = self._pss_kb(pid)
                if kb is None:
                    continue
                total += kb
                if pid not in self.first_kb:
                    self.first_kb[pid] = kb
                    self.roles[pid] = self._role(argv)
                    if not first_sample:
                        self.started.add(pid)
                self.peak_kb[pid] = max(self.peak_kb.get(pid, 0), kb)
                self.series.setdefault(pid, []).append(kb)
            if first_sample:
                self.first_mb = total / 1024.0
            self.peak_mb = max(self.peak_mb, total / 1024.0)

    def growth(self):
        """(MB, pid, role) of the process that grew most during the measured
        phase among those alive at its start, and the MB of the processes
        that started during it."""
        grown = [
            ((self.peak_kb[pid] - self.first_kb[pid]) / 1024.0, pid, self.roles[pid])
            for pid in self.first_kb
            if pid not in self.started
        ]
        most = max(grown, default=(0.0, None, ""))
        return most, sum(self.peak_kb[pid] for pid in self.started) / 1024.0

    def course_mb(self, pid, points=8):
        """`points` evenly spaced samples of one process's Pss (MB): a step
        that stays (the heap grew once) or a climb (it keeps growing)."""
        series = self.series.get(pid, [])
        if not series:
            return []
        step = max(1, len(series) // points)
        return [round(kb / 1024.0) for kb in series[::step]] + [round(series[-1] / 1024.0)]

    def close(self):
        self._stop.set()


def run_one(spark, listener, keys, touched, ticks):
    from apache_beam.metrics.metric import MetricsFilter

    lead = 25.0  # the query starts before the first tick
    load_start = time.time() + lead
    load_ticks = -(-keys // LOAD_CHUNK)
    measure_start = load_start + load_ticks + keys / LOAD_RATE + 10
    memory = WorkerMemory()
    before = set(listener.ids_named("beam-"))
    result = _pipeline(keys, touched, ticks, load_start, measure_start).run()
    while time.time() < measure_start:
        time.sleep(0.5)
    memory.measuring.set()
    # Until the last touch is due: the batch after it, where the input
    # ends, finds every key due (its global window closes) and loads all K.
    while time.time() < measure_start + ticks * INTERVAL:
        time.sleep(0.5)
    memory.measuring.clear()
    memory.close()
    result.wait_until_finish()
    time.sleep(1.0)  # the listener bus delivers the last progress events asynchronously
    (query_id,) = set(listener.ids_named("beam-")) - before
    progress = listener.of(query_id)
    measured = [p for p in progress if iso_ms(p["timestamp"]) >= measure_start * 1000 and p["numInputRows"]]
    durations = sorted(p["durationMs"]["triggerExecution"] / 1000.0 for p in measured[2:])
    load_batches = [p for p in progress if iso_ms(p["timestamp"]) < measure_start * 1000 and p["numInputRows"]]
    late_load = [
        p
        for p in load_batches
        if iso_ms(p["timestamp"]) + p["durationMs"]["triggerExecution"] > (measure_start + INTERVAL) * 1000
    ]
    state_rows = max((sum(o.get("numRowsTotal", 0) for o in p.get("stateOperators", ())) for p in progress), default=0)
    counters = {
        c.key.metric.name: c.committed
        for c in result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))["counters"]
    }
    ok = counters.get("new_keys") == keys and counters.get("touches") == touched * ticks and not late_load
    return {
        "keys": keys,
        "batches": len(durations),
        "p50_s": statistics.median(durations) if durations else None,
        "p90_s": durations[int(0.9 * (len(durations) - 1))] if durations else None,
        "load_s": sum(p["durationMs"]["triggerExecution"] for p in load_batches) / 1000.0,
        "state_rows": state_rows,
        "worker_peak_mb": memory.peak_mb,
        "worker_first_mb": memory.first_mb or 0.0,
        "worker_processes": memory.processes,
        "worker_growth": memory.growth(),
        "most_grown_course_mb": memory.course_mb(memory.growth()[0][1]),
        "counters": counters,
        "ok": ok,
        "late_load": len(late_load),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", default="1000,100000,1000000")
    parser.add_argument("--touched", type=int, default=1000)
    parser.add_argument("--ticks", type=int, default=20)
    args = parser.parse_args(argv)
    sizes = [int(k) for k in args.keys.split(",")]
    spark = start_runner_session(MASTER, "bench-state-scale")
    listener = progress_listener(spark)
    results = []
    for keys in sizes:
        r = run_one(spark, listener, keys, args.touched, args.ticks)
        results.append(r)
        print(
            "K=%-8d batches=%d p50=%.3f s p90=%.3f s  load %.1f s  state rows %d  "
            "workers: peak %.0f MB, %.0f MB at the first measured batch, %d processes; most grown +%.0f MB "
            "(%s; over the measured batches: %s MB), %.0f MB in processes started meanwhile  counters %s%s"
            % (
                r["keys"],
                r["batches"],
                r["p50_s"] or float("nan"),
                r["p90_s"] or float("nan"),
                r["load_s"],
                r["state_rows"],
                r["worker_peak_mb"],
                r["worker_first_mb"],
                r["worker_processes"],
                r["worker_growth"][0][0],
                r["worker_growth"][0][2] or "none",
                ", ".join(map(str, r["most_grown_course_mb"])),
                r["worker_growth"][1],
                r["counters"],
                "" if r["ok"] else "  CHECK FAILED (%d load batches ran into the measured phase)" % r["late_load"],
            ),
            flush=True,
        )
    base = results[0]["p50_s"]
    for r in results[1:]:
        if base and r["p50_s"]:
            print("K=%d / K=%d per-batch ratio %.3f" % (r["keys"], results[0]["keys"], r["p50_s"] / base))
    ratio = results[-1]["p50_s"] / base if base and results[-1]["p50_s"] else None
    headline("state_scale", ratio, TARGET, at_most=True, results_ok=all(r["ok"] for r in results))


if __name__ == "__main__":
    main()
