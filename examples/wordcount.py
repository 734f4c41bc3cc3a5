"""Word count: the main example job.

Reads text, splits it into words, counts each word and writes `word: count`
lines. Runs on the embedded local Spark master by default:

    python examples/wordcount.py --output /tmp/wordcount/counts

Any Beam runner works with the same code, e.g. `--runner=DirectRunner`.
"""

import argparse
import logging
import os
import re

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

DEFAULT_INPUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "sample.txt")


def build(p, input_pattern, output_prefix):
    """Adds the word-count transforms to pipeline `p`; returns the write result."""
    lines = p | "Read" >> beam.io.ReadFromText(input_pattern)
    counts = (
        lines
        | "Split" >> beam.FlatMap(lambda line: re.findall(r"[\w\']+", line, re.UNICODE))
        | "PairWithOne" >> beam.Map(lambda word: (word, 1))
        | "Count" >> beam.CombinePerKey(sum)
    )
    return (
        counts
        | "Format" >> beam.MapTuple(lambda word, count: "%s: %d" % (word, count))
        | "Write" >> beam.io.WriteToText(output_prefix)
    )


def run(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", default=DEFAULT_INPUT, help="Input file pattern.")
    parser.add_argument("--output", required=True, help="Output file prefix.")
    known, pipeline_args = parser.parse_known_args(argv)
    if not any(a.startswith("--runner") for a in pipeline_args):
        pipeline_args.append("--runner=beam_spark_runner.SparkRunner")
    with beam.Pipeline(options=PipelineOptions(pipeline_args)) as p:
        build(p, known.input, known.output)


if __name__ == "__main__":
    logging.getLogger().setLevel(logging.WARNING)
    run()
