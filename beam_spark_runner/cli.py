"""`beam-spark-plan`: print the Spark plan of a pipeline without running it.

    beam-spark-plan pipeline.pb          # a serialized beam_runner_api Pipeline
    beam-spark-plan --text pipeline.txt  # the same in protobuf text format
    beam-spark-plan --streaming ...      # plan as SparkRunner --streaming would

A pipeline with a TestStream is planned for streaming, as SparkRunner runs it.

From Python, `beam_spark_runner.describe_plan(pipeline)` does the same for a
`beam.Pipeline` object.
"""

import argparse
import sys

from google.protobuf import text_format

from apache_beam.portability.api import beam_runner_api_pb2

from beam_spark_runner.translation.planner import is_streaming, plan_pipeline, plan_streaming_pipeline
from beam_spark_runner.errors import UnsupportedPipelineError


def plan_main(argv=None):
    parser = argparse.ArgumentParser(prog="beam-spark-plan", description=__doc__.splitlines()[0])
    parser.add_argument("pipeline", help="file holding a Beam Pipeline proto")
    parser.add_argument("--text", action="store_true", help="the file is protobuf text format")
    parser.add_argument("--streaming", action="store_true", help="plan for Structured Streaming")
    args = parser.parse_args(argv)
    proto = beam_runner_api_pb2.Pipeline()
    mode = "r" if args.text else "rb"
    with open(args.pipeline, mode) as f:
        data = f.read()
    if args.text:
        text_format.Parse(data, proto)
    else:
        proto.ParseFromString(data)
    try:
        streaming = args.streaming or is_streaming(proto)
        plan = plan_streaming_pipeline(proto) if streaming else plan_pipeline(proto)
        print(plan.describe())
    except UnsupportedPipelineError as e:
        print(e, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(plan_main())
