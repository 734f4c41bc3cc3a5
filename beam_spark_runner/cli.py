"""`beam-spark-plan`: print the Spark plan of a pipeline without running it.

    beam-spark-plan pipeline.pb          # a serialized beam_runner_api Pipeline
    beam-spark-plan --text pipeline.txt  # the same in protobuf text format

From Python, `beam_spark_runner.describe_plan(pipeline)` does the same for a
`beam.Pipeline` object.
"""
import argparse
import sys

from google.protobuf import text_format

from apache_beam.portability.api import beam_runner_api_pb2

from beam_spark_runner.runner import plan_pipeline
from beam_spark_runner.translation.requirements import UnsupportedPipelineError


def plan_main(argv=None):
    parser = argparse.ArgumentParser(prog="beam-spark-plan", description=__doc__.splitlines()[0])
    parser.add_argument("pipeline", help="file holding a Beam Pipeline proto")
    parser.add_argument("--text", action="store_true", help="the file is protobuf text format")
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
        print(plan_pipeline(proto).describe())
    except UnsupportedPipelineError as e:
        print(e, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(plan_main())
