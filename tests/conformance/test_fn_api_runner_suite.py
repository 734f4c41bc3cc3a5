"""Beam's own FnApiRunnerTest, unmodified from the installed wheel, run on
the Spark runner. Tests that need a feature of a later issue are skipped
with that issue named; every other test must pass."""

import unittest

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability.fn_api_runner import fn_runner_test

from beam_spark_runner import SparkRunner
from tests.conformance.skips import FN_API_RUNNER_SKIPS, STATE_BACKED_CODER_SKIPS


class SparkRunnerFnApiRunnerTest(fn_runner_test.FnApiRunnerTest):
    def create_pipeline(self, is_drain=False):
        return beam.Pipeline(runner=SparkRunner(is_drain=is_drain), options=PipelineOptions([]))


def _apply_skips(cls, skips):
    for name, reason in skips.items():
        if not hasattr(cls, name):
            raise AttributeError("skip list names %s, which %s does not have" % (name, cls.__name__))
        setattr(cls, name, unittest.skip(reason)(getattr(cls, name)))


_apply_skips(SparkRunnerFnApiRunnerTest, FN_API_RUNNER_SKIPS)


class SparkRunnerStateBackedCoderTest(fn_runner_test.FnApiBasedStateBackedCoderTest):
    """Beam's it_validatesrunner class next to FnApiRunnerTest: a GroupByKey
    whose values (200 x 300-character elements for one key) Beam's
    FnApiRunner serves as state-backed iterables; here the values of a key
    reach the DoFn from Spark's shuffle."""

    def create_pipeline(self):
        return beam.Pipeline(runner=SparkRunner(), options=PipelineOptions([]))


_apply_skips(SparkRunnerStateBackedCoderTest, STATE_BACKED_CODER_SKIPS)
