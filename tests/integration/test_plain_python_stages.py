"""Stages of simple callables run as plain Python loops (worker/plain_stage.py)
with the same results, windows, tags, metrics and errors as on the SDK
harness. Each pipeline runs both ways (`--sdk_harness_only` is the harness)
against expectations computed here, not against each other only."""

import collections
import os
import traceback
import typing
import uuid
from typing import Iterator

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.metrics import Metrics
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms import window
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.windowed_value import WindowedValue

from beam_spark_runner import PipelineExecutionError, SparkRunner
from beam_spark_runner.translation.planner import plan_pipeline, pipeline_proto_of

BOTH_WAYS = pytest.mark.parametrize("harness_only", [False, True], ids=["plain", "harness"])


def _pipeline(harness_only):
    args = ["--sdk_harness_only"] if harness_only else []
    return beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(args))


def _executed_by(_):
    """Which executor is calling user code, from the call stack."""
    files = [frame.filename for frame in traceback.extract_stack()]
    if any(f.endswith("plain_steps.py") for f in files):
        return "plain"
    if any(f.endswith("bundle_processor.py") for f in files):
        return "harness"
    return "unknown"


@BOTH_WAYS
def test_simple_callables_run_on_the_chosen_executor(harness_only):
    with _pipeline(harness_only) as p:
        who = p | beam.Create([1, 2, 3]) | beam.Map(_executed_by) | beam.Distinct()
        assert_that(who, equal_to(["harness" if harness_only else "plain"]))


@BOTH_WAYS
def test_map_flatmap_filter_maptuple_and_lifted_combine(harness_only):
    lines = ["a b a", "c a", "", "b"]
    with _pipeline(harness_only) as p:
        counts = (
            p
            | beam.Create(lines)
            | beam.FlatMap(str.split)
            | beam.Filter(lambda w, banned: w != banned, "c")
            | beam.Map(lambda w, n=1: (w, n))
            | beam.CombinePerKey(sum)
            | beam.MapTuple(lambda w, c, suffix="!": "%s=%d%s" % (w, c, suffix))
        )
        assert_that(counts, equal_to(["a=3!", "b=2!"]))


@BOTH_WAYS
def test_timestamped_outputs_are_rewindowed_and_combined_per_window(harness_only):
    events = [("k", 1, 1), ("k", 2, 7), ("k", 4, 12), ("j", 8, 3)]

    def stamp(e):
        return window.TimestampedValue((e[0], e[1]), e[2])

    def with_window(kv, w=beam.DoFn.WindowParam, t=beam.DoFn.TimestampParam):
        return kv[0], kv[1], int(w.start), int(w.end), float(t)

    with _pipeline(harness_only) as p:
        sums = (
            p
            | beam.Create(events)
            | beam.Map(stamp)
            | beam.WindowInto(
                window.SlidingWindows(10, 5), timestamp_combiner=window.TimestampCombiner.OUTPUT_AT_EARLIEST
            )
            | beam.CombinePerKey(sum)
            | beam.Map(with_window)
        )
        assert_that(
            sums,
            equal_to(
                [
                    ("k", 3, 0, 10, 1.0),
                    ("k", 6, 5, 15, 7.0),
                    ("k", 4, 10, 20, 12.0),
                    ("k", 1, -5, 5, 1.0),
                    ("j", 8, -5, 5, 3.0),
                    ("j", 8, 0, 10, 3.0),
                ]
            ),
        )


@BOTH_WAYS
def test_timestamp_window_and_pane_parameters(harness_only):
    def describe(x, t=beam.DoFn.TimestampParam, w=beam.DoFn.WindowParam, pane=beam.DoFn.PaneInfoParam):
        return x, float(t), int(w.start), pane.is_first

    with _pipeline(harness_only) as p:
        out = (
            p
            | beam.Create([3, 12])
            | beam.Map(lambda x: window.TimestampedValue(x, x))
            | beam.WindowInto(window.SlidingWindows(10, 5))
            | beam.Map(describe)
        )
        # Once per window, as Beam's DoFnRunner invokes a WindowParam callable.
        assert_that(out, equal_to([(3, 3.0, -5, True), (3, 3.0, 0, True), (12, 12.0, 5, True), (12, 12.0, 10, True)]))


