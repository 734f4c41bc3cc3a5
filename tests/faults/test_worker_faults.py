"""Faults in Python workers during a streaming run: a worker killed
mid-batch (`os._exit`) or user code raising once, in a stateless stage, a
stateful stage, a timer callback, after a retracting GroupByKey and in a
stage reading a side input. Spark retries the task (the test master is
`local[2,4]`, like the runner's default `local[*,4]`) after rolling state
back to the previous batch, so the output holds every element exactly once.
The check names the key and the sequence numbers lost or doubled.

Each case asserts that its fault really fired (a marker file), so a case
whose fault point moved cannot pass without testing anything.
"""

import collections

import apache_beam as beam
import pytest
import triggers
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import BeamAssertException, assert_that
from apache_beam.transforms import trigger, userstate
from apache_beam.transforms.window import FixedWindows, TimestampedValue
from apache_beam.utils import timestamp

from beam_spark_runner import SparkRunner
from beam_spark_runner.result import PipelineState
from tests.faults.injection import CRASH, RAISE, exactly_once, fired, inject_once, sequence_problems

KEYS = ("a", "b", "c", "d")
COUNT = 12  # sequence numbers per key, 4 per event and fixed window


def _source():
    stream = TestStream()
    for chunk in range(3):
        seqs = range(chunk * 4, chunk * 4 + 4)
        stream = stream.add_elements([TimestampedValue((k, s), s) for s in seqs for k in KEYS])
        stream = stream.advance_watermark_to((chunk + 1) * 4)
    return stream.advance_watermark_to_infinity()


def _pipeline():
    return beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(["--streaming", "--sdk_harness_only"]))


class _FaultAt(beam.DoFn):
    """Passes (key, seq) through; the fault fires at one element."""

    def __init__(self, marker, how, at):
        self.marker, self.how, self.at = marker, how, at

    def process(self, kv):
        if tuple(kv) == self.at:
            inject_once(self.marker, self.how)
        yield kv


class _BufferPerWindow(beam.DoFn):
    """Stateful: buffers a key's sequence numbers and emits them when the
    window's end timer fires; the fault fires while processing `at`
    (stateful stage) or in the timer callback of `at`'s key and window."""

    SEQS = userstate.BagStateSpec("seqs", beam.coders.VarIntCoder())
    END = userstate.TimerSpec("end", userstate.TimeDomain.WATERMARK)

    def __init__(self, marker, how, at, in_timer):
        self.marker, self.how, self.at, self.in_timer = marker, how, at, in_timer

    def process(self, kv, w=beam.DoFn.WindowParam, seqs=beam.DoFn.StateParam(SEQS), end=beam.DoFn.TimerParam(END)):
        seqs.add(kv[1])
        end.set(w.max_timestamp())
        if not self.in_timer and tuple(kv) == self.at:
            inject_once(self.marker, self.how)

    @userstate.on_timer(END)
    def flush(self, key=beam.DoFn.KeyParam, w=beam.DoFn.WindowParam, seqs=beam.DoFn.StateParam(SEQS)):
        if self.in_timer and key == self.at[0] and w.start <= self.at[1] < w.end:
            inject_once(self.marker, self.how)
        for s in sorted(seqs.read()):
            yield key, s
        seqs.clear()


def _stateless(p, fault):
    return p | _source() | beam.ParDo(fault(("b", 5)))


def _stateful(p, fault, in_timer=False):
    marker, how = fault.args
    return (
        p | _source() | beam.WindowInto(FixedWindows(4)) | beam.ParDo(_BufferPerWindow(marker, how, ("c", 6), in_timer))
    )


def _side_input(p, fault):
    side = p | "side" >> beam.Create([100])
    return (
        p
        | _source()
        | beam.Map(lambda kv, offset: (kv[0], kv[1] + offset - 100), offset=beam.pvalue.AsSingleton(side))
        | beam.ParDo(fault(("d", 9)))
    )


class _Fault:
    def __init__(self, marker, how):
        self.args = (marker, how)

    def __call__(self, at):
        return _FaultAt(self.args[0], self.args[1], at)


PIPELINES = {
    "stateless": _stateless,
    "stateful": _stateful,
    "timer": lambda p, fault: _stateful(p, fault, in_timer=True),
    "side_input": _side_input,
}


@pytest.mark.parametrize("how", [CRASH, RAISE])
@pytest.mark.parametrize("where", sorted(PIPELINES))
def test_a_worker_fault_mid_batch_loses_and_doubles_nothing(tmp_path, where, how):
    marker = str(tmp_path / "fault")
    p = _pipeline()
    out = PIPELINES[where](p, _Fault(marker, how))
    assert_that(out, exactly_once(KEYS, COUNT))
    assert p.run().wait_until_finish() == PipelineState.DONE
    assert fired(marker), "the fault never fired: the case tested nothing"


