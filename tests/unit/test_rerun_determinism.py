"""A streaming keyed operator computes the same output and state when
Spark runs its task again: Spark re-runs a finished stateful task whose
shuffle output went with a lost executor, keeps one attempt's state, and
its readers may get the other attempt's output. Work decided by the wall
clock (PeriodicImpulse's due ticks, `Timestamp.now()`, residual delays) is
decided by the batch's journaled processing time instead
(`beam_internals.frozen_wall_clock`). tests/faults/test_executor_loss.py
found the bug: a re-run PeriodicImpulse emitted the ticks up to its own
clock, and every tick of the next batch was published twice."""

import pickle
import time

import apache_beam as beam
from apache_beam.io.restriction_trackers import OffsetRange
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import window
from apache_beam.transforms.periodicsequence import PeriodicImpulse
from apache_beam.transforms.userstate import TimerSpec, on_timer
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.utils.timestamp import Timestamp
from apache_beam.utils.windowed_value import WindowedValue

from beam_spark_runner import versions
from beam_spark_runner.plans import OperatorKind
from beam_spark_runner.streaming import rows as R
from beam_spark_runner.streaming.keyed_state import DictStore
from beam_spark_runner.streaming.operators import SdfOperator
from beam_spark_runner.streaming.stateful_operator import StatefulStageOperator
from beam_spark_runner.translation.planner import pipeline_proto_of, plan_streaming_pipeline
from beam_spark_runner.worker.beam_internals import frozen_wall_clock
from windowing.timestamps import MAX_US

SECOND = 10**6


def test_beams_wall_clock_reads_the_frozen_instant_inside_only():
    import apache_beam.transforms.periodicsequence as periodicsequence

    with frozen_wall_clock(1234 * SECOND):
        assert Timestamp.now() == Timestamp(1234)
        assert periodicsequence.time.time() == 1234.0
        time.sleep(0)  # the rest of the time module is the real one
        with frozen_wall_clock(None):  # unknown time: nothing changes
            assert Timestamp.now() == Timestamp(1234)
    assert abs(Timestamp.now().micros / 1e6 - time.time()) < 60


def _periodic_impulse_operator(start, stop, interval):
    p = beam.Pipeline(options=PipelineOptions(["--streaming"]))
    _ = p | PeriodicImpulse(start_timestamp=start, stop_timestamp=stop, fire_interval=interval) | beam.Map(print)
    plan = plan_streaming_pipeline(pipeline_proto_of(p))
    op = next(op for op in plan.operators if op.kind == OperatorKind.SDF)
    return op, SdfOperator(op, plan, 1)


def _data_rows(result):
    return [r for r in R.unpacked(result.rows) if r.kind == R.DATA]


def test_a_rerun_periodic_impulse_emits_the_ticks_due_at_the_batch_time_not_at_its_own():
    start = int(time.time()) - 100  # ticks every second, the first 100 s ago
    op, operator = _periodic_impulse_operator(start, start + 1000, 1.0)
    truncator = operator._truncator_of()
    (dest,) = [d for i, d in enumerate(op.inputs) if i == truncator.main_index]
    element = WindowedValue(((start, start + 1000, 1.0), (OffsetRange(0, 1000), None)), 0, [window.GlobalWindow()])
    row = R.data(R.dest_text(dest), truncator._impl.encode_nested(element.with_value((element.value, 1000.0))), 0)
    steps = [[0, MAX_US, (start + 10) * SECOND + SECOND // 2]]  # the batch's processing time: start + 10.5 s

    first = operator.run(None, [row], steps)
    time.sleep(1.1)  # the re-run comes later: by the wall clock, another tick is due
    again = operator.run(None, [row], steps)

    # Ticks start .. start + 10 s: those due at the batch's processing time.
    assert len(_data_rows(first)) == 11
    assert _data_rows(again) == _data_rows(first)
    assert again.blob == first.blob and again.hold == first.hold
    (residual,) = pickle.loads(first.blob)["residuals"]
    assert residual[2] == (start + 11) * SECOND  # resumes at the next tick's time
    # The watermark estimate: Beam 2.71's PeriodicImpulse leaves it at the
    # last tick; later releases advance it to the next tick's time.
    estimate = start + 11 if versions.beam_release() >= (2, 72) else start + 10
    assert residual[3] == estimate * SECOND
    assert first.wake == (start + 11) * SECOND  # the key-group's next work: the idle planner waits for it


class _StampsWithTheWallClock(beam.DoFn):
    """Stamps each element with `Timestamp.now()` and sets a processing-time
    timer 5 s ahead of it, as Beam's processing-time examples do."""

    FLUSH = TimerSpec("flush", TimeDomain.REAL_TIME)

    def process(self, kv, flush=beam.DoFn.TimerParam(FLUSH)):
        now = Timestamp.now()
        flush.set(now + 5)
        yield kv[0], str(now.micros)

    @on_timer(FLUSH)
    def on_flush(self):
        yield "flushed", str(Timestamp.now().micros)


def test_a_stateful_dofn_reads_the_batch_time_as_now_in_process_and_timers():
    p = beam.Pipeline(options=PipelineOptions(["--streaming"]))
    # The GroupByKey after it takes the DoFn's output as rows.
    _ = p | beam.Create([("k", 1)]) | beam.ParDo(_StampsWithTheWallClock()) | beam.GroupByKey()
    plan = plan_streaming_pipeline(pipeline_proto_of(p))
    op = next(op for op in plan.operators if op.kind == OperatorKind.STATEFUL)
    operator = StatefulStageOperator(op, plan, 1)
    dest = R.dest_text(op.inputs[0])  # operators read rows' dest text
    impl = operator._main_impls[dest]
    key = operator._key_impls[dest].encode_nested("k")
    row = R.data(dest, impl.encode_nested(WindowedValue(("k", 1), 0, [window.GlobalWindow()])), 0, 0, key)
    batch_time = 1_000 * SECOND

    store, rerun_store = DictStore(), DictStore()
    first = operator.run(store, [row], [[0, 0, batch_time]])
    again = operator.run(rerun_store, [row], [[0, 0, batch_time]])
    assert _data_rows(again) == _data_rows(first)
    assert (rerun_store.meta, rerun_store.tables) == (store.meta, store.tables)
    (out,) = _data_rows(first)
    assert str(batch_time).encode() in out[4]  # process saw the batch's time as now

    assert first.wake == batch_time + 5 * SECOND  # the processing-time timer: the key-group's next work
    fired = operator.run(store, [], [[1, 0, batch_time + 5 * SECOND]])
    (flushed,) = _data_rows(fired)
    assert str(batch_time + 5 * SECOND).encode() in flushed[4]  # so did the timer, at its own batch's time
    assert fired.wake is None  # nothing pending