class _ByValueWindows(window.NonMergingWindowFn):
    """Assigns from the element, not the timestamp: one window per value."""

    def assign(self, context):
        return [window.IntervalWindow(context.element, context.element + 1)]

    def get_window_coder(self):
        return beam.coders.coders.IntervalWindowCoder()


@BOTH_WAYS
def test_window_into_builtin_and_element_dependent_windowfns(harness_only):
    def window_start(x, w=beam.DoFn.WindowParam):
        return x, int(w.start)

    with _pipeline(harness_only) as p:
        stamped = p | beam.Create([3, 12, 14]) | beam.Map(lambda x: window.TimestampedValue(x, x))
        fixed = stamped | "Fixed" >> beam.WindowInto(window.FixedWindows(10)) | "F" >> beam.Map(window_start)
        by_value = stamped | "ByValue" >> beam.WindowInto(_ByValueWindows()) | "V" >> beam.Map(window_start)
        assert_that(fixed, equal_to([(3, 0), (12, 10), (14, 10)]), label="fixed")
        assert_that(by_value, equal_to([(3, 3), (12, 12), (14, 14)]), label="by_value")


@BOTH_WAYS
def test_tagged_outputs_reach_their_pcollections(harness_only):
    def route(x):
        if x % 2:
            yield beam.pvalue.TaggedOutput("odd", x)
        else:
            yield x
        if x == 4:
            yield beam.pvalue.TaggedOutput("undeclared", x)  # dropped, as on the harness

    with _pipeline(harness_only) as p:
        results = p | beam.Create(range(6)) | beam.FlatMap(route).with_outputs("odd", main="even")
        assert_that(results.even, equal_to([0, 2, 4]), label="even")
        assert_that(results.odd | beam.Map(lambda x: x * 10), equal_to([10, 30, 50]), label="odd")


@BOTH_WAYS
def test_outputs_sharing_one_timestamp_object_keep_their_tags_and_windows(harness_only):
    """The plain path reuses the run of the previous TimestampedValue when the
    next one carries the same Timestamp object: only for the same output."""
    from apache_beam.utils.timestamp import Timestamp

    def fan_out(x):
        early, later = Timestamp.of(x), Timestamp.of(x + 10)
        for ts, value in ((early, x), (early, x + 1), (later, x + 2), (early, x + 3)):
            yield window.TimestampedValue(value, ts)
            yield beam.pvalue.TaggedOutput("tagged", window.TimestampedValue(-value, ts))

    def where(x, t=beam.DoFn.TimestampParam, w=beam.DoFn.WindowParam):
        return x, float(t), int(w.start)

    with _pipeline(harness_only) as p:
        results = (
            p
            | beam.Create([1])
            | beam.WindowInto(window.FixedWindows(10))
            | beam.FlatMap(fan_out).with_outputs("tagged", main="main")
        )
        # Reshuffles end the stage, so assert_that's Flatten (harness only)
        # does not join it.
        assert_that(
            results.main | "RM" >> beam.Reshuffle() | "M" >> beam.Map(where),
            equal_to([(1, 1.0, 0), (2, 1.0, 0), (3, 11.0, 10), (4, 1.0, 0)]),
            label="main",
        )
        assert_that(
            results.tagged | "RT" >> beam.Reshuffle() | "T" >> beam.Map(where),
            equal_to([(-1, 1.0, 0), (-2, 1.0, 0), (-3, 11.0, 10), (-4, 1.0, 0)]),
            label="tagged",
        )


class _GlobalWindowAtFinish(beam.DoFn):
    """As Beam's trigger_manager._GroupBundlesByKey: outputs into the global
    window, whatever the windowing of its PCollection."""

    def process(self, x):
        self.last = x

    def finish_bundle(self):
        yield WindowedValue(("k", self.last), 0, [GlobalWindow()])


