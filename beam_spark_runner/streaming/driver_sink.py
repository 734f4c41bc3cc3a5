"""The end of the streaming query on the driver: what a micro-batch's rows
become once its operators ran. No Spark: the Spark glue
(execution/streaming_execution.py) hands `DriverSink.on_batch` the rows its
foreachBatch sink collected; tests hand it rows they made, and a fake clock.

For a batch whose STATUS row arrived (every batch the source planned; a
batch without one carried nothing and is ignored):

1. its checkpoint (streaming/checkpoint_coordinator.py): one
   acknowledgement per keyed operator and key-group, each a REPORT row (the
   key-group's state for the batch is written); the FINALIZE rows as side
   effects; then the pre-commit, before Spark writes its commit log entry.
   A missing acknowledgement raises, so Spark replays the batch;
2. the hold record the source planner plans the next batch with
   (`source_planner.hold_record`), handed to `record_holds`, with the
   processing time by which the driver needs another batch when the release
   policy holds side effects back, and what the Spark sources read (the
   EVENT_TIMES rows: newest event time per source partition);
3. its metrics (the METRICS rows, and the batch's own: watermarks, lag,
   duration), its progress record (streaming/progress.py) and a log line:
   at INFO for the first batch, every `log_every`-th and the last, at DEBUG
   for the others.

DATA rows reaching the end of the query are logged: nothing read them.
"""

import dataclasses
import json
import logging
import pickle
import threading
import time
from typing import Callable, Dict, List, Optional, Tuple

from apache_beam.metrics.monitoring_infos import PTRANSFORM_LABEL
from apache_beam.portability.api import metrics_pb2

from beam_spark_runner.metrics_merge import MergedMetrics
from beam_spark_runner.streaming import progress
from beam_spark_runner.streaming import rows as R
from beam_spark_runner.streaming.checkpoint_records import SideEffects
from beam_spark_runner.streaming.source_planner import KeyGroupHold, hold_record
from beam_spark_runner.streaming.watermarks import BatchTimes

_LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class SinkClock:
    """The driver's clocks, in seconds: `monotonic` times batches, `wall` is
    compared with a batch's planned processing time."""

    monotonic: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time


@dataclasses.dataclass(frozen=True)
class BatchStatus:
    """The STATUS row of a batch: the offset the source planned it with
    (source_planner's JSON, kept as Spark's offset log stores it)."""

    batch: int  # the planner's batch number
    operators: Tuple[str, ...]  # keyed operators with time steps this batch
    done: bool  # every watermark reached +infinity
    processing_time_us: int
    times: BatchTimes

    @classmethod
    def parse(cls, payload) -> "BatchStatus":
        decoded = json.loads(payload)
        return cls(
            batch=decoded["batch"],
            operators=tuple(decoded["steps"]),
            done=bool(decoded["done"]),
            processing_time_us=decoded["pt"],
            times=BatchTimes.from_json(decoded["times"]),
        )


@dataclasses.dataclass
class BatchRows:
    """A batch's rows at the driver, by kind."""

    status: Optional[BatchStatus] = None
    holds: Dict[str, Dict[str, dict]] = dataclasses.field(default_factory=dict)  # op -> {kg: KeyGroupHold JSON}
    finalizers: List[bytes] = dataclasses.field(default_factory=list)
    metrics: Dict[str, List[bytes]] = dataclasses.field(default_factory=dict)  # operator -> MonitoringInfos
    unread: List[str] = dataclasses.field(default_factory=list)  # dests of data rows nothing read
    # Spark source -> {partition: newest event time read} (micros)
    read: Dict[str, Dict[str, int]] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, rows) -> "BatchRows":
        out = cls()
        for row in rows:
            kind = row.kind
            if kind == R.REPORT:
                report = R.parse_report(row.payload)
                out.holds.setdefault(R.operator_of_report(row.dest), {})[row.kg] = KeyGroupHold(
                    report.hold, report.event_hold, report.wake, report.summary, report.event_summary
                ).to_json()
            elif kind == R.FINALIZE:
                out.finalizers.append(bytes(row.payload))
            elif kind == R.METRICS:
                out.metrics.setdefault(row.dest, []).extend(pickle.loads(row.payload))
            elif kind == R.STATUS:
                out.status = BatchStatus.parse(row.payload)
            elif kind == R.EVENT_TIMES:
                source, newest = R.parse_event_times(row.payload)
                seen = out.read.setdefault(source, {})
                for partition, micros in newest.items():
                    seen[partition] = max(micros, seen.get(partition, micros))
            elif kind in R.DATA_KINDS:
                out.unread.append(row.dest)
        return out


