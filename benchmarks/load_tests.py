"""The shapes of Beam's Python load tests, SparkRunner vs DirectRunner (in process and multi-process).

    .venv/bin/python benchmarks/load_tests.py                       # 1M elements each
    .venv/bin/python benchmarks/load_tests.py --elements 20000      # smoke run
    .venv/bin/python benchmarks/load_tests.py --shapes gbk,combine

Shapes follow `apache_beam/testing/load_tests` (GBK, CoGBK, Combine, ParDo,
side input) on Beam's SyntheticSource (10-byte keys, 90-byte values). Each
shape runs on SparkRunner (one local[2] SparkSession created up front, so
JVM start-up is excluded and reported apart), on Beam's DirectRunner in this
one process, and on DirectRunner with as many worker processes as Spark has
local cores (--direct_num_workers=2 --direct_running_mode=multi_processing).
The ratios SparkRunner / DirectRunner wall time (target <= 1.0x) and
SparkRunner / multi-process DirectRunner are printed. Each pipeline ends in
counters of its output elements and of a checksum of them (the sum over the
elements of a CRC-32 of their bytes, independent of order and bundling; the
SyntheticSource's records are the same on every runner); the three runners'
counts and checksums must agree (and be reported) or the script says which
differ and exits 1.
"""

import argparse
import os
import re
import sys
import time
import zlib

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.synthetic_pipeline import SyntheticSource

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # benchmarks/ helpers
from headline import headline  # noqa: E402

NAMESPACE = "load_tests"
SPARK_MASTER = "local[2]"
SPARK_CORES = int(re.match(r"local\[(\d+)\]$", SPARK_MASTER).group(1))
# (name, title, pipeline options) of each runner compared, in the order they run.
RUNNERS = (
    ("spark", "SparkRunner", ["--runner=beam_spark_runner.SparkRunner"]),
    ("direct", "DirectRunner", ["--runner=DirectRunner"]),
    (
        "direct_mp",
        "DirectRunner, %d processes" % SPARK_CORES,
        ["--runner=DirectRunner", "--direct_num_workers=%d" % SPARK_CORES, "--direct_running_mode=multi_processing"],
    ),
)


def _source(elements, num_hot_keys=0, key_size=10, value_size=90):
    spec = {"numRecords": elements, "keySizeBytes": key_size, "valueSizeBytes": value_size}
    if num_hot_keys:
        spec.update({"numHotKeys": num_hot_keys, "hotKeyFraction": 1.0})
    return beam.io.Read(SyntheticSource(spec))


def _checksum(element):
    """CRC-32 of an output element: bytes as they are, other values (the
    side-input shape's ints) by repr, a tuple's parts chained."""
    crc = 0
    for part in element if isinstance(element, tuple) else (element,):
        crc = zlib.crc32(part if isinstance(part, bytes) else repr(part).encode(), crc)
    return crc


class _CountOutput(beam.DoFn):
    """Counts the output elements and adds up their checksums."""

    def __init__(self):
        self.out = Metrics.counter(NAMESPACE, "output_elements")
        self.checksum = Metrics.counter(NAMESPACE, "output_checksum")

    def process(self, element):
        self.out.inc()
        self.checksum.inc(_checksum(element))


def gbk(p, n):
    """GroupByKey over 1000 hot keys, then ungroup (group_by_key_test)."""
    return p | _source(n, num_hot_keys=1000) | beam.GroupByKey() | beam.FlatMap(lambda kv: kv[1])