def test_an_output_its_coder_cannot_encode_fails_naming_the_transform():
    p = _pipeline(False)
    _ = (
        p
        | beam.Create([1])
        | beam.WindowInto(window.FixedWindows(10))
        | "WrongWindow" >> beam.ParDo(_GlobalWindowAtFinish())
        | beam.GroupByKey()
    )
    with pytest.raises(PipelineExecutionError) as e:
        p.run().wait_until_finish()
    message = str(e.value)
    assert "an output of 'WrongWindow' cannot be encoded" in message
    assert "IntervalWindowCoder" in message and "GlobalWindow" in message


@BOTH_WAYS
def test_user_metrics_are_attributed_to_their_transform(harness_only):
    def counted(x):
        Metrics.counter("plain", "seen").inc()
        return x

    p = _pipeline(harness_only)
    _ = p | beam.Create(range(25)) | "CountMe" >> beam.Map(counted) | "NotMe" >> beam.Map(str)
    result = p.run()
    result.wait_until_finish()
    counters = result.metrics().query(MetricsFilter().with_name("seen"))["counters"]
    assert [(c.key.step, c.committed) for c in counters] == [("CountMe", 25)]


@BOTH_WAYS
def test_user_error_names_the_transform_and_keeps_the_traceback(harness_only):
    def explode(x):
        if x == 3:
            raise ValueError("plain boom %d" % x)
        return x

    p = _pipeline(harness_only)
    _ = p | beam.Create([1, 2, 3]) | "ExplodeInMap" >> beam.Map(explode)
    with pytest.raises(PipelineExecutionError) as e:
        p.run().wait_until_finish()
    message = str(e.value)
    assert "plain boom 3" in message
    assert "ExplodeInMap" in message
    assert "Traceback" in message and "in explode" in message


class _BundleSums(beam.DoFn):
    """Checks the lifecycle order as it goes; finish_bundle outputs the
    bundle's sum on the main output and on tag 'side'."""

    def setup(self):
        self.phase = "set up"

    def start_bundle(self):
        assert self.phase in ("set up", "finished"), self.phase
        self.phase, self.total = "started", 0

    def process(self, x):
        assert self.phase == "started", self.phase
        self.total += x
        yield x

    def finish_bundle(self):
        assert self.phase == "started", self.phase
        self.phase = "finished"
        yield WindowedValue(("bundle", self.total), 0, [GlobalWindow()])
        yield beam.pvalue.TaggedOutput("side", WindowedValue(self.total, 0, [GlobalWindow()]))

    def teardown(self):
        with open(os.path.join(self.teardown_dir, uuid.uuid4().hex), "w"):
            pass


def _label(v):
    return ("bundle", v[1]) if isinstance(v, tuple) else ("element", v)


@BOTH_WAYS
def test_dofn_class_lifecycle_and_finish_bundle_outputs(harness_only, tmp_path):
    fn = _BundleSums()
    fn.teardown_dir = str(tmp_path)
    with _pipeline(harness_only) as p:
        out = p | beam.Create(list(range(10)), reshuffle=False) | beam.ParDo(fn).with_outputs("side", main="main")
        assert_that(
            out.main | beam.Map(_label) | beam.CombinePerKey(sum),
            equal_to([("element", 45), ("bundle", 45)]),
            label="main",
        )
        assert_that(out.side | beam.CombineGlobally(sum), equal_to([45]), label="side")
    assert os.listdir(str(tmp_path)), "teardown was never called"


class _ReturnsString(beam.DoFn):
    def process(self, x):
        return "oops"


class _FinishesWithPlainValue(beam.DoFn):
    def process(self, x):
        yield x

    def finish_bundle(self):
        yield 1


class _StartsWithOutput(beam.DoFn):
    def start_bundle(self):
        return [1]

    def process(self, x):
        yield x


@BOTH_WAYS
@pytest.mark.parametrize(
    "fn, message",
    [
        (_ReturnsString(), "Returning a str from a ParDo or FlatMap is not allowed"),
        (_FinishesWithPlainValue(), "Finish Bundle should only output WindowedValue"),
        (_StartsWithOutput(), "Start Bundle should not output any elements"),
    ],
    ids=["process-returns-str", "finish-bundle-plain-value", "start-bundle-output"],
)
def test_dofn_class_misuse_fails_as_on_the_harness(harness_only, fn, message):
    p = _pipeline(harness_only)
    _ = p | beam.Create([1, 2]) | "Misused" >> beam.ParDo(fn)
    with pytest.raises(PipelineExecutionError) as e:
        p.run().wait_until_finish()
    assert message in str(e.value)
    assert "Misused" in str(e.value)


