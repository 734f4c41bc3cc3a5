"""Word count through the job service versus SparkRunner in-process.

    python benchmarks/job_service.py [--lines 400000] [--rounds 3] [--quick]

One `beam-spark-job-server` process (its own SparkSession, local[2,4]) and
this process's own SparkSession (local[2,4]) run the same word count
(examples/wordcount.py) over the same generated text: through the service
with Beam's PortableRunner and a LOOPBACK environment, and with SparkRunner
here. Each side runs once to warm up, then the rounds alternate; all
outputs must be identical. Also reported: the service with the client's
per-job `pip freeze` turned off (Beam's
`--experiments=disable_logging_submission_environment`), and in-process
with Beam's own file I/O (`--beam_io_only`). The ratio is the median service time over the
median in-process time; the job server's start-up (process start to
listening, SparkSession included) is reported apart.

Headline: `job_service_wordcount ratio=<x> target<=1.10 PASS|MISS`.
"""

import argparse
import glob
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.headline import headline  # noqa: E402
from benchmarks.runner_session import start_runner_session  # noqa: E402

MASTER = "local[2,4]"


def make_input(path, lines):
    rng = random.Random(7)
    vocabulary = ["w%04d" % i for i in range(5000)]
    with open(path, "w") as f:
        for _ in range(lines):
            f.write(" ".join(rng.choice(vocabulary) for _ in range(8)) + "\n")


def start_server(log_path):
    began = time.monotonic()
    log = open(log_path, "w")
    process = subprocess.Popen(
        [sys.executable, "-m", "beam_spark_runner.job_server", "--port=0", "--spark_master=" + MASTER],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    line = process.stdout.readline()
    if "listening on" not in line:
        raise SystemExit("the job server did not start; see %s" % log_path)
    return process, int(line.rsplit(":", 1)[1]), time.monotonic() - began


def run_wordcount(runner_args, input_path, output_prefix):
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from examples.wordcount import build

    began = time.monotonic()
    with beam.Pipeline(options=PipelineOptions(runner_args)) as p:
        build(p, input_path, output_prefix)
    return time.monotonic() - began


def read_output(prefix):
    lines = []
    for name in sorted(glob.glob(prefix + "*")):
        with open(name) as f:
            lines.extend(f.read().splitlines())
    return sorted(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=400000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="50,000 lines, 2 rounds")
    args = parser.parse_args(argv)
    if args.quick:
        args.lines, args.rounds = 50000, 2
    work = tempfile.mkdtemp(prefix="bench-job-service-")
    input_path = os.path.join(work, "input.txt")
    make_input(input_path, args.lines)
    server, port, startup = start_server(os.path.join(work, "server.log"))
    print("job server start-up (process to listening, SparkSession included): %.1f s" % startup, flush=True)
    try:
        start_runner_session(MASTER, "bench-job-service-inprocess")

        service_args = ["--runner=PortableRunner", "--job_endpoint=localhost:%d" % port, "--environment_type=LOOPBACK"]
        sides = {
            "service": service_args,
            # Beam's PortableRunner runs `pip freeze` on the client for every
            # job (a record of the submitting environment, ~0.5 s here);
            # this experiment of Beam's turns it off: informational.
            "no_freeze": service_args + ["--experiments=disable_logging_submission_environment"],
            "direct": ["--runner=beam_spark_runner.SparkRunner"],
            # In-process with Beam's own ReadFromText/WriteToText expansions,
            # which is what a pipeline proto from a PortableRunner client
            # holds (the runner's Spark-native file I/O replaces Python
            # transform objects, before the proto exists): informational.
            "beam_io": ["--runner=beam_spark_runner.SparkRunner", "--beam_io_only"],
        }
        times = {side: [] for side in sides}
        outputs = {}
        for round_index in range(args.rounds + 1):
            order = list(sides) if round_index % 2 == 0 else list(reversed(list(sides)))
            for side in order:
                prefix = os.path.join(work, "out-%s-%d" % (side, round_index))
                elapsed = run_wordcount(sides[side], input_path, prefix)
                outputs[side] = read_output(prefix)
                if round_index:  # round 0 warms both up
                    times[side].append(elapsed)
                print(
                    "round %d %-8s %.2f s%s" % (round_index, side, elapsed, "" if round_index else " (warm-up)"),
                    flush=True,
                )
        same = all(output == outputs["direct"] for output in outputs.values()) and len(outputs["direct"]) > 0
        print("outputs identical: %s (%d words)" % (same, len(outputs["direct"])))
        service, direct = statistics.median(times["service"]), statistics.median(times["direct"])
        beam_io = statistics.median(times["beam_io"])
        no_freeze = statistics.median(times["no_freeze"])
        print(
            "median: through the job service without the client's pip freeze %.2f s (ratio %.3f)"
            % (no_freeze, no_freeze / direct)
        )
        print(
            "median: through the job service %.2f s, SparkRunner in-process %.2f s, in-process with "
            "Beam's file I/O %.2f s (service / that: %.2f)" % (service, direct, beam_io, service / beam_io)
        )
        return headline("job_service_wordcount", service / direct, 1.10, at_most=True, results_ok=same)
    finally:
        server.terminate()
        server.wait(60)


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