def test_retracting_panes_feed_a_second_aggregation_exactly_once_after_a_crash(tmp_path):
    """Early and on-time panes of a RETRACTING GroupByKey, summed again
    downstream: a crash in the stage between the two aggregations must not
    leave a pane or a retraction counted twice or lost."""
    marker = str(tmp_path / "fault")
    p = _pipeline()
    sizes = (
        p
        | _source()
        | beam.WindowInto(
            FixedWindows(4),
            trigger=trigger.AfterWatermark(early=trigger.AfterCount(2)),
            accumulation_mode=triggers.RETRACTING,
        )
        | beam.GroupByKey()
        | beam.Map(lambda kv: (kv[0], triggers.map_pane(lambda values: len(list(values)), kv[1])))
        | beam.ParDo(_FaultAt(marker, CRASH, ("a", 4)))
        | "again" >> beam.CombinePerKey(sum)
        | beam.ParDo(_WithWindowStart())
    )
    assert_that(sizes, _live_values_are([(k, start, 4) for k in KEYS for start in (0, 4, 8)]))
    assert p.run().wait_until_finish() == PipelineState.DONE
    assert fired(marker)


def _live_values_are(expected):
    """The second aggregation inherits the RETRACTING windowing: its panes
    retract what they replace. What is live once every retraction is
    applied must be `expected`; a pane or retraction counted twice or lost
    shows as a value too many, too few, or retracted without being there."""

    def match(actual):
        live = collections.Counter()
        for key, start, value in actual:
            if isinstance(value, triggers.Retraction):
                live[(key, start, value.value)] -= 1
            else:
                live[(key, start, value)] += 1
        wrong = {k: n for k, n in live.items() if n not in (0, 1) or (n == 1) != (k in expected)}
        missing = [k for k in expected if live[k] != 1]
        if wrong or missing:
            raise BeamAssertException("live values off (value: count): %s; missing: %s" % (wrong, missing))

    return match


class _WithWindowStart(beam.DoFn):
    def process(self, kv, w=beam.DoFn.WindowParam):
        yield kv[0], int(w.start), kv[1]


class _FailAttempts(beam.DoFn):
    """Raises at element `at` on its first `attempts` tries (counted in a
    file, across Python workers): with 4, every attempt Spark makes of the
    task (local[2,4]) fails, so the micro-batch fails."""

    def __init__(self, counter, attempts, at):
        self.counter, self.attempts, self.at = counter, attempts, at

    def process(self, kv):
        if tuple(kv) == self.at:
            with open(self.counter, "a+") as f:
                f.seek(0)
                tries = len(f.read())
                if tries < self.attempts:
                    f.write("x")
                    raise RuntimeError("injected failure, try %d of %d" % (tries + 1, self.attempts))
        yield kv


def _failing_batch_pipeline(tmp_path, *flags):
    counter = str(tmp_path / "tries")
    p = beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(["--streaming", "--sdk_harness_only", *flags]))
    out = p | _source() | beam.ParDo(_FailAttempts(counter, 4, ("a", 6)))
    assert_that(out, exactly_once(KEYS, COUNT))
    return p, counter


def test_a_micro_batch_failing_every_task_attempt_fails_the_run_by_default(tmp_path):
    p, counter = _failing_batch_pipeline(tmp_path)
    with pytest.raises(Exception, match="injected failure"):
        p.run().wait_until_finish()
    assert open(counter).read() == "xxxx"


def test_tolerable_failed_batches_restarts_the_query_from_the_checkpoint(tmp_path):
    """--tolerable_failed_batches=1: the failed micro-batch is replayed by a
    new query from the last completed checkpoint, and the output is still
    exactly once."""
    p, counter = _failing_batch_pipeline(tmp_path, "--tolerable_failed_batches=1")
    assert p.run().wait_until_finish() == PipelineState.DONE
    assert open(counter).read() == "xxxx"


def _late_source():
    """Per key: seqs 0-2 on time in [0, 4), seq 3 late in [0, 4) (after the
    watermark passed 4, within the allowed lateness), 4-7 in [4, 8), 8-11
    in [8, 12)."""

    def at(seqs, ts_of):
        return [TimestampedValue((k, s), ts_of(s)) for s in seqs for k in KEYS]

    return (
        TestStream()
        .add_elements(at(range(3), lambda s: s))
        .advance_watermark_to(5)
        .add_elements(at([3], lambda s: 3))
        .add_elements(at(range(4, 8), lambda s: s))
        .advance_watermark_to(9)
        .add_elements(at(range(8, 12), lambda s: s))
        .advance_watermark_to_infinity()
    )