class _Doubler(beam.DoFn):
    def process(self, x):
        yield x * 2


class _BatchDoubler(beam.DoFn):
    def process_batch(self, batch: np.ndarray) -> Iterator[np.ndarray]:
        yield batch * 2

    def infer_output_type(self, input_type):
        return input_type


def _stage_kinds(build):
    p = beam.Pipeline()
    build(p)
    plan = plan_pipeline(pipeline_proto_of(p))
    return {name: stage.plain_spec is not None for stage in plan.stages for name in stage.sdk_transforms}


def test_only_stages_of_simple_callables_and_combiner_phases_are_planned_plain():
    # Each branch reads its own source so that fusion keeps them apart.
    def build(p):
        def source(label):
            return p | label >> beam.Create([1, 2, 3])

        _ = source("N1") | "Simple" >> beam.Map(lambda x: (x % 2, x)) | "Sum" >> beam.CombinePerKey(sum)
        _ = source("N2") | "WantsTimestamp" >> beam.Map(lambda x, t=beam.DoFn.TimestampParam: t)
        _ = source("N3") | "DoFnClass" >> beam.ParDo(_Doubler())
        _ = source("N4") | "WantsFinalizer" >> beam.Map(lambda x, f=beam.DoFn.BundleFinalizerParam: x)
        _ = source("N5") | "SideInput" >> beam.Map(lambda x, s: x + s, beam.pvalue.AsSingleton(source("N6")))
        _ = (
            source("N7")
            | "ToArray" >> beam.Map(lambda x: np.int64(x)).with_output_types(np.int64)
            | "BatchDoFn" >> beam.ParDo(_BatchDoubler())
        )

    kinds = _stage_kinds(build)
    assert kinds["Simple"] and kinds["Sum/Precombine"] and kinds["Sum/Merge"]
    assert kinds["WantsTimestamp"]  # filled from the element, see above
    assert kinds["DoFnClass"]
    assert not kinds["WantsFinalizer"]
    assert not kinds["SideInput"]
    assert not kinds["BatchDoFn"]


def test_runtime_type_check_wrappers_stay_on_the_harness():
    from apache_beam.typehints.typecheck import OutputCheckWrapperDoFn, TypeCheckWrapperDoFn
    from beam_spark_runner.worker.plain_callables import _is_plain_dofn_class

    assert _is_plain_dofn_class(_Doubler())
    wrapped = OutputCheckWrapperDoFn(
        TypeCheckWrapperDoFn(_Doubler(), beam.typehints.decorators.IOTypeHints.empty()), "Doubler"
    )
    assert not _is_plain_dofn_class(wrapped)


def _fails_on_three(x):
    if x == 3:
        raise ValueError("three")
    return "k", x


def _plain_stage_of(p, transform):
    """(plan, the plain-Python stage running `transform`, codecs of its
    input and output), to run the stage in this process."""
    from beam_spark_runner.worker import context, runs

    plan = plan_pipeline(pipeline_proto_of(p))
    (stage,) = [s for s in plan.stages if transform in s.sdk_transforms]
    assert stage.plain_spec is not None
    ctx = context.components_context(plan.components)
    return (
        plan,
        stage,
        runs.RunCodec(ctx.coders[stage.inputs[0].coder_id]),
        runs.RunCodec(ctx.coders[stage.outputs[0].coder_id]),
    )