class DriverSink:
    """Turns each micro-batch's rows into its checkpoint, hold record,
    metrics and progress (see the module's docstring).

    `coordinator`: the run's CheckpointCoordinator, shared with the thread
    that completes checkpoints, which holds `commit_lock` around it too;
    `record_holds(batch, record)` stores a hold record where the source
    planner reads it; `display_names` {keyed operator: display name}, in
    plan order; `planned_processing_time`: batches run at the processing
    time the planner gave them, so a batch's duration does not count the
    time an idle query waited before it (False with TestStream sources,
    whose processing time is synthetic); `on_progress(record)` is called
    with each completed batch's BatchProgress (the Spark UI's Beam tab)."""

    def __init__(
        self,
        coordinator,
        commit_lock,
        key_groups: int,
        display_names: Dict[str, str],
        record_holds: Callable[[int, dict], None],
        planned_processing_time: bool = True,
        clock: SinkClock = SinkClock(),
        log_every: int = 10,
        on_progress: Optional[Callable[[progress.BatchProgress], object]] = None,
    ):
        self._coordinator = coordinator
        self._commit_lock = commit_lock
        self._labels = R.key_group_labels(key_groups)
        self._display_names = display_names
        self._record_holds = record_holds
        self._planned_processing_time = planned_processing_time
        self._clock = clock
        self._log_every = log_every
        self._on_progress = on_progress
        self._batches = 0
        self._lock = threading.Lock()
        # Merged as batches arrive: a run's length does not grow it.
        self._metrics = MergedMetrics()
        self._progress = progress.ProgressLog()
        self._last_batch_end = None
        self.last_status: Optional[BatchStatus] = None

    def started(self):
        """The query (re)started: the next batch's duration counts from now."""
        self._last_batch_end = self._clock.monotonic()

    def on_batch(self, batch_id: int, rows) -> Optional[BatchStatus]:
        """Handles Spark batch `batch_id`'s rows; returns its status (None:
        no STATUS row)."""
        batch = BatchRows.of(rows)
        for dest in sorted(set(batch.unread)):
            _LOG.warning("Data for %s reached the end of the streaming query; nothing reads it", dest)
        with self._lock:
            for label, infos in batch.metrics.items():
                self._metrics.add(label, self._named(infos))
        status = batch.status
        if status is None:
            return None
        driver_wake = self._checkpoint(batch_id, batch, status)
        self._record_holds(status.batch, hold_record(batch.holds, driver_wake, batch.read))
        self._account(batch_id, batch, status)
        return status

    def _checkpoint(self, batch_id, batch, status):
        """Pre-commits the batch's checkpoint; returns the driver's wake-up
        (0: the release policy needs another batch at once; None: no need)."""
        with self._commit_lock:
            pending = self._coordinator.begin(batch_id, {(op, kg) for op in status.operators for kg in self._labels})
            for op, by_kg in batch.holds.items():
                for kg in by_kg:
                    pending.acknowledge((op, kg))
            pending.add_side_effects(SideEffects(tuple(batch.finalizers)))
            self._coordinator.pre_commit(batch_id, status.done)
            return 0 if self._coordinator.release_waits(batch_id) else None

    def _account(self, batch_id, batch, status):
        now = self._clock.monotonic()
        elapsed = now - (self._last_batch_end if self._last_batch_end is not None else now)
        if self._planned_processing_time:
            # An idle query waited before the batch was planned, not in it.
            elapsed = min(elapsed, max(0.0, self._clock.wall() - status.processing_time_us / 1e6))
        duration_ms = int(elapsed * 1000)
        self._last_batch_end = now
        self.last_status = status
        times = status.times
        infos = [metrics_pb2.MonitoringInfo.FromString(b) for b in sum(batch.metrics.values(), [])]
        with self._lock:
            for label, own in progress.batch_metrics(
                times, duration_ms, self._clock.wall(), self._display_names
            ).items():
                self._metrics.add(label, self._named(own))
        record = progress.batch_progress(times, duration_ms, self._display_names, progress.operator_counters(infos))
        self._progress.record(record)
        if self._on_progress is not None:
            self._on_progress(record)
        self._batches += 1
        every = self._batches == 1 or self._batches % self._log_every == 0 or status.done
        _LOG.log(logging.INFO if every else logging.DEBUG, "Streaming %s", progress.describe(record))

    def _named(self, infos):
        """`infos` (MonitoringInfos or their bytes) with each keyed
        operator's own label replaced by the step name the user gave it (its
        display name), as streaming_progress() and the Spark UI call it:
        `MetricsFilter().with_step(name)` then finds the step's counters."""
        named = []
        for info in infos:
            if isinstance(info, bytes):
                info = metrics_pb2.MonitoringInfo.FromString(info)
            step = info.labels.get(PTRANSFORM_LABEL)
            name = self._display_names.get(step)
            if name is not None and name != step:
                renamed = metrics_pb2.MonitoringInfo()
                renamed.CopyFrom(info)
                renamed.labels[PTRANSFORM_LABEL] = name
                info = renamed
            named.append(info)
        return named

    def metric_infos(self) -> Dict[str, List[bytes]]:
        """{label: serialized MonitoringInfos} reported so far, merged: one
        per distinct metric, however many batches reported it (a copy)."""
        with self._lock:
            return dict(self._metrics.serialized())

    def progress(self):
        """The completed batches' progress records, oldest first."""
        return self._progress.batches()
