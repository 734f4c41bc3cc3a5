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


def declared_actions(parser):
    """The arguments a parser declares. argparse offers no public way to
    list them; its `_actions` list and action classes are read here and
    nowhere else."""
    return list(parser._actions)


def declared_number_types():
    """{option name: int or float} over every PipelineOptions class
    registered in this process. Beam's `get_all_options` hands its parser,
    with every option added, to `add_extra_args_fn`."""
    from apache_beam.options.pipeline_options import PipelineOptions

    found = {}

    def collect(parser):
        for action in declared_actions(parser):
            if action.type in (int, float):
                found[action.dest] = action.type

    PipelineOptions([]).get_all_options(add_extra_args_fn=collect)
    return found


def describe_runner_options():
    """One PipelineOptionDescriptor per SparkRunnerOptions option."""
    parser = argparse.ArgumentParser(add_help=False)
    SparkRunnerOptions._add_argparse_args(parser)
    descriptors = []
    for action in declared_actions(parser):
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
