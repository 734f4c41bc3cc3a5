"""DoFns that require stable input (@RequiresStableInput) on Spark: in
batch a retried task of the DoFn's stage reads the very elements the
failed attempt read, even when what produced them draws random numbers;
in streaming the DoFn's stage runs one micro-batch behind its input and
gives the same output as without the requirement. (The streaming replay
after a driver kill: tests/faults/test_driver_faults.py.)"""

import os
import random
import uuid

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms import userstate, window

from beam_spark_runner import SparkRunner
from tests.stable_input_dofn import StableParDo

ELEMENTS = 40


def _pipeline(streaming=False):
    options = PipelineOptions(["--sdk_harness_only"])
    options.view_as(StandardOptions).streaming = streaming
    return beam.Pipeline(runner=SparkRunner(), options=options)


class _FailFirstAttempt(beam.DoFn):
    """Records each (element, draw) it processes in a file per bundle; the
    first bundle to finish anywhere fails once its elements are recorded,
    so Spark runs that task again."""

    def __init__(self, directory):
        self.directory = directory

    def start_bundle(self):
        self.seen = []

    def process(self, element):
        self.seen.append(element)
        yield element[0]

    def finish_bundle(self):
        with open(os.path.join(self.directory, "%s.txt" % uuid.uuid4().hex), "w") as f:
            f.write("\n".join("%d %r" % pair for pair in self.seen))
        try:
            fd = os.open(os.path.join(self.directory, "failed"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.close(fd)
        raise RuntimeError("the first attempt of this task fails after recording its elements")


def test_a_retried_task_reads_the_input_its_failed_attempt_read(tmp_path):
    directory = str(tmp_path)
    with _pipeline() as p:
        out = (
            p
            | beam.Create(range(ELEMENTS))
            | "Draw" >> beam.Map(lambda x: (x, random.random()))
            | "Effect" >> StableParDo(_FailFirstAttempt(directory))
        )
        assert_that(out, equal_to(list(range(ELEMENTS))))
    draws = {}
    for name in os.listdir(directory):
        if name.endswith(".txt"):
            with open(os.path.join(directory, name)) as f:
                for line in f.read().splitlines():
                    x, draw = line.split(" ")
                    draws.setdefault(int(x), []).append(draw)
    assert os.path.exists(os.path.join(directory, "failed"))
    assert sorted(draws) == list(range(ELEMENTS))
    # The failed attempt's elements were processed twice, with the same draws.
    assert any(len(d) > 1 for d in draws.values())
    assert {x: d for x, d in draws.items() if len(set(d)) > 1} == {}


class _Emit(beam.DoFn):
    def process(self, kv, w=beam.DoFn.WindowParam):
        yield (kv[0], sorted(kv[1]), int(w.start))


class _CountPerKey(beam.DoFn):
    COUNT = userstate.ReadModifyWriteStateSpec("count", beam.coders.VarIntCoder())
    FLUSH = userstate.TimerSpec("flush", userstate.TimeDomain.WATERMARK)

    def process(
        self, kv, w=beam.DoFn.WindowParam, count=beam.DoFn.StateParam(COUNT), flush=beam.DoFn.TimerParam(FLUSH)
    ):
        count.write((count.read() or 0) + 1)
        flush.set(w.end)

    @userstate.on_timer(FLUSH)
    def emit(self, key=beam.DoFn.KeyParam, w=beam.DoFn.WindowParam, count=beam.DoFn.StateParam(COUNT)):
        yield (key, int(w.start), count.read())


def _streamed(pardo):
    p = _pipeline(streaming=True)
    stream = (
        TestStream()
        .add_elements([window.TimestampedValue(("a", 1), 1), window.TimestampedValue(("b", 2), 2)])
        .advance_watermark_to(6)
        .add_elements([window.TimestampedValue(("a", 3), 7), window.TimestampedValue(("a", 4), 8)])
        .advance_watermark_to(20)
        .add_elements([window.TimestampedValue(("b", 5), 21)])
        .advance_watermark_to_infinity()
    )
    windowed = p | stream | beam.WindowInto(window.FixedWindows(5))
    grouped = windowed | beam.GroupByKey() | "Emit" >> pardo(_Emit())
    counted = windowed | "Count" >> pardo(_CountPerKey())
    assert_that(
        grouped,
        equal_to([("a", [1], 0), ("b", [2], 0), ("a", [3, 4], 5), ("b", [5], 20)]),
        label="grouped",
    )
    assert_that(counted, equal_to([("a", 0, 1), ("b", 0, 1), ("a", 5, 2), ("b", 20, 1)]), label="counted")
    return p


def test_streaming_stages_that_require_stable_input_give_what_they_give_without_it():
    for pardo in (beam.ParDo, StableParDo):
        _streamed(pardo).run().wait_until_finish()
