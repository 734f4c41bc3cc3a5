"""Stateful DoFns on the runner's own path (worker/stateful_step.py, state
in worker/user_state.py) give what Beam's SDK harness gives: each pipeline
runs both ways (`--sdk_harness_only` is the harness), batch and streaming,
against expectations computed here. Which DoFns the runner takes, and which
stay on the harness, is checked on the plan."""

import traceback

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms import combiners, userstate, window
from apache_beam.transforms.timeutil import TimeDomain

from beam_spark_runner import SparkRunner
from beam_spark_runner.translation.planner import pipeline_proto_of, plan_pipeline

BOTH_WAYS = pytest.mark.parametrize("harness_only", [False, True], ids=["plain", "harness"])


def _pipeline(harness_only, streaming=False):
    args = ["--sdk_harness_only"] if harness_only else []
    options = PipelineOptions(args)
    options.view_as(StandardOptions).streaming = streaming
    return beam.Pipeline(runner=SparkRunner(), options=options)


def _executor():
    files = [frame.filename for frame in traceback.extract_stack()]
    if any(f.endswith("bundle_processor.py") for f in files):
        return "harness"
    if any(f.endswith("stateful_step.py") for f in files):
        return "plain"
    return "unknown"


class _AllKinds(beam.DoFn):
    """Every state kind the runner keeps, an event-time timer with dynamic
    tags, the key and window parameters, a tagged output."""

    COUNT = userstate.ReadModifyWriteStateSpec("count", beam.coders.VarIntCoder())
    BAG = userstate.BagStateSpec("bag", beam.coders.StrUtf8Coder())
    SEEN = userstate.SetStateSpec("seen", beam.coders.VarIntCoder())
    TOTAL = userstate.CombiningValueStateSpec("total", sum)
    # Not MeanCombineFn: the harness's combining state merges an empty list
    # of accumulators half the time (random), which MeanCombineFn refuses.
    LISTED = userstate.CombiningValueStateSpec("listed", combiners.ToListCombineFn())
    FLUSH = userstate.TimerSpec("flush", TimeDomain.WATERMARK)

    def process(
        self,
        kv,
        key=beam.DoFn.KeyParam,
        w=beam.DoFn.WindowParam,
        count=beam.DoFn.StateParam(COUNT),
        bag=beam.DoFn.StateParam(BAG),
        seen=beam.DoFn.StateParam(SEEN),
        total=beam.DoFn.StateParam(TOTAL),
        listed=beam.DoFn.StateParam(LISTED),
        flush=beam.DoFn.TimerParam(FLUSH),
    ):
        value = kv[1]
        count.write((count.read() or 0) + 1)
        bag.add(str(value))
        seen.add(value % 3)
        total.add(value)
        listed.add(value)
        flush.set(w.max_timestamp())
        flush.set(w.start, dynamic_timer_tag="early")
        if value < 0:
            yield beam.pvalue.TaggedOutput("negative", (key, value))
        yield beam.pvalue.TaggedOutput("executor", _executor())

    @userstate.on_timer(FLUSH)
    def on_flush(
        self,
        key=beam.DoFn.KeyParam,
        w=beam.DoFn.WindowParam,
        ts=beam.DoFn.TimestampParam,
        tag=beam.DoFn.DynamicTimerTagParam,
        count=beam.DoFn.StateParam(COUNT),
        bag=beam.DoFn.StateParam(BAG),
        seen=beam.DoFn.StateParam(SEEN),
        total=beam.DoFn.StateParam(TOTAL),
        listed=beam.DoFn.StateParam(LISTED),
    ):
        if tag == "early":
            yield "early", key, int(w.start), ts == w.start
            return
        yield (
            "flush",
            key,
            int(w.start),
            count.read(),
            sorted(bag.read()),
            sorted(seen.read()),
            total.read(),
            sorted(listed.read()),
        )
        for cell in (count, bag, seen, total, listed):
            cell.clear()


EVENTS = [("a", 1, 1), ("a", 5, 2), ("b", 7, 3), ("a", -2, 12), ("b", 4, 14), ("b", 3, 15)]


