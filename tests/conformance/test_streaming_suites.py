"""Beam's own streaming tests, from the installed wheel, on SparkRunner.

* `trigger_test.TestStreamTranscriptTest` / `WeakTestStreamTranscriptTest`:
  every transcript of `trigger_transcripts.yaml` through TestStream, a
  GroupByKey and a CombinePerKey, checked by a stateful DoFn. They build
  `TestPipeline()`, so SparkRunner is made TestPipeline's default here.
* `deduplicate_test.DeduplicateTest`: a processing-time timer still pending
  when the TestStream ends.
* `test_stream_test.TestStreamTest`: these build `TestPipeline(options=...)`,
  which ignores the default runner; the module's `TestPipeline` name is
  pointed at a subclass that runs on SparkRunner (the tests are unmodified).

CI runs a representative subset of the transcripts (`CI_TRANSCRIPTS`); set
BEAM_SPARK_FULL_STREAMING_SUITES=1 to run all of them.
"""

import os
import unittest

import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing import test_stream_test
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.transforms import deduplicate_test, trigger_test

from beam_spark_runner import SparkRunner
from tests.conformance.skips import TEST_STREAM_SKIPS, TRANSCRIPT_SKIPS

FULL = os.environ.get("BEAM_SPARK_FULL_STREAMING_SUITES") == "1"

# One per feature: on-time panes, late data, lateness + early/late triggers,
# merging sessions, EARLIEST combiner, a custom WindowFn, discarding with an
# empty on-time pane, and both ways a transcript expects the run to fail.
CI_TRANSCRIPTS = {
    "test_fixed_default",
    "test_fixed_default_late_data",
    "test_fixed_drop_late_data_after_allowed_lateness",
    "test_early_late_sessions",
    "test_timestamp_combiner_earliest",
    "test_timestamp_combiner_custom_timestamping_earliest",
    "test_discarding_early_fixed",
    "test_bad_output",
    "test_missing_output",
}
CI_WEAK_TRANSCRIPTS = {"test_fixed_default", "test_early_late_sessions", "test_bad_expected_values"}


@pytest.fixture(autouse=True, scope="module")
def spark_is_test_pipeline_default():
    previous = TestPipeline.pytest_test_pipeline_options
    TestPipeline.pytest_test_pipeline_options = "--runner=beam_spark_runner.SparkRunner"
    module_pipeline = test_stream_test.TestPipeline
    test_stream_test.TestPipeline = _SparkTestPipeline
    yield
    test_stream_test.TestPipeline = module_pipeline
    TestPipeline.pytest_test_pipeline_options = previous


class _SparkTestPipeline(TestPipeline):
    """TestPipeline on SparkRunner even when built with explicit options."""

    def __init__(self, runner=None, options=None, *args, **kwargs):
        super().__init__(runner or SparkRunner(), options, *args, **kwargs)


def _subset(case, keep, reason):
    """The transcript tests of `case` not in `keep` skip in CI (not counted
    as passing: pytest reports them skipped, with the command to run them)."""
    attrs = {"__module__": __name__}
    for name in dir(case):
        if name in TRANSCRIPT_SKIPS:
            attrs[name] = unittest.skip(TRANSCRIPT_SKIPS[name])(getattr(case, name))
        elif not FULL and name.startswith("test_") and name not in keep:
            attrs[name] = unittest.skip(reason)(getattr(case, name))
    return attrs


_FULL_ONLY = "outside the CI subset; run with BEAM_SPARK_FULL_STREAMING_SUITES=1"

SparkTestStreamTranscriptTest = type(
    "SparkTestStreamTranscriptTest",
    (trigger_test.TestStreamTranscriptTest,),
    _subset(trigger_test.TestStreamTranscriptTest, CI_TRANSCRIPTS, _FULL_ONLY),
)


class _ThreeKeyGroups:
    """Runs its transcripts with three key-groups (the strict ones run with
    the default two: the session's parallelism)."""

    def setUp(self):
        super().setUp()
        self._options = TestPipeline.pytest_test_pipeline_options
        TestPipeline.pytest_test_pipeline_options = self._options + " --parallelism=3"

    def tearDown(self):
        TestPipeline.pytest_test_pipeline_options = self._options
        super().tearDown()


SparkWeakTestStreamTranscriptTest = type(
    "SparkWeakTestStreamTranscriptTest",
    (_ThreeKeyGroups, trigger_test.WeakTestStreamTranscriptTest),
    _subset(trigger_test.WeakTestStreamTranscriptTest, CI_WEAK_TRANSCRIPTS, _FULL_ONLY),
)


def _with_skips(case, skips):
    attrs = {"__module__": __name__}
    for name, reason in skips.items():
        if not hasattr(case, name):
            raise AttributeError("skip list names %s.%s, which does not exist" % (case.__name__, name))
        attrs[name] = unittest.skip(reason)(getattr(case, name))
    return attrs


SparkTestStreamTest = type(
    "SparkTestStreamTest",
    (test_stream_test.TestStreamTest,),
    _with_skips(test_stream_test.TestStreamTest, TEST_STREAM_SKIPS),
)


# A processing-time timer still pending when the TestStream ends: the run
# must end anyway (the timer can never fire), as on Beam's DirectRunner.
# Deduplicate's stateful DoFn (set state, event- and processing-time timers)
# runs on the runner's own stateful path here ...
SparkDeduplicateTest = type("SparkDeduplicateTest", (deduplicate_test.DeduplicateTest,), {"__module__": __name__})


class SparkDeduplicateOnHarnessTest(deduplicate_test.DeduplicateTest):
    """... and in Beam's SDK harness here (--sdk_harness_only)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.set_runner(SparkRunner())
        self.set_options(PipelineOptions(["--sdk_harness_only"]))


def test_ci_subsets_and_skips_name_tests_beam_has():
    """A renamed Beam test must not silently turn into a skip or drop out of
    the CI subset."""
    for case, keep in (
        (trigger_test.TestStreamTranscriptTest, CI_TRANSCRIPTS),
        (trigger_test.WeakTestStreamTranscriptTest, CI_WEAK_TRANSCRIPTS),
    ):
        names = {n for n in dir(case) if n.startswith("test_")}
        assert len(names) == 18, sorted(names)
        assert keep <= names, keep - names
        assert set(TRANSCRIPT_SKIPS) <= names, set(TRANSCRIPT_SKIPS) - names


def test_test_stream_tests_here_run_on_spark_runner():
    assert isinstance(test_stream_test.TestPipeline(options=None).runner, SparkRunner)
    assert isinstance(TestPipeline().runner, SparkRunner)
