"""Runs transcripts in the project's format (tests/core/transcript_harness.py)
on SparkRunner, as pipelines:

* streaming: through Beam's own TestStream transcript harness
  (`trigger_test.BaseTestStreamTranscriptTest._execute`, strict order: every
  pane must come out before the next action's marker), with a GroupByKey and
  a CombinePerKey; `clock: t` (absolute) becomes TestStream processing-time
  advances;
* batch: the transcript's input as a bounded `Create`, with a GroupByKey and
  a CombinePerKey, every pane checked against `batch_expect` (Beam's
  `_windowed_value_info_check`: as many panes as expected, each matching).

Each case runs in one of two shapes (`SHAPES`, picked by its name): one
key-group and tiny bundles, or three key-groups and default bundles.

Beam's Python `WindowInto` cannot set a windowing strategy's
`closing_behavior` / `on_time_behavior`; `ClosingRulesRunner` writes the
spec's values into the pipeline proto before SparkRunner plans it, as a
pipeline from another SDK or the job service would carry them.
"""

import contextlib
import zlib

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.portability import common_urns
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that
from apache_beam.transforms import trigger_test
from apache_beam.transforms.window import TimestampedValue

from beam_spark_runner import SparkRunner
from tests.core.transcript_harness import closing_of, parse_spec, transcript_inputs
from triggers.closing import PYTHON_SDK_DEFAULT

RUNNER = "--runner=tests.conformance.transcripts_on_spark.ClosingRulesRunner"


class ClosingRulesRunner(SparkRunner):
    """SparkRunner that sets `rules` (triggers.closing.ClosingRules) as the
    closing and on-time behaviour of every non-global windowing strategy."""

    rules = PYTHON_SDK_DEFAULT

    def run_portable_pipeline(self, pipeline_proto, options):
        rules = ClosingRulesRunner.rules
        for strategy in pipeline_proto.components.windowing_strategies.values():
            if strategy.window_fn.urn != common_urns.global_windows.urn:
                strategy.closing_behavior = rules.closing_behavior
                strategy.on_time_behavior = rules.on_time_behavior
        return super().run_portable_pipeline(pipeline_proto, options)


@contextlib.contextmanager
def closing_rules(rules):
    previous = ClosingRulesRunner.rules
    ClosingRulesRunner.rules = rules
    try:
        yield
    finally:
        ClosingRulesRunner.rules = previous


def _relative_clock(transcript):
    """(action, params) pairs with absolute `clock: t` turned into the
    TestStream's processing-time advances (by t minus the previous clock)."""
    out, now = [], 0
    for line in transcript:
        ((action, params),) = line.items()
        if action == "clock":
            if params > now:
                out.append(("clock", params - now))
                now = params
        else:
            out.append((action, params))
    return out


class _Streaming(trigger_test.BaseTestStreamTranscriptTest):
    allow_out_of_order = False

    def runTest(self):  # unittest needs one; the spec runs through run()
        pass


# The shapes a case runs in, picked by its name (deterministic): the
# number of key-groups / shuffle partitions, and the input bytes per bundle
# (batch; 64 bytes puts every few elements in a bundle of its own).
SHAPES = (("--parallelism=1", "--bundle_size_bytes=64"), ("--parallelism=3",))


def shape_of(spec):
    return SHAPES[zlib.crc32(spec["name"].encode()) % len(SHAPES)]


def run_streaming(spec):
    """Runs the spec's transcript through TestStream on SparkRunner; raises on
    a pane that is missing, unexpected or different."""
    window_fn, trigger_fn, mode, combiner, lateness = parse_spec(spec)
    previous = TestPipeline.pytest_test_pipeline_options
    TestPipeline.pytest_test_pipeline_options = " ".join((RUNNER,) + shape_of(spec))
    try:
        with closing_rules(closing_of(spec)):
            _Streaming()._execute(
                window_fn, trigger_fn, mode, combiner, lateness, _relative_clock(spec["transcript"]), spec
            )
    finally:
        TestPipeline.pytest_test_pipeline_options = previous


def run_batch(spec):
    """Runs the spec's input as a bounded pipeline on SparkRunner and checks
    every pane of a GroupByKey and a CombinePerKey against `batch_expect`."""
    window_fn, trigger_fn, mode, combiner, lateness = parse_spec(spec)
    expected = spec["batch_expect"]

    def check(actual):
        trigger_test._windowed_value_info_check(actual, expected)

    options = PipelineOptions(["--allow_unsafe_triggers", *shape_of(spec)])
    with closing_rules(closing_of(spec)), TestPipeline(runner=ClosingRulesRunner(), options=options) as p:
        windowed = (
            p
            | beam.Create(transcript_inputs(spec))
            | beam.Map(lambda t: TimestampedValue(("key", t), t))
            | beam.WindowInto(
                window_fn,
                trigger=trigger_fn,
                accumulation_mode=mode,
                timestamp_combiner=combiner,
                allowed_lateness=lateness,
            )
        )
        for label, aggregation in (
            ("Grouped", beam.GroupByKey()),
            ("Combined", beam.CombinePerKey(trigger_test._ConcatCombineFn())),
        ):
            panes = (
                windowed
                | label >> aggregation
                | "%sInfo" % label >> beam.MapTuple(trigger_test._windowed_value_info_map_fn)
                | "%sValue" % label >> beam.MapTuple(lambda _, info: info)
            )
            assert_that(panes, check, label="Check%s" % label)