def _expected():
    out, negative = [], []
    windows = {}
    for key, value, ts in EVENTS:
        windows.setdefault((key, ts // 10 * 10), []).append(value)
        if value < 0:
            negative.append((key, value))
    for (key, start), values in sorted(windows.items()):
        out.append(("early", key, start, True))
        out.append(
            (
                "flush",
                key,
                start,
                len(values),
                sorted(str(v) for v in values),
                sorted({v % 3 for v in values}),
                sum(values),
                sorted(values),
            )
        )
    return out, negative


def _all_kinds(p, events):
    outputs = (
        events
        | beam.WindowInto(window.FixedWindows(10))
        | beam.ParDo(_AllKinds()).with_outputs("negative", "executor", main="main")
    )
    expected, negative = _expected()
    assert_that(outputs.main, equal_to(expected), label="main")
    assert_that(outputs.negative, equal_to(negative), label="negative")
    return outputs.executor


@BOTH_WAYS
def test_state_kinds_and_dynamic_timers_in_batch(harness_only):
    with _pipeline(harness_only) as p:
        events = p | beam.Create(EVENTS) | beam.Map(lambda e: window.TimestampedValue((e[0], e[1]), e[2]))
        executors = _all_kinds(p, events)
        assert_that(executors, equal_to(["harness" if harness_only else "plain"] * len(EVENTS)), label="executor")


@BOTH_WAYS
def test_state_kinds_and_dynamic_timers_in_streaming(harness_only):
    """Timers fire as the watermark passes them, across micro-batches, with
    the state each key's earlier batches left."""
    stream = TestStream()
    for key, value, ts in EVENTS:
        stream = stream.add_elements([window.TimestampedValue((key, value), ts)])
        if ts in (2, 12):
            stream = stream.advance_watermark_to(ts + 1)
    stream = stream.advance_watermark_to_infinity()
    with _pipeline(harness_only, streaming=True) as p:
        executors = _all_kinds(p, p | stream)
        assert_that(executors, equal_to(["harness" if harness_only else "plain"] * len(EVENTS)), label="executor")


class _ProcessingTimeFlush(beam.DoFn):
    """Buffers values and flushes them from a processing-time timer."""

    BUFFER = userstate.BagStateSpec("buffer", beam.coders.VarIntCoder())
    FLUSH = userstate.TimerSpec("flush", TimeDomain.REAL_TIME)

    def process(self, kv, buffer=beam.DoFn.StateParam(BUFFER), flush=beam.DoFn.TimerParam(FLUSH)):
        buffer.add(kv[1])
        flush.set(beam.utils.timestamp.Timestamp.now() + 1)

    @userstate.on_timer(FLUSH)
    def on_flush(self, key=beam.DoFn.KeyParam, buffer=beam.DoFn.StateParam(BUFFER)):
        yield key, sorted(buffer.read())
        buffer.clear()


@BOTH_WAYS
def test_processing_time_timers_fire_at_the_end_of_bounded_input(harness_only):
    with _pipeline(harness_only) as p:
        flushed = p | beam.Create([("a", 2), ("a", 1), ("b", 3)]) | beam.ParDo(_ProcessingTimeFlush())
        assert_that(flushed, equal_to([("a", [1, 2]), ("b", [3])]))


class _Ordered(beam.DoFn):
    LIST = userstate.OrderedListStateSpec("list", beam.coders.VarIntCoder())

    def process(self, kv, ordered=beam.DoFn.StateParam(LIST)):
        ordered.add((beam.utils.timestamp.Timestamp(kv[1]), kv[1]))
        yield kv


class _Counting(beam.DoFn):
    COUNT = userstate.ReadModifyWriteStateSpec("count", beam.coders.VarIntCoder())

    def process(self, kv, count=beam.DoFn.StateParam(COUNT)):
        count.write((count.read() or 0) + 1)
        yield kv


class _Finalizing(_Counting):
    def process(self, kv, count=beam.DoFn.StateParam(_Counting.COUNT), f=beam.DoFn.BundleFinalizerParam):
        yield kv


class _WithSide(_Counting):
    def process(self, kv, side, count=beam.DoFn.StateParam(_Counting.COUNT)):
        yield kv


def _plain_stateful(build, harness_only=False):
    p = beam.Pipeline()
    build(p)
    plan = plan_pipeline(pipeline_proto_of(p), plain_python=not harness_only)
    return {
        name: stage.plain_spec is not None for stage in plan.stages if stage.stateful for name in stage.sdk_transforms
    }


def test_which_stateful_dofns_the_runner_takes():
    def build(p):
        def source(label):
            return p | label >> beam.Create([("a", 1)])

        _ = source("N1") | "AllKinds" >> beam.ParDo(_AllKinds()).with_outputs("negative", "executor", main="main")
        _ = source("N2") | "Counting" >> beam.ParDo(_Counting()) | "After" >> beam.Map(lambda kv: kv)
        _ = source("N3") | "Ordered" >> beam.ParDo(_Ordered())
        _ = source("N4") | "Finalizing" >> beam.ParDo(_Finalizing())
        _ = source("N5") | "WithSide" >> beam.ParDo(_WithSide(), beam.pvalue.AsList(source("N6")))

    kinds = _plain_stateful(build)
    assert kinds["AllKinds/ParDo(_AllKinds)"] and kinds["Counting"] and kinds["After"]
    assert not kinds["Ordered"]  # ordered-list state: the harness keeps it
    assert not kinds["Finalizing"]
    assert not kinds["WithSide"]
    assert not any(_plain_stateful(build, harness_only=True).values())
