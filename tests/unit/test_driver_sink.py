"""What the driver makes of a micro-batch's rows (streaming/driver_sink.py),
without Spark: the checkpoint's acknowledgements and side effects, the hold
record for the next batch, metrics and progress, under a fake clock."""

import json
import pickle
import threading

import pytest
from apache_beam.metrics import monitoring_infos

from beam_spark_runner.streaming import progress
from beam_spark_runner.streaming import rows as R
from beam_spark_runner.streaming.checkpoint_coordinator import CheckpointCoordinator, IncompleteCheckpoint
from beam_spark_runner.streaming.driver_sink import BatchStatus, DriverSink, SinkClock
from beam_spark_runner.streaming.source_planner import HoldReport, KeyGroupHold
from beam_spark_runner.streaming.timestamp_summary import TimestampSummary
from beam_spark_runner.streaming.watermarks import BatchTimes
from tests.unit.test_checkpoint_coordinator import Actions, MemoryStore

KG = R.key_group_labels(2)


class FakeClock:
    def __init__(self):
        self.monotonic_s, self.wall_s = 100.0, 1_000.0

    def clock(self):
        return SinkClock(monotonic=lambda: self.monotonic_s, wall=lambda: self.wall_s)


def _status(batch, operators=("gbk",), done=False, pt_us=999_000_000):
    times = BatchTimes(batch, pt_us, {op: 5_000_000 for op in operators}, {op: 4_000_000 for op in operators})
    payload = {
        "batch": batch,
        "steps": {op: [] for op in operators},
        "done": done,
        "pt": pt_us,
        "times": times.to_json(),
    }
    return R.status(batch, json.dumps(payload).encode())


def _counter(op, name, value):
    info = monitoring_infos.int64_user_counter(progress.NAMESPACE, name, value, ptransform=op)
    return R.metrics(op, pickle.dumps([info.SerializeToString()]))


def _sink(planned=True, on_progress=None):
    actions, holds, clock = Actions(), [], FakeClock()
    coordinator = CheckpointCoordinator(MemoryStore(), actions.release, actions.abort)
    sink = DriverSink(
        coordinator,
        threading.Lock(),
        2,
        {"gbk": "GroupByKey"},
        lambda batch, record: holds.append((batch, record)),
        planned_processing_time=planned,
        clock=clock.clock(),
        on_progress=on_progress,
    )
    sink.started()
    return sink, coordinator, actions, holds, clock


def test_a_batch_with_every_report_is_pre_committed_with_its_finalizers_and_holds():
    sink, coordinator, actions, holds, clock = _sink()
    clock.monotonic_s += 0.25
    rows = [
        R.report("gbk", KG[0], 3, 1_000, 1_000, None),
        R.report("gbk", KG[1], 3, None, None, 7_000),
        R.finalize("stage", b"callbacks"),
        _status(3),
    ]
    status = sink.on_batch(11, rows)
    assert status.batch == 3 and status.operators == ("gbk",) and not status.done
    ((batch, record),) = holds
    assert batch == 3
    assert record["holds"] == {
        "gbk": {KG[0]: KeyGroupHold(1_000, 1_000, None).to_json(), KG[1]: KeyGroupHold(None, None, 7_000).to_json()}
    }
    assert record["driver_wake"] is None
    coordinator.committed(11)
    assert actions.released == [b"callbacks"]  # released once Spark committed the batch


def test_a_missing_report_fails_the_batch_so_spark_replays_it():
    sink, _, _, holds, _ = _sink()
    with pytest.raises(IncompleteCheckpoint):
        sink.on_batch(1, [R.report("gbk", KG[0], 1, None, None), _status(1)])
    assert holds == []


def test_a_batch_without_status_changes_nothing_but_metrics():
    sink, _, _, holds, _ = _sink()
    assert sink.on_batch(1, [_counter("gbk", "rows_in", 4)]) is None
    assert holds == [] and sink.progress() == ()
    assert len(sink.metric_infos()["gbk"]) == 1


def test_progress_counts_the_batchs_rows_and_its_duration_on_the_injected_clock():
    sink, _, _, _, clock = _sink(planned=False)
    clock.monotonic_s += 1.5
    rows = [_counter("gbk", "rows_in", 4), _counter("gbk", "rows_out", 2)]
    rows += [R.report("gbk", kg, 2, None, None) for kg in KG] + [_status(2)]
    sink.on_batch(5, rows)
    (batch,) = sink.progress()
    assert batch.duration_ms == 1500
    (stage,) = batch.stages
    assert (stage.display_name, stage.rows_in, stage.rows_out) == ("GroupByKey", 4, 2)
    labels = sink.metric_infos()
    assert progress.RUN in labels and len(labels["gbk"]) == 2 + 3  # its counters and its three gauges


def test_a_planned_batch_does_not_count_the_time_an_idle_query_waited_before_it():
    sink, _, _, _, clock = _sink(planned=True)
    clock.monotonic_s += 30.0  # idle for half a minute, then a batch planned at wall 999 s ran for 1 s
    clock.wall_s = 1_000.0
    sink.on_batch(1, [R.report("gbk", kg, 1, None, None) for kg in KG] + [_status(1, pt_us=999_000_000)])
    assert sink.progress()[0].duration_ms == 1000