class _Panes(beam.DoFn):
    def process(self, kv, w=beam.DoFn.WindowParam, pane=beam.DoFn.PaneInfoParam):
        yield kv[0], int(w.start), pane.index, sorted(kv[1])


def _last_accumulating_panes_hold_each_seq_once(actual):
    """ACCUMULATING: each (key, window)'s last pane holds all its seqs; no
    pane holds one twice; together, every (key, seq) exactly once."""
    last = {}
    for key, start, index, values in actual:
        if len(set(values)) != len(values):
            raise BeamAssertException("pane %d of %s@%d holds a seq twice: %s" % (index, key, start, values))
        if (key, start) not in last or index > last[(key, start)][0]:
            last[(key, start)] = (index, values)
    problems = sequence_problems([(k, s) for (k, _), (_, vs) in last.items() for s in vs], KEYS, COUNT)
    if problems:
        raise BeamAssertException("; ".join(problems))


@pytest.mark.parametrize("how", [CRASH, RAISE])
def test_accumulating_early_on_time_and_late_panes_after_a_fault(tmp_path, how):
    """A windowed GroupByKey with early (every 2 elements), on-time and late
    firings, ACCUMULATING; the fault hits the late element of key "b" on
    its way to the GroupByKey."""
    marker = str(tmp_path / "fault")
    p = _pipeline()
    panes = (
        p
        | _late_source()
        | beam.ParDo(_FaultAt(marker, how, ("b", 3)))
        | beam.WindowInto(
            FixedWindows(4),
            trigger=trigger.AfterWatermark(early=trigger.AfterCount(2), late=trigger.AfterCount(1)),
            accumulation_mode=trigger.AccumulationMode.ACCUMULATING,
            allowed_lateness=10,
        )
        | beam.GroupByKey()
        | beam.ParDo(_Panes())
    )
    assert_that(panes, _last_accumulating_panes_hold_each_seq_once)
    assert p.run().wait_until_finish() == PipelineState.DONE
    assert fired(marker)


class _FlushOnProcessingTime(beam.DoFn):
    """Stateful: buffers a key's seqs; a processing-time timer (1 s into the
    stream clock's span of the key's first buffered element) flushes the buffer, and an event-time
    timer at the window's end flushes what is left. The fault fires in the
    processing-time callback of key "a"."""

    SEQS = userstate.BagStateSpec("seqs", beam.coders.VarIntCoder())
    SOON = userstate.TimerSpec("soon", userstate.TimeDomain.REAL_TIME)
    END = userstate.TimerSpec("end", userstate.TimeDomain.WATERMARK)

    def __init__(self, marker, how):
        self.marker, self.how = marker, how

    def process(
        self,
        kv,
        w=beam.DoFn.WindowParam,
        seqs=beam.DoFn.StateParam(SEQS),
        soon=beam.DoFn.TimerParam(SOON),
        end=beam.DoFn.TimerParam(END),
    ):
        if not list(seqs.read()):
            # The TestStream's processing-time clock starts at 0 and moves
            # 2 s after each chunk of 4 seqs: due 1 s into the chunk's span.
            soon.set(timestamp.Timestamp(seconds=2 * (kv[1] // 4) + 1))
        seqs.add(kv[1])
        end.set(w.max_timestamp())

    @userstate.on_timer(SOON)
    def on_soon(self, key=beam.DoFn.KeyParam, seqs=beam.DoFn.StateParam(SEQS)):
        if key == "a":
            inject_once(self.marker, self.how)
        yield from self._flush(key, seqs)

    @userstate.on_timer(END)
    def on_end(self, key=beam.DoFn.KeyParam, seqs=beam.DoFn.StateParam(SEQS)):
        yield from self._flush(key, seqs)

    @staticmethod
    def _flush(key, seqs):
        for s in sorted(seqs.read()):
            yield key, s
        seqs.clear()


@pytest.mark.parametrize("how", [CRASH, RAISE])
def test_a_fault_in_a_processing_time_timer_loses_and_doubles_nothing(tmp_path, how):
    marker = str(tmp_path / "fault")
    stream = TestStream()
    for chunk in range(3):
        seqs = range(chunk * 4, chunk * 4 + 4)
        stream = stream.add_elements([TimestampedValue((k, s), s) for s in seqs for k in KEYS])
        stream = stream.advance_processing_time(2).advance_watermark_to((chunk + 1) * 4)
    p = _pipeline()
    out = (
        p
        | stream.advance_watermark_to_infinity()
        | beam.WindowInto(FixedWindows(4))
        | beam.ParDo(_FlushOnProcessingTime(marker, how))
    )
    assert_that(out, exactly_once(KEYS, COUNT))
    assert p.run().wait_until_finish() == PipelineState.DONE
    assert fired(marker), "the processing-time timer never fired: the case tested nothing"
