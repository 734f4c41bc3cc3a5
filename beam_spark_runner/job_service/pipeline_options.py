"""The runner's own pipeline options, described for the Job API's
DescribePipelineOptions: Beam's PortableRunner adds them to its command-line
parser, so `--spark_conf`, `--checkpoint_dir`, ... given to a PortableRunner
client reach the job."""

import argparse

from apache_beam.portability.api import beam_job_api_pb2

from beam_spark_runner.options import SparkRunnerOptions

_Type = beam_job_api_pb2.PipelineOptionType


def _option_type(action):
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        return _Type.BOOLEAN
    if isinstance(action, argparse._AppendAction):
        return _Type.ARRAY
    if action.type is int:
        return _Type.INTEGER
    if action.type is float:
        return _Type.NUMBER
    return _Type.STRING


def describe_runner_options():
    """One PipelineOptionDescriptor per SparkRunnerOptions option.

    argparse offers no public way to list a parser's arguments; its
    `_actions` list and action classes are read here and nowhere else."""
    parser = argparse.ArgumentParser(add_help=False)
    SparkRunnerOptions._add_argparse_args(parser)
    descriptors = []
    for action in parser._actions:
        default = action.default
        descriptors.append(
            beam_job_api_pb2.PipelineOptionDescriptor(
                name=action.dest,
                type=_option_type(action),
                description=action.help or "",
                default_value=""
                if default is None or default == []
                else str(default).lower()
                if isinstance(default, bool)
                else str(default),
                group="SparkRunnerOptions",
            )
        )
    return descriptors
