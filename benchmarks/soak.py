"""A long streaming run stays bounded: the driver's cost per micro-batch,
`result.metrics()`, the driver's memory and the checkpoint directory do not
grow with the number of batches that ran.

    python benchmarks/soak.py [--batches 5000] [--window 300] [--rate 100]

One streaming pipeline, trigger interval 0 (the next batch starts as soon
as one ends): a PeriodicImpulse at `--rate` events/s, a user counter, a
stateful DoFn counting per key, a windowed CombinePerKey (10 s fixed
windows) and the exactly-once text sink (WriteToText on unbounded input).
It runs until `--batches` micro-batches completed, then is cancelled.

Measured over the first `--window` batches after a warm-up of 50 and over
the last `--window`: the driver process's CPU per batch (this Python
process: where the runner's driver sink, checkpoint coordinator and
metrics live; Spark's JVM is measured apart), the time of one
`result.metrics()` call, the driver's RSS, and the checkpoint directory's
size and file count.

Headline: end / start driver CPU per batch, against 1.2:
`soak ratio=<x> target<=1.2 PASS|MISS`. The run also misses if the driver's
RSS grew by 100 MB or more, or the checkpoint's file count at the end is
more than 1.5x what it was at the start of the measured run (Spark and the
runner retain a fixed number of batches' files, so it must level off).
"""

import argparse
import json
import os
import resource
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.headline import headline  # noqa: E402

TARGET = 1.2
RSS_GROWTH_LIMIT_MB = 100
FILES_GROWTH_LIMIT = 1.5
WARMUP = 50


def build(p, out, rate, duration_s):
    import apache_beam as beam
    from apache_beam.io import WriteToText
    from apache_beam.metrics import Metrics
    from apache_beam.transforms import userstate, window
    from apache_beam.transforms.periodicsequence import PeriodicImpulse

    events = Metrics.counter("soak", "events")

    class CountPerKey(beam.DoFn):
        COUNT = userstate.ReadModifyWriteStateSpec("count", beam.coders.VarIntCoder())

        def process(self, kv, count=beam.DoFn.StateParam(COUNT)):
            n = (count.read() or 0) + 1
            count.write(n)
            yield kv[0], n

    def tick(t):
        events.inc()
        return "k%d" % (int(float(t) * rate) % 10), 1

    start = time.time()
    keyed = (
        p
        | PeriodicImpulse(start_timestamp=start, stop_timestamp=start + duration_s, fire_interval=1.0 / rate)
        | "Tick" >> beam.Map(tick)
    )
    _ = keyed | "Count per key" >> beam.ParDo(CountPerKey())
    _ = (
        keyed
        | "Windows" >> beam.WindowInto(window.FixedWindows(10))
        | "Sum" >> beam.CombinePerKey(sum)
        | "Format" >> beam.MapTuple(lambda k, v: "%s,%d" % (k, v))
        | "Write" >> WriteToText(os.path.join(out, "sums"))
    )


def _dir_stats(path):
    files = size = 0
    for root, _, names in os.walk(path):
        for name in names:
            files += 1
            try:
                size += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return files, size


def _rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def _driver_cpu_s():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _completed(result):
    records = result.streaming_progress()
    return records[-1].batch if records else -1


class Sample:
    def __init__(self, result, checkpoint):
        self.batch = _completed(result)
        self.cpu_s = _driver_cpu_s()
        self.at = time.monotonic()
        started = time.perf_counter()
        result.metrics().query()
        self.metrics_s = time.perf_counter() - started
        self.rss_mb = _rss_mb()
        self.files, self.bytes = _dir_stats(checkpoint)


def _wait_for_batch(result, batch):
    from apache_beam.runners.runner import PipelineState

    while _completed(result) < batch:
        if PipelineState.is_terminal(result.state):
            raise SystemExit(
                "the run ended (%s) at batch %d, before batch %d" % (result.state, _completed(result), batch)
            )
        time.sleep(0.2)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=5000)
    parser.add_argument("--window", type=int, default=300, help="batches measured at the start and at the end")
    parser.add_argument("--rate", type=float, default=100.0, help="events per second")
    args = parser.parse_args(argv)
    assert args.batches >= WARMUP + 2 * args.window, "--batches must cover the warm-up and two windows"

    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from beam_spark_runner import SparkRunner

    work = tempfile.mkdtemp(prefix="beam-spark-soak-")
    checkpoint, out = os.path.join(work, "checkpoint"), os.path.join(work, "out")
    p = beam.Pipeline(
        runner=SparkRunner(),
        options=PipelineOptions(
            [
                "--streaming",
                "--trigger_interval=0 seconds",
                "--checkpoint_dir=%s" % checkpoint,
                "--spark_master=local[2]",
            ]
        ),
    )
    build(p, out, args.rate, duration_s=24 * 3600)
    result = p.run()
    try:
        _wait_for_batch(result, WARMUP)
        first = Sample(result, checkpoint)
        _wait_for_batch(result, WARMUP + args.window)
        first_end = Sample(result, checkpoint)
        _wait_for_batch(result, args.batches - args.window)
        last = Sample(result, checkpoint)
        _wait_for_batch(result, args.batches)
        last_end = Sample(result, checkpoint)
        counters = result.metrics().query(beam.metrics.MetricsFilter().with_name("events"))["counters"]
    finally:
        result.cancel()

    def per_batch(a, b):
        batches = max(1, b.batch - a.batch)
        return (b.cpu_s - a.cpu_s) / batches, (b.at - a.at) / batches

    start_cpu, start_wall = per_batch(first, first_end)
    end_cpu, end_wall = per_batch(last, last_end)
    measured = {
        "batches": last_end.batch,
        "driver_cpu_ms_per_batch": {"start": round(start_cpu * 1000, 2), "end": round(end_cpu * 1000, 2)},
        "wall_ms_per_batch": {"start": round(start_wall * 1000, 1), "end": round(end_wall * 1000, 1)},
        "metrics_call_s": {"start": round(first.metrics_s, 4), "end": round(last_end.metrics_s, 4)},
        "driver_rss_mb": {"start": round(first.rss_mb, 1), "end": round(last_end.rss_mb, 1)},
        "checkpoint_files": {"start": first.files, "end": last_end.files},
        "checkpoint_mb": {"start": round(first.bytes / 1e6, 2), "end": round(last_end.bytes / 1e6, 2)},
        "events_counted": sum(c.committed or 0 for c in counters),
    }
    print("measured: %s" % json.dumps(measured))
    rss_ok = last_end.rss_mb - first.rss_mb < RSS_GROWTH_LIMIT_MB
    files_ok = last_end.files <= FILES_GROWTH_LIMIT * max(1, first.files)
    print(
        "driver RSS growth %.1f MB (limit %d): %s; checkpoint files %d -> %d (limit %.1fx): %s"
        % (
            last_end.rss_mb - first.rss_mb,
            RSS_GROWTH_LIMIT_MB,
            "ok" if rss_ok else "MISS",
            first.files,
            last_end.files,
            FILES_GROWTH_LIMIT,
            "ok" if files_ok else "MISS",
        )
    )
    headline("soak", end_cpu / start_cpu if start_cpu else None, TARGET, results_ok=rss_ok and files_ok)


if __name__ == "__main__":
    main()