def cogbk(p, n):
    """CoGroupByKey of two inputs sharing 1000 keys (co_group_by_key_test)."""
    left = p | "Left" >> _source(n // 2, num_hot_keys=1000)
    right = p | "Right" >> _source(n // 2, num_hot_keys=1000)
    return {"l": left, "r": right} | beam.CoGroupByKey() | beam.FlatMap(lambda kv: list(kv[1]["l"]) + list(kv[1]["r"]))


def combine(p, n):
    """Top-20 largest values per key over 1000 keys (combine_test)."""
    return p | _source(n, num_hot_keys=1000) | beam.combiners.Top.LargestPerKey(20) | beam.FlatMap(lambda kv: kv[1])


def pardo(p, n):
    """Ten chained counting ParDos (pardo_test, iterations=10)."""
    pc = p | _source(n)
    for i in range(10):
        pc = pc | ("Step %d" % i) >> beam.Map(lambda kv: kv)
    return pc


def side_input(p, n):
    """Main input joined with a 1000-entry dict side input (sideinput_test)."""
    side = p | "Side" >> _source(1000) | "KeyPrefix" >> beam.Map(lambda kv: (kv[0][:1], kv[1]))
    return p | "Main" >> _source(n) | beam.Map(lambda kv, d: (kv[0], len(d)), beam.pvalue.AsDict(side))


SHAPES = {"gbk": gbk, "cogbk": cogbk, "combine": combine, "pardo": pardo, "side_input": side_input}


def run_shape(shape, elements, runner_args):
    """Runs one shape on one runner: (wall seconds, output elements, their checksum)."""
    p = beam.Pipeline(options=PipelineOptions(runner_args))
    SHAPES[shape](p, elements) | "Count" >> beam.ParDo(_CountOutput())
    started = time.perf_counter()
    result = p.run()
    result.wait_until_finish()
    seconds = time.perf_counter() - started
    counters = result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))["counters"]
    totals = {}
    for c in counters:
        totals[c.key.metric.name] = totals.get(c.key.metric.name, 0) + c.committed
    # None (never equal to another runner's) if the runner reported no counter.
    return seconds, totals.get("output_elements"), totals.get("output_checksum")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=int, default=1_000_000)
    parser.add_argument("--shapes", default=",".join(SHAPES))
    args = parser.parse_args(argv)
    shapes = [s for s in args.shapes.split(",") if s]

    from beam_spark_runner import SparkRunnerOptions
    from beam_spark_runner.session import get_or_create_session

    started = time.perf_counter()
    get_or_create_session(PipelineOptions(["--spark_master=" + SPARK_MASTER]).view_as(SparkRunnerOptions))
    print("SparkSession start-up (excluded below): %.1f s" % (time.perf_counter() - started))

    rows, mismatches = [], []
    for shape in shapes:
        runs = {name: run_shape(shape, args.elements, options) for name, _, options in RUNNERS}
        rows.append((shape, runs))
        reported = all(n is not None and checksum is not None for _, n, checksum in runs.values())
        differ = not reported or len({(n, checksum) for _, n, checksum in runs.values()}) > 1
        if differ:
            mismatches.append(
                "%s: %s"
                % (
                    shape,
                    ", ".join(
                        "%s %s outputs, checksum %s" % (name, n, checksum) for name, (_, n, checksum) in runs.items()
                    ),
                )
            )
        print(
            "%-10s spark %7.1f s  direct %7.1f s  direct_mp %7.1f s  ratio %.2fx / %.2fx  outputs %s / %s / %s%s"
            % (
                shape,
                runs["spark"][0],
                runs["direct"][0],
                runs["direct_mp"][0],
                runs["spark"][0] / runs["direct"][0],
                runs["spark"][0] / runs["direct_mp"][0],
                runs["spark"][1],
                runs["direct"][1],
                runs["direct_mp"][1],
                "  MISMATCH" if differ else "  (counts and checksums agree)",
            ),
            flush=True,
        )

    _print_table(rows)
    if mismatches:
        print(
            "MISMATCH: the runners' outputs differ or were not reported (count or checksum; None: no "
            "counter): %s" % "; ".join(mismatches),
            file=sys.stderr,
        )
    # The headline: the slowest shape, SparkRunner over in-process DirectRunner.
    worst = max((runs["spark"][0] / runs["direct"][0] for _, runs in rows), default=None)
    headline("load_tests", worst, 1.0, at_most=True, results_ok=not mismatches)
    return 1 if mismatches else 0


def _print_table(rows):
    """The markdown table: wall times, ratios and output counts per shape."""
    titles = [title for _, title, _ in RUNNERS]
    print(
        "\n| shape | %s | Spark / Direct | Spark / Direct, %d processes | outputs (%s) |"
        % (" | ".join("%s s" % t for t in titles), SPARK_CORES, " / ".join(titles))
    )
    print("|---|" + "---:|" * (len(RUNNERS) + 2) + "---|")
    for shape, runs in rows:
        print(
            "| %s | %s | %.2fx | %.2fx | %s |"
            % (
                shape,
                " | ".join("%.1f" % runs[name][0] for name, _, _ in RUNNERS),
                runs["spark"][0] / runs["direct"][0],
                runs["spark"][0] / runs["direct_mp"][0],
                " / ".join("%s" % runs[name][1] for name, _, _ in RUNNERS),
            )
        )


if __name__ == "__main__":
    sys.exit(main())