def test_a_bundle_after_a_failed_one_starts_clean():
    """Streaming keeps one runner per worker across bundles; a retried task
    may run in the worker where the failed attempt ran. What the failed
    bundle pre-combined must not reach the next bundle's output."""
    from beam_spark_runner.worker import runs
    from beam_spark_runner.worker.plain_stage import PlainStageRunner
    from beam_spark_runner.worker.harness_stage import StageFailed

    p = beam.Pipeline()
    # After a Flatten (run by Spark), the stage reads encoded ints.
    both = (p | "A" >> beam.Create([1]), p | "B" >> beam.Create([2])) | beam.Flatten()
    _ = both | "MaybeFail" >> beam.Map(_fails_on_three) | beam.CombinePerKey(sum)
    plan, stage, in_codec, out_codec = _plain_stage_of(p, "MaybeFail")

    def block(*values):
        return 0, in_codec.encode([(runs.GLOBAL_TEMPLATE, list(values))])

    runner = PlainStageRunner(stage, stage.plain_spec, plan.components)
    with pytest.raises(StageFailed, match="three"):
        list(runner.run([block(1, 2), block(3)]))
    outputs = [v for _, b in runner.run([block(5)]) for _, vs in out_codec.decode(b) for v in vs]
    assert outputs == [("k", [5])]  # sum's accumulator, compacted
    runner.close()