def test_status_rows_parse_into_typed_status():
    status = BatchStatus.parse(_status(4, operators=("a", "b"), done=True).payload)
    assert (status.batch, status.operators, status.done) == (4, ("a", "b"), True)
    assert status.times.input_watermarks == {"a": 5_000_000, "b": 5_000_000}


def test_what_the_spark_sources_read_goes_into_the_hold_record_newest_per_partition():
    sink, _, _, holds, _ = _sink()
    rows = [
        R.report("gbk", KG[0], 2, None, None),
        R.report("gbk", KG[1], 2, None, None),
        R.event_times("read", {"p0": 5_000, "p1": 9_000}),
        R.event_times("read", {"p0": 7_000}),  # another task of the same source
        R.event_times("other", {"": 1_000}),
        _status(2),
    ]
    sink.on_batch(4, rows)
    ((_, record),) = holds
    assert record["read"] == {"read": {"p0": 7_000, "p1": 9_000}, "other": {"": 1_000}}


def test_a_key_group_s_hold_summaries_reach_the_planner_through_the_hold_record():
    sink, coordinator, actions, holds, clock = _sink()
    summary = TimestampSummary.of([1_000, 9_000, 9_000])
    event_summary = TimestampSummary.of([9_000, 9_000])
    rows = [
        R.report("gbk", KG[0], 3, 1_000, 9_000, None, summary.to_json(), event_summary.to_json()),
        R.report("gbk", KG[1], 3, None, None, None),
        _status(3),
    ]
    sink.on_batch(11, rows)
    ((_, record),) = holds
    report = HoldReport.from_json(json.loads(json.dumps(record)))
    entry = report.holds["gbk"][str(KG[0])]  # as written to disk: JSON keys are text
    hold, text = entry.pick(frozen=False)
    assert (hold, TimestampSummary.from_json(text)) == (1_000, summary)
    hold, text = entry.pick(frozen=True)
    assert (hold, TimestampSummary.from_json(text)) == (9_000, event_summary)
    other = report.holds["gbk"][str(KG[1])]
    assert other.pick(frozen=False) == (None, None)


def test_each_completed_batch_s_progress_is_handed_on():
    seen = []
    sink, *_ = _sink(on_progress=seen.append)
    sink.on_batch(
        11, [R.report("gbk", KG[0], 3, None, None, None), R.report("gbk", KG[1], 3, None, None, None), _status(3)]
    )
    sink.on_batch(12, [R.metrics("gbk", pickle.dumps([]))])  # no STATUS row: not a completed batch
    assert [record.batch for record in seen] == [3] and [s.name for s in seen[0].stages] == ["gbk"]


def test_metrics_are_merged_as_batches_arrive_with_the_totals_of_merging_everything_at_the_end():
    """The driver keeps one MonitoringInfo per metric, not one per batch:
    after a thousand batches it holds what it held after ten, and reads the
    same totals as merging every batch's reports at the end would."""
    from apache_beam.portability.api import metrics_pb2
    from apache_beam.runners.portability.portable_metrics import from_monitoring_infos

    from beam_spark_runner.metrics_merge import merge

    sink, _, _, _, clock = _sink(planned=False)
    sizes = {}
    for batch in range(1, 1001):
        clock.monotonic_s += 0.25
        rows = [_counter("gbk", "rows_in", batch), _counter("gbk", "late_records", batch % 3)]
        rows += [R.report("gbk", kg, batch, None, None) for kg in KG] + [_status(batch)]
        sink.on_batch(batch, rows)
        if batch in (10, 1000):
            sizes[batch] = sum(len(infos) for infos in sink.metric_infos().values())
    assert sizes[10] == sizes[1000]
    merged = {
        label: [metrics_pb2.MonitoringInfo.FromString(b) for b in blobs] for label, blobs in sink.metric_infos().items()
    }
    counters, distributions, _, _, _ = from_monitoring_infos(merge(merged["gbk"]), user_metrics_only=True)
    by_name = {key.metric.name: value for key, value in counters.items()}
    assert by_name["rows_in"] == sum(range(1, 1001))
    assert by_name["late_records"] == sum(b % 3 for b in range(1, 1001))
    run_counters, run_distributions, _, _, _ = from_monitoring_infos(merged[progress.RUN], user_metrics_only=True)
    assert {k.metric.name: v for k, v in run_counters.items()}["batches"] == 1000
    (duration,) = run_distributions.values()
    assert (duration.count, duration.sum, duration.min, duration.max) == (1000, 250_000, 250, 250)


def test_a_keyed_operators_metrics_carry_the_step_name_the_user_gave_it():
    """The operator reports under its transform id ("gbk"); metrics(),
    streaming_progress() and the UI all call it by its display name."""
    from apache_beam.portability.api import metrics_pb2

    sink, _, _, _, _ = _sink(planned=False)
    rows = [_counter("gbk", "late_records", 3)]
    rows += [R.report("gbk", kg, 1, None, None) for kg in KG] + [_status(1)]
    sink.on_batch(1, rows)
    steps = {metrics_pb2.MonitoringInfo.FromString(b).labels["PTRANSFORM"] for b in sink.metric_infos()["gbk"]}
    assert steps == {"GroupByKey"}
    (stage,) = sink.progress()[0].stages
    assert stage.display_name == "GroupByKey"
