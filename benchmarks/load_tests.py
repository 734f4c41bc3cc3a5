"""The shapes of Beam's Python load tests, SparkRunner vs DirectRunner.

    .venv/bin/python benchmarks/load_tests.py                       # 1M elements each
    .venv/bin/python benchmarks/load_tests.py --elements 20000      # smoke run
    .venv/bin/python benchmarks/load_tests.py --shapes gbk,combine

Shapes follow `apache_beam/testing/load_tests` (GBK, CoGBK, Combine, ParDo,
side input) on Beam's SyntheticSource (10-byte keys, 90-byte values). Each
shape runs on SparkRunner (one local[2] SparkSession created up front, so
JVM start-up is excluded and reported apart) and on Beam's DirectRunner, in
this one process, and the ratio SparkRunner / DirectRunner wall time is
printed (target <= 1.0x). Each pipeline ends in a counter of its output
elements; the two runners' counts must agree or the script exits 1.
"""
import argparse
import sys
import time

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.synthetic_pipeline import SyntheticSource

NAMESPACE = "load_tests"


def _source(elements, num_hot_keys=0, key_size=10, value_size=90):
    spec = {"numRecords": elements, "keySizeBytes": key_size, "valueSizeBytes": value_size}
    if num_hot_keys:
        spec.update({"numHotKeys": num_hot_keys, "hotKeyFraction": 1.0})
    return beam.io.Read(SyntheticSource(spec))


class _CountOutput(beam.DoFn):
    def __init__(self):
        self.out = Metrics.counter(NAMESPACE, "output_elements")

    def process(self, element):
        self.out.inc()


def gbk(p, n):
    """GroupByKey over 1000 hot keys, then ungroup (group_by_key_test)."""
    return (p | _source(n, num_hot_keys=1000) | beam.GroupByKey()
            | beam.FlatMap(lambda kv: kv[1]))


def cogbk(p, n):
    """CoGroupByKey of two inputs sharing 1000 keys (co_group_by_key_test)."""
    left = p | "Left" >> _source(n // 2, num_hot_keys=1000)
    right = p | "Right" >> _source(n // 2, num_hot_keys=1000)
    return ({"l": left, "r": right} | beam.CoGroupByKey()
            | beam.FlatMap(lambda kv: list(kv[1]["l"]) + list(kv[1]["r"])))


def combine(p, n):
    """Top-20 largest values per key over 1000 keys (combine_test)."""
    return (p | _source(n, num_hot_keys=1000) | beam.combiners.Top.LargestPerKey(20)
            | beam.FlatMap(lambda kv: kv[1]))


def pardo(p, n):
    """Ten chained counting ParDos (pardo_test, iterations=10)."""
    pc = p | _source(n)
    for i in range(10):
        pc = pc | ("Step %d" % i) >> beam.Map(lambda kv: kv)
    return pc


def side_input(p, n):
    """Main input joined with a 1000-entry dict side input (sideinput_test)."""
    side = p | "Side" >> _source(1000) | "KeyPrefix" >> beam.Map(lambda kv: (kv[0][:1], kv[1]))
    return (p | "Main" >> _source(n)
            | beam.Map(lambda kv, d: (kv[0], len(d)), beam.pvalue.AsDict(side)))


SHAPES = {"gbk": gbk, "cogbk": cogbk, "combine": combine, "pardo": pardo, "side_input": side_input}


def run_shape(shape, elements, runner_args):
    p = beam.Pipeline(options=PipelineOptions(runner_args))
    SHAPES[shape](p, elements) | "Count" >> beam.ParDo(_CountOutput())
    started = time.perf_counter()
    result = p.run()
    result.wait_until_finish()
    seconds = time.perf_counter() - started
    counters = result.metrics().query(MetricsFilter().with_name("output_elements"))["counters"]
    return seconds, sum(c.committed for c in counters)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=int, default=1_000_000)
    parser.add_argument("--shapes", default=",".join(SHAPES))
    args = parser.parse_args(argv)
    shapes = [s for s in args.shapes.split(",") if s]

    from beam_spark_runner import SparkRunnerOptions
    from beam_spark_runner.session import get_or_create_session
    started = time.perf_counter()
    get_or_create_session(PipelineOptions(["--spark_master=local[2]"]).view_as(SparkRunnerOptions))
    print("SparkSession start-up (excluded below): %.1f s" % (time.perf_counter() - started))

    rows, ok = [], True
    for shape in shapes:
        spark_s, spark_n = run_shape(shape, args.elements, ["--runner=beam_spark_runner.SparkRunner"])
        direct_s, direct_n = run_shape(shape, args.elements, ["--runner=DirectRunner"])
        ok &= spark_n == direct_n
        rows.append((shape, spark_s, direct_s, spark_s / direct_s, spark_n, direct_n))
        print("%-10s spark %7.1f s  direct %7.1f s  ratio %.2fx  outputs %d / %d" % rows[-1], flush=True)

    print("\n| shape | SparkRunner s | DirectRunner s | Spark / Direct | outputs (Spark / Direct) |")
    print("|---|---:|---:|---:|---|")
    for shape, s, d, r, sn, dn in rows:
        print("| %s | %.1f | %.1f | %.2fx | %d / %d |" % (shape, s, d, r, sn, dn))
    if not ok:
        print("MISMATCH: the runners' output counts differ", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