def test_a_dofn_workers_cannot_unpickle_fails_naming_it(tmp_path, monkeypatch):
    """Planned plain on the driver, where the DoFn's module is importable; a
    worker that cannot import it must fail with that error and the
    transform's name, not fall over later."""
    import sys
    from beam_spark_runner.worker.plain_stage import PlainStageRunner
    from beam_spark_runner.worker.harness_stage import StageFailed

    (tmp_path / "only_on_the_driver.py").write_text(
        "import apache_beam as beam\n\nclass Tripler(beam.DoFn):\n    def process(self, x):\n        yield x * 3\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import only_on_the_driver

    p = beam.Pipeline()
    _ = p | beam.Create([1]) | "Triple" >> beam.ParDo(only_on_the_driver.Tripler()) | beam.Map(print)
    plan = plan_pipeline(pipeline_proto_of(p))
    (stage,) = [s for s in plan.stages if "Triple" in s.sdk_transforms]
    assert stage.plain_spec is not None
    # Now the "worker": the module is gone.
    monkeypatch.delitem(sys.modules, "only_on_the_driver")
    monkeypatch.setattr(sys, "path", [e for e in sys.path if e != str(tmp_path)])
    with pytest.raises(StageFailed) as e:
        PlainStageRunner(stage, stage.plain_spec, plan.components)
    assert "only_on_the_driver" in str(e.value) and "Triple" in str(e.value)


@pytest.mark.parametrize("fan_out", [2000, 20000])
def test_a_fanning_out_step_hands_its_output_on_in_bounded_pieces(fan_out):
    """A DoFn making many outputs per value (events from a tick): with 2000
    per value it gets fewer values per call (ChunkSizer); with 20000 per
    value, once the first value showed it, each value's outputs are handed
    on a piece at a time. Before, 100 values in one call held all their
    outputs at once (measured in the streaming benchmark: 7.7M, and twice
    the per-event time)."""
    from beam_spark_runner.worker import runs
    from beam_spark_runner.worker.plain_stage import CHUNK_OUTPUT_TARGET, PlainStageRunner
    from beam_spark_runner.worker.plain_steps import OUTPUT_PIECE

    p = beam.Pipeline()
    both = (p | "A" >> beam.Create([0]), p | "B" >> beam.Create([1])) | beam.Flatten()
    _ = (
        both
        | "FanOut" >> beam.FlatMap(lambda x, n: ((x, i) for i in range(n)), fan_out)
        | "Sum" >> beam.CombinePerKey(sum)
    )
    plan, stage, in_codec, out_codec = _plain_stage_of(p, "FanOut")
    runner = PlainStageRunner(stage, stage.plain_spec, plan.components)
    (fan_out_step,) = [s for s in stage.plain_spec.steps if s.name.endswith("FanOut")]
    step = runner._steps[fan_out_step.transform_id]
    calls = []  # per call of the step: the sizes of the pieces it handed on

    def spy(chunk, process=step.process):
        calls.append([])
        for pcoll, out_runs in process(chunk):
            calls[-1].append(runs.count(out_runs))
            yield pcoll, out_runs

    step.process = spy
    block = in_codec.encode([(runs.GLOBAL_TEMPLATE, [0, 1] * 50)])
    sums = dict(v for _, b in runner.run([(0, block)]) for _, vs in out_codec.decode(b) for v in vs)
    runner.close()
    expected = 50 * sum(range(fan_out))
    assert sums == {0: [expected], 1: [expected]}  # sum's accumulator, compacted
    pieces = [n for call in calls for n in call]
    assert sum(pieces) == 100 * fan_out
    if fan_out < CHUNK_OUTPUT_TARGET:
        assert max(sum(call) for call in calls) <= CHUNK_OUTPUT_TARGET
    else:
        assert pieces[0] == fan_out  # the first value's outputs, whole
        assert max(pieces[1:]) <= OUTPUT_PIECE


def test_outputs_leave_the_stage_while_one_value_is_still_producing():
    """Values making 100,000 outputs each straight to a shuffle: the stage
    hands them to Spark in blocks of about FLUSH_ELEMENTS as they are made,
    not once the input block is done (the runs of 4 such values held 500,000
    outputs and ran a 768 MB worker out of memory before)."""
    from beam_spark_runner.worker import runs
    from beam_spark_runner.worker.plain_stage import FLUSH_ELEMENTS, PlainStageRunner
    from beam_spark_runner.worker.plain_steps import OUTPUT_PIECE

    made = [0]

    def fan_out(x):
        for i in range(100_000):
            made[0] += 1
            yield x, i

    p = beam.Pipeline()
    both = (p | "A" >> beam.Create([0]), p | "B" >> beam.Create([1])) | beam.Flatten()
    _ = both | "FanOut" >> beam.FlatMap(fan_out) | beam.GroupByKey()
    plan, stage, in_codec, out_codec = _plain_stage_of(p, "FanOut")
    runner = PlainStageRunner(stage, stage.plain_spec, plan.components)
    block = in_codec.encode([(runs.GLOBAL_TEMPLATE, [0, 1, 2])])
    sizes, made_when_yielded = [], []
    for _, out in runner.run([(0, block)]):
        sizes.append(sum(len(vs) for _, vs in out_codec.decode(out)))
        made_when_yielded.append(made[0])
    runner.close()
    assert sum(sizes) == 300_000
    # The first value's outputs come whole (its fan-out was not known yet,
    # see the test above); after it, blocks of bounded size that leave
    # while the values are still producing: nothing piles up.
    assert sizes[0] == 100_000
    assert max(sizes[1:]) <= FLUSH_ELEMENTS + OUTPUT_PIECE
    assert made_when_yielded[1] < 100_000 + FLUSH_ELEMENTS + OUTPUT_PIECE
    assert all(m - sum(sizes[: i + 1]) <= OUTPUT_PIECE for i, m in enumerate(made_when_yielded))


def test_window_into_and_the_precombine_get_their_input_whole():
    """Only a ParDo's input is cut into chunks (its fan-out is unknown): a
    WindowInto or a combiner phase outputs no more than it is given, so it
    gets its input whole instead of slices that copy its value lists."""
    from beam_spark_runner.worker import runs
    from beam_spark_runner.worker.plain_stage import CHUNK_ELEMENTS, PlainStageRunner

    p = beam.Pipeline()
    both = (p | "A" >> beam.Create([("a", 1)]), p | "B" >> beam.Create([("b", 1)])) | beam.Flatten()
    _ = both | "Window" >> beam.WindowInto(window.FixedWindows(10)) | "Count" >> beam.combiners.Count.PerKey()
    plan, stage, in_codec, out_codec = _plain_stage_of(p, "Window")
    runner = PlainStageRunner(stage, stage.plain_spec, plan.components)
    calls = collections.defaultdict(list)  # step name -> values per call
    for spec in stage.plain_spec.steps:
        step = runner._steps[spec.transform_id]

        def spy(chunk, process=step.process, name=spec.name):
            calls[name].append(runs.count(chunk))
            return process(chunk)

        step.process = spy
    n = 5 * CHUNK_ELEMENTS
    block = in_codec.encode([(runs.GLOBAL_TEMPLATE, [("k%d" % (i % 3), i) for i in range(n)])])
    counts = dict(v for _, b in runner.run([(0, block)]) for _, vs in out_codec.decode(b) for v in vs)
    runner.close()
    assert counts == {"k0": (n + 2) // 3, "k1": (n + 1) // 3, "k2": n // 3}  # partial counts
    (window_into,) = [name for name in calls if name.endswith("Window")]
    (precombine,) = [name for name in calls if name.endswith("Precombine")]
    assert calls[window_into] == [n] and calls[precombine] == [n]


class _SumOfInputs(beam.combiners.CountCombineFn):
    """A subclass: its own add_input(s) must be used, not a count."""

    def add_input(self, accumulator, element):
        return accumulator + element

    def add_inputs(self, accumulator, elements):
        return accumulator + sum(elements)


@BOTH_WAYS
def test_count_per_key_in_global_and_fixed_windows_and_a_countcombinefn_subclass(harness_only):
    from apache_beam.utils.timestamp import Timestamp

    on_time, late = Timestamp.of(5), Timestamp.of(15)

    def events(n):  # shared Timestamp objects, alternating, as a generator would
        for i in range(n):
            yield window.TimestampedValue(("k%d" % (i % 3), i), late if i % 4 == 0 else on_time)

    with _pipeline(harness_only) as p:
        stamped = p | beam.Create([40]) | beam.FlatMap(events)
        global_counts = stamped | "CountAll" >> beam.combiners.Count.PerKey()
        windowed = stamped | beam.WindowInto(window.FixedWindows(10))
        per_window = (
            windowed
            | "CountPerWindow" >> beam.combiners.Count.PerKey()
            | "WithStart" >> beam.Map(lambda kv, w=beam.DoFn.WindowParam: (kv, int(w.start)))
        )
        sums = stamped | "SubclassSums" >> beam.CombinePerKey(_SumOfInputs())
        assert_that(global_counts, equal_to([("k0", 14), ("k1", 13), ("k2", 13)]), label="global")
        expected = collections.Counter(("k%d" % (i % 3), 10 if i % 4 == 0 else 0) for i in range(40))
        assert_that(per_window, equal_to([((k, n), start) for (k, start), n in expected.items()]), label="per_window")
        assert_that(
            sums, equal_to([("k%d" % r, sum(i for i in range(40) if i % 3 == r)) for r in range(3)]), label="subclass"
        )


def test_the_plain_precombine_of_count_counts_without_calling_add_inputs(monkeypatch):
    """Count.PerKey's pre-combine counts per key in place: CountCombineFn's
    add_inputs (which would list every input) is not called."""
    from beam_spark_runner.worker import runs
    from beam_spark_runner.worker.plain_stage import PlainStageRunner

    def listing_not_expected(self, accumulator, elements):
        raise AssertionError("add_inputs called")

    monkeypatch.setattr(beam.combiners.CountCombineFn, "add_inputs", listing_not_expected)
    p = beam.Pipeline()
    both = (p | "A" >> beam.Create([0]), p | "B" >> beam.Create([1])) | beam.Flatten()
    _ = both | "Key" >> beam.Map(lambda x: ("k%d" % (x % 2), x)) | beam.combiners.Count.PerKey()
    plan, stage, in_codec, out_codec = _plain_stage_of(p, "Key")
    runner = PlainStageRunner(stage, stage.plain_spec, plan.components)
    block = in_codec.encode([(runs.GLOBAL_TEMPLATE, [0, 1, 2, 3, 4])])
    counts = dict(v for _, b in runner.run([(0, block)]) for _, vs in out_codec.decode(b) for v in vs)
    runner.close()
    assert counts == {"k0": 3, "k1": 2}


@pytest.mark.parametrize("counting", [False, True], ids=["sum", "count"])
def test_the_precombine_table_evicts_its_oldest_entries_when_full(monkeypatch, counting):
    """A pre-combine holds at most MAX_PRECOMBINE_KEYS (window, key)
    accumulators; when full it hands on the oldest tenth (oldest windows
    first) as partial accumulators. Their merge downstream must give the
    same totals as without eviction."""
    from beam_spark_runner.worker import plain_steps, runs
    from beam_spark_runner.worker.plain_stage import PlainStageRunner

    monkeypatch.setattr(plain_steps, "MAX_PRECOMBINE_KEYS", 20)
    monkeypatch.setattr(plain_steps, "PRECOMBINE_BUFFER", 16)  # fold often
    p = beam.Pipeline()
    both = (p | "A" >> beam.Create([0]), p | "B" >> beam.Create([1])) | beam.Flatten()
    keyed = (
        both
        | "Stamp" >> beam.Map(lambda x: window.TimestampedValue((x % 17, x), x % 30))
        | beam.WindowInto(window.FixedWindows(10))
    )
    _ = keyed | (beam.combiners.Count.PerKey() if counting else beam.CombinePerKey(sum))
    plan, stage, in_codec, out_codec = _plain_stage_of(p, "Stamp")
    runner = PlainStageRunner(stage, stage.plain_spec, plan.components)
    values = list(range(600))
    block = in_codec.encode([(runs.GLOBAL_TEMPLATE, values)])
    partials = [
        (int(t.windows[0].start), k, v)
        for _, b in runner.run([(0, block)])
        for t, vs in out_codec.decode(b)
        for k, v in vs
    ]
    runner.close()
    totals = collections.Counter()
    for start, k, v in partials:  # sum's accumulators are compacted lists
        totals[(start, k)] += v if counting else sum(v)
    expected = collections.Counter()
    for x in values:
        expected[(x % 30 // 10 * 10, x % 17)] += 1 if counting else x
    assert totals == expected
    assert len(partials) > len(expected)  # it did evict


class _WholeElements(beam.DoFn):
    """Describes each element from its WindowedValue, and at the end of the
    bundle emits a count in the last element's windows."""

    def start_bundle(self):
        self._seen = 0
        self._last = None

    def process(self, x, element=beam.DoFn.WindowedValueParam):
        self._seen += 1
        self._last = element
        yield x, element.value, float(element.timestamp), sorted(int(w.start) for w in element.windows)

    def finish_bundle(self):
        if self._last is not None:
            yield self._last.with_value(("seen", self._seen))


@BOTH_WAYS
def test_a_windowed_value_parameter_gets_the_element_in_all_its_windows_once(harness_only):
    with _pipeline(harness_only) as p:
        out = (
            p
            | beam.Create([3, 12])
            | beam.Map(lambda x: window.TimestampedValue(x, x))
            | beam.WindowInto(window.SlidingWindows(10, 5))
            | beam.ParDo(_WholeElements()).with_output_types(typing.Any)
            | "Global" >> beam.WindowInto(window.GlobalWindows())
        )
        described = out | beam.Filter(lambda o: o[0] != "seen")
        seen = out | beam.Filter(lambda o: o[0] == "seen") | beam.Map(lambda o: o[1]) | beam.CombineGlobally(sum)
        # Unlike a WindowParam, called once per element, with both its
        # windows; its output is in both windows, so twice in the global one.
        described_once = [(3, 3, 3.0, [-5, 0]), (12, 12, 12.0, [5, 10])]
        assert_that(described, equal_to(described_once * 2), label="described")
        # Each bundle's count, emitted in its last element's two windows: the
        # elements counted once each, then twice over, however they were bundled.
        assert_that(seen, equal_to([4]), label="seen")


def test_a_dofn_taking_a_windowed_value_is_planned_plain():
    def build(p):
        _ = p | beam.Create([1, 2]) | "Whole" >> beam.ParDo(_WholeElements())

    assert _stage_kinds(build)["Whole"]


@BOTH_WAYS
def test_map_and_flatmap_take_a_windowed_value_parameter(harness_only):
    with _pipeline(harness_only) as p:
        windowed = (
            p
            | beam.Create([3])
            | beam.Map(lambda x: window.TimestampedValue(x, x))
            | beam.WindowInto(window.SlidingWindows(10, 5))
        )
        mapped = windowed | beam.Map(lambda x, wv=beam.DoFn.WindowedValueParam: (x, len(wv.windows)))
        flat = windowed | beam.FlatMap(lambda x, wv=beam.DoFn.WindowedValueParam: [(x, float(wv.timestamp))])
        assert_that(
            mapped | "GlobalMapped" >> beam.WindowInto(window.GlobalWindows()), equal_to([(3, 2)] * 2), label="map"
        )
        assert_that(
            flat | "GlobalFlat" >> beam.WindowInto(window.GlobalWindows()), equal_to([(3, 3.0)] * 2), label="flat"
        )
