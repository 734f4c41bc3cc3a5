"""What each streaming operator does with one micro-batch, without Spark.

* `StatelessOperator.run(data_rows)`: a fused stage over the DATA and KEYED
  rows addressed to it (KEYED rows are unpacked into one DATA row per
  element first, as every operator's `run` does), one bundle per `seq`; returns the DATA rows it writes
  (same `seq`) and a METRICS row.
* `GroupOperator`, `StatefulStageOperator`, `SideInputOperator` and
  `SdfOperator`: `run(state, data_rows, steps, draining=False)` handles one
  key-group of a keyed operator for one batch. `state`: for GroupOperator
  and StatefulStageOperator (plans.PER_KEY_STATE_KINDS) the key-group's
  `keyed_state.Store`, read per key and written back before `run` returns;
  for the others the key-group's blob as the previous batch left it (None
  at first), the new one returned in the result. `steps` are the CONTROL
  row's time steps (None if the key-group got no CONTROL row); `draining`:
  the pipeline drains (only splittable DoFns act on it: the watermark
  going to +infinity does the rest). Returns
  `KeyGroupResult(blob, rows, hold)` (blob None for per-key operators).

Order within a batch (what makes MillWheel's rule hold): data rows are taken
in `seq` order; those with `seq` up to a step's `seq` are processed before
the step moves the input watermark and processing time (firing what is due).
Data after the last step waits for the next batch's steps, i.e. it is
processed at the watermark of before it arrived. So an element is late only
if it was behind the watermark when it arrived, and a stage emits nothing
before the output watermark its readers were given.

State is pickled Python data: per user key, the reduce driver's snapshot
(GroupByKey), or the stateful DoFn's user state and pending timers
(`StatefulStageOperator`, in stateful_operator.py), each key its own entry
(keyed_state.py).
"""

import collections
import dataclasses
import itertools
import logging
import pickle
from typing import Any, List, Optional

from apache_beam.coders.coder_impl import create_OutputStream
from apache_beam.portability.api import beam_fn_api_pb2, beam_runner_api_pb2

from apache_beam.metrics import monitoring_infos

from beam_spark_runner.metrics_merge import merge as merge_monitoring_infos
from beam_spark_runner.plans import Dest
from beam_spark_runner.streaming import rows as R
from beam_spark_runner.streaming.keyed_state import KeyedState, Wake
from beam_spark_runner.streaming.progress import LATE_COUNTER, NAMESPACE
from beam_spark_runner.streaming.side_input_wait import SideInputs, WaitingForSides
from beam_spark_runner.streaming.timestamp_summary import TimestampSummary
from beam_spark_runner.worker import context, grouping
from beam_spark_runner.worker.beam_internals import frozen_wall_clock
from beam_spark_runner.worker.plain_stage import PlainStageRunner
from beam_spark_runner.worker.runs import DecodedBlock
from beam_spark_runner.worker.harness_stage import HarnessStageRunner
from beam_spark_runner.worker.java_truncation import JavaRestrictionTruncator
from beam_spark_runner.worker.sdf_truncation import RestrictionTruncator
from triggers.driver import ReduceSpec
from triggers.state import ManualClock
from windowing.timestamps import MAX_US as MAX_MICROS
from windowing.timestamps import MIN_US as MIN_MICROS

_LOG = logging.getLogger(__name__)
EVENT_TIME = beam_runner_api_pb2.TimeDomain.EVENT_TIME
PROCESSING_TIME = beam_runner_api_pb2.TimeDomain.PROCESSING_TIME


SAME_AS_HOLD = "same as hold"  # KeyGroupResult.event_hold when no timer is processing-time


@dataclasses.dataclass
class KeyGroupResult:
    blob: Optional[bytes]  # new state of the key-group (None: empty)
    rows: List[tuple]  # rows to emit
    hold: Optional[int]  # micros; None when nothing is held
    # The part of `hold` that does not come from processing-time timers: what
    # still holds once processing time can no longer advance (a finished
    # TestStream).
    event_hold: Any = SAME_AS_HOLD
    # The earliest processing time (micros) at which the key-group has work
    # without new input or a watermark change: a splittable DoFn's residual
    # resuming, a processing-time timer or trigger; None: none. The source
    # planner lets the query idle until then (streaming/source_planner.py).
    wake: Optional[int] = None
    # With `Operator.summarize_holds`: the summary of all the key-group's
    # holds (and of those not due to processing-time timers), read when a
    # watermark lane holds the operator at a percentile below 1.
    hold_summary: Optional[TimestampSummary] = None
    event_hold_summary: Any = SAME_AS_HOLD

    @property
    def hold_without_processing_time(self):
        return self.hold if self.event_hold is SAME_AS_HOLD else self.event_hold

    @property
    def summary_without_processing_time(self):
        return self.hold_summary if self.event_hold_summary is SAME_AS_HOLD else self.event_hold_summary


class RowWriter:
    """Addresses a stage's output blocks to a `plans.Dest`: a keyed
    destination gets its elements with their keys in KEYED rows, one or more
    per key-group (rows.keyed); others one row per block."""

    def __init__(self, keyed_dests, components, key_groups, element_coders=None, broadcast_dests=()):
        self._keyed = keyed_dests
        self._broadcast = frozenset(broadcast_dests)
        self._components = components
        self._key_groups = key_groups
        self._labels = R.key_group_labels(key_groups)
        self._element_coders = element_coders or {}
        self._key_encoders = {}
        self._texts = {}

    def _element_impl(self, dest):
        return context.coder_impl(self._components, self._element_coders[dest])

    def rows(self, target, block, seq) -> List[R.QueryRow]:
        dest = self._texts.get(target)
        if dest is None:
            dest = self._texts[target] = R.dest_text(target)
        if target in self._broadcast:
            # A side input: every key-group of its reader needs all of it.
            return [R.data(dest, block, seq, kg) for kg in self._labels]
        if target not in self._keyed:
            return [R.data(dest, block, seq)]
        coder_id = self._keyed[target]
        if coder_id is None:
            # Not keyed by a user key (an SDF's restrictions): spread by element.
            return [
                R.data(dest, element, seq, R.key_group(element, self._key_groups))
                for element in grouping.split_elements(block, self._element_impl(target))
            ]
        impl, encode_key = self._key_encoder(coder_id)
        by_kg = {}
        for wv, element in grouping.decode_elements(block, impl):
            key = encode_key(wv.value[0])
            parts = by_kg.setdefault(R.key_group(key, self._key_groups), [])
            parts.append(key)
            parts.append(element)
        out = []
        for kg, parts in by_kg.items():
            out.extend(R.keyed(dest, kg, seq, parts))
        return out

    def _key_encoder(self, coder_id):
        """(element coder impl, the key coder's nested encode) of a keyed
        destination's windowed KV coder."""
        found = self._key_encoders.get(coder_id)
        if found is None:
            coder = context.components_context(self._components).coders[coder_id]
            found = (coder.get_impl(), coder.wrapped_value_coder.key_coder().get_impl().encode_nested)
            self._key_encoders[coder_id] = found
        return found


def _by_seq(data_rows):
    """[(seq, [row, ...])] in seq order."""
    groups = collections.defaultdict(list)
    for row in data_rows:
        groups[row.seq].append(row)
    return sorted(groups.items())


def schedule(data_rows, steps):
    """Interleaves data (by seq) and time steps: yields ("data", seq, rows)
    and ("step", seq, (wm, pt[, side watermarks])) in processing order."""
    data = _by_seq(data_rows)
    steps = sorted(steps or [], key=lambda s: s[0])
    i = 0
    for step in steps:
        step_seq = step[0]
        while i < len(data) and data[i][0] <= step_seq:
            yield "data", data[i][0], data[i][1]
            i += 1
        yield "step", step_seq, tuple(step[1:])  # (wm, pt) or (wm, pt, side wms)
    for seq, group in data[i:]:
        yield "data", seq, group


def clocked(schedule, pt):
    """`schedule` (from `schedule`) with the wall clock each item runs
    under: a step's processing time; for data, that of the step after it
    (the batch's, journaled in Spark's offsets), or of the last step when
    none follows; None before any time is known. `pt` is the processing
    time the operator's state ends the previous batch at."""
    items = list(schedule)
    later = [None] * len(items)
    upcoming = None
    for i in range(len(items) - 1, -1, -1):
        later[i] = upcoming
        if items[i][0] == "step":
            upcoming = items[i][2][1]
    for (what, seq, item), next_pt in zip(items, later):
        if what == "step":
            pt = max(pt, item[1])
            now = pt
        else:
            now = max(pt, next_pt) if next_pt is not None else pt
        yield what, seq, item, (None if now == MIN_MICROS else now)


def _metrics_row(name, infos, records_in=0, records_out=0, counters=None):
    """One METRICS row: the SDK's MonitoringInfos plus the operator's
    rows in and out and `counters` ({name: increment}) in
    streaming.progress.NAMESPACE."""
    infos = list(infos)
    for counter, value in [("rows_in", records_in), ("rows_out", records_out)] + list((counters or {}).items()):
        if value:
            infos.append(monitoring_infos.int64_user_counter(NAMESPACE, counter, value, ptransform=name))
    if not infos:
        return []
    return [R.metrics(name, pickle.dumps([i.SerializeToString() for i in merge_monitoring_infos(infos)]))]


class StageBase:
    """An operator running a fused stage. The stage's ProcessBundleDescriptor
    is parsed once, here, and handed to everything that reads it (the stage
    runner, side-input waiting, window expiry)."""

    def __init__(self, op, plan, key_groups):
        self.op = op
        self.descriptor = beam_fn_api_pb2.ProcessBundleDescriptor.FromString(op.stage.descriptor)
        self.runner = self._make_runner(op, plan, self.descriptor)
        if op.stage.finalizes and isinstance(self.runner, HarnessStageRunner):
            # Callbacks run on the driver once the batch is durable, not
            # when the bundle ends (Beam: finalize after the runner commits).
            self.runner.finalize_after_commit = True
        # Rows name their destination as text (streaming/rows.py).
        self._input_texts = tuple(R.dest_text(dest) for dest in op.inputs)
        self._input_index = {dest: i for i, dest in enumerate(self._input_texts)}
        self._output_dests = op.output_dests()
        self._writer = RowWriter(
            plan.keyed_dests, plan.components, key_groups, plan.element_coders, plan.broadcast_dests
        )

    @staticmethod
    def _make_runner(op, plan, descriptor):
        return HarnessStageRunner(op.stage, (), plan.components, descriptor)

    def close(self):
        """Releases the stage runner's harness (a Java stage's descriptor
        in its JVM); the operator is not used again."""
        self.runner.close()

    def _bundle(self, group):
        """The (input index, block) pairs of one seq's DATA rows, in order.
        Consecutive rows of one input become one block (blocks are
        concatenated element encodings), so a keyed input's elements, a row
        each once unpacked, are decoded together, sharing their metadata."""
        index_of = self._input_index
        return [
            (index, b"".join(row.payload for row in rows))
            for index, rows in itertools.groupby(group, key=lambda row: index_of[row.dest])
        ]

    def _elements(self, group):
        """The (input index, element) pairs of one seq's DATA rows that each
        hold one element (a splittable DoFn's restrictions), in order."""
        return [(self._input_index[row.dest], row.payload) for row in group]

    def _emit(self, outputs, seq, out):
        for index, block in outputs:
            out.extend(self._writer.rows(self._output_dests[index], block, seq))

    def _take_reports(self, records_in, out, counters=None):
        """The METRICS row of this invocation, and a FINALIZE row per
        bundle whose finalization callbacks wait for the batch to be
        durable."""
        infos = self.runner.take_monitoring_infos()
        rows = _metrics_row(self.op.name, infos, records_in, R.element_count(out), counters)
        finalizations = getattr(self.runner, "finalizations", None)
        if finalizations:
            rows.extend(R.finalize(self.op.name, pickle.dumps((self.op.display_name, b))) for b in finalizations)
            self.runner.finalizations = []
        return rows


class StatelessOperator(StageBase):
    """A fused stage without state: one bundle per `seq`. A stage the plain
    path can run (worker/plain_stage.py) runs there, as in batch."""

    @staticmethod
    def _make_runner(op, plan, descriptor):
        if op.stage.plain_spec is not None:
            return PlainStageRunner(op.stage, op.stage.plain_spec, plan.components, descriptor)
        return HarnessStageRunner(op.stage, (), plan.components, descriptor)

    def run(self, data_rows):
        data_rows = R.unpacked(data_rows)
        out = []
        for seq, group in _by_seq(data_rows):
            self._emit(self.runner.run(self._bundle(group)), seq, out)
        return out + self._take_reports(len(data_rows), out)

    def run_decoded(self, runs, seq):
        """One bundle of this operator's only input given as decoded runs
        ((template, values) pairs: a Spark source's rows, in the task that
        read them), never encoded; returns its rows as `run` does."""
        out = []
        self._emit(self.runner.run([(0, DecodedBlock(runs))]), seq, out)
        return out + self._take_reports(sum(len(values) for _, values in runs), out)


def earliest(a, b):
    """The earlier of two holds (micros or None)."""
    if a is None:
        return b
    return a if b is None else min(a, b)


class SdfOperator(StageBase):
    """A stage running a splittable DoFn on unbounded input, one key-group
    at a time. A bundle's residuals (self-checkpoints) are not resumed in the
    same batch: they are kept in state with the processing time they may
    resume at, and run in the batch whose processing time reaches it. The
    key-group holds the output watermark at the residuals' watermark
    estimates (Beam's watermark estimators), so downstream windows close as
    the source advances and everything closes when no residual is left.

    With side inputs, an input element (element and restriction) waits until
    its side windows are ready (`side_input_wait.WaitingForSides`), holding the output
    watermark at its timestamp; it and its residuals run with the side input
    data seen so far. Side windows go once the input watermark passes their
    end plus the allowed lateness and neither a waiting element nor a
    residual (which resumes `process` in its element's windows) reads them."""

    def __init__(self, op, plan, key_groups):
        super().__init__(op, plan, key_groups)
        self._side_inputs = SideInputs(op, plan, self.descriptor) if op.side_inputs else None
        self._components = plan.components
        self._truncator = None
        self._draining = False

    def close(self):
        super().close()
        if self._truncator is not None:
            self._truncator.close()

    def run(self, blob, data_rows, steps, draining=False):
        """While `draining`, restrictions are truncated (Beam's drain,
        worker/sdf_truncation.py): the residuals kept from before the drain
        once, at the first draining batch; then each new input element, and
        each residual a bundle leaves, as it comes. What truncates to
        nothing is dropped, so an unbounded source's hold goes and its
        output watermark reaches +infinity."""
        data_rows = R.unpacked(data_rows)
        saved = _load_blob(blob, {"wm": MIN_MICROS, "pt": MIN_MICROS, "residuals": []}, SDF_BLOB_VERSION, self.op)
        wm, pt = saved["wm"], saved["pt"]
        residuals = list(saved["residuals"])
        self._draining = draining
        if draining and not saved.get("drained"):
            residuals = self._truncated(residuals)
        waiting = WaitingForSides(self._side_inputs, saved, self.runner.harness) if self._side_inputs else None
        out = []
        for what, seq, item, now in clocked(schedule(data_rows, steps), pt):
            # Under the batch's journaled clock: a re-run task (Spark re-runs
            # one whose output an executor took with it) claims the same work.
            with frozen_wall_clock(now):
                if what == "data":
                    if waiting is None:
                        residuals.extend(self._run(self._fresh(self._elements(item)), seq, now, pt, out))
                    else:
                        waiting.take(item, seq)
                else:
                    wm, pt = max(wm, item[0]), max(pt, item[1])
                    if waiting is not None:
                        waiting.advance(item)
                    due = [r for r in residuals if r[2] <= pt]
                    if due:
                        residuals = [r for r in residuals if r[2] > pt]
                        if waiting is not None:
                            waiting.install()
                        residuals.extend(self._run([(r[0], r[1]) for r in due], seq, now, pt, out))
                if waiting is not None:
                    for ready_seq, bundle in waiting.ready_bundles(self._input_index):
                        residuals.extend(self._run(self._fresh(bundle), ready_seq, now, pt, out))
                    if what == "step" and self._side_inputs.expiry:
                        # After the step's due residuals and ready elements ran:
                        # what is left to resume names the side windows it reads.
                        waiting.collect(
                            wm, [self._side_inputs.needs(self._input_texts[r[0]], r[1])[2] for r in residuals]
                        )
        hold = min((r[3] if r[3] is not None else MIN_MICROS for r in residuals), default=None)
        state = {"wm": wm, "pt": pt, "residuals": residuals}
        if draining:
            state["drained"] = True
        empty = not residuals
        dropped = 0
        if waiting is not None:
            hold = earliest(hold, waiting.hold())
            state.update(waiting.saved())
            empty = empty and waiting.is_empty()
            dropped = waiting.dropped
            warn_dropped_for_side_input(self.op, dropped)
        new_blob = None if empty and pt == MIN_MICROS else _dump_blob(state, SDF_BLOB_VERSION)
        summary = None
        if self.op.summarize_holds:
            # One unit of weight per restriction (a partition, a split).
            holds = [r[3] if r[3] is not None else MIN_MICROS for r in residuals]
            if waiting is not None and waiting.hold() is not None:
                holds.append(waiting.hold())
            summary = TimestampSummary.of(holds)
        return KeyGroupResult(
            new_blob,
            out + self._take_reports(len(data_rows), out, {"dropped_late_for_side_input": dropped}),
            hold,
            wake=min((r[2] for r in residuals), default=None),
            hold_summary=summary,
        )

    def _run(self, tagged, seq, now, pt, out):
        """Runs one bundle at wall-clock time `now` (micros, None: unknown);
        returns its residuals as (input index, element, resume at micros,
        watermark estimate micros), truncated while draining. A residual's
        delay counts from `now`, else from the processing time `pt`."""
        if not tagged:
            return []
        outputs, residuals = self.runner.run_once(tagged)
        self._emit(outputs, seq, out)
        start = now if now is not None else pt
        kept = [(index, element, start + int(delay * 1e6), wm) for index, element, delay, wm in residuals]
        return self._truncated(kept) if self._draining else kept

    def _fresh(self, tagged):
        """New input (index, element) pairs, truncated while draining."""
        if not self._draining:
            return tagged
        truncate = self._truncator_of().truncate
        kept = []
        for index, element in tagged:
            element = truncate(index, element)
            if element is not None:
                kept.append((index, element))
        return kept

    def _truncated(self, residuals):
        truncate = self._truncator_of().truncate
        kept = []
        for index, element, resume_at, wm in residuals:
            element = truncate(index, element)
            if element is not None:
                kept.append((index, element, resume_at, wm))
        return kept

    def _truncator_of(self):
        if self._truncator is None:
            input_ids = [p.transform_id for p in self.op.stage.inputs]
            if self.op.stage.environment.is_java:
                self._truncator = JavaRestrictionTruncator(
                    self.op.stage, self.descriptor, self._components, input_ids, self.runner.input_index_feeding
                )
            else:
                self._truncator = RestrictionTruncator(self.descriptor, input_ids, self.runner.input_index_feeding)
        return self._truncator


class SideInputOperator(StageBase):
    """A stateless stage reading side inputs, one key-group at a time (every
    key-group receives all side input rows). A main input element waits in
    state until its side windows are ready (`side_input_wait.SideInputs`) and holds the
    output watermark at its timestamp meanwhile."""

    def __init__(self, op, plan, key_groups):
        super().__init__(op, plan, key_groups)
        self._side_inputs = SideInputs(op, plan, self.descriptor)

    def run(self, blob, data_rows, steps, draining=False):
        data_rows = R.unpacked(data_rows)
        saved = _load_blob(blob, {"pt": MIN_MICROS}, SIDE_INPUT_BLOB_VERSION, self.op)
        harness = self.runner.harness
        harness.restore_state(None)
        waiting = WaitingForSides(self._side_inputs, saved, harness, collect=True)
        out = []
        for what, seq, item in schedule(data_rows, steps):
            if what == "data":
                waiting.take(item, seq)
            else:
                waiting.advance(item)
            for ready_seq, bundle in waiting.ready_bundles(self._input_index):
                self._emit(self.runner.process(bundle), ready_seq, out)
        new_blob = (
            None if waiting.is_empty() else _dump_blob(dict(waiting.saved(), pt=saved["pt"]), SIDE_INPUT_BLOB_VERSION)
        )
        warn_dropped_for_side_input(self.op, waiting.dropped)
        metrics = self._take_reports(len(data_rows), out, {"dropped_late_for_side_input": waiting.dropped})
        return KeyGroupResult(new_blob, out + metrics, waiting.hold())


# Format versions of the key-group blobs of the splittable-DoFn and
# side-input operators: pickled dicts with the version under "v" (a blob
# without it was written before the field existed, in version 1).
SDF_BLOB_VERSION = 1
SIDE_INPUT_BLOB_VERSION = 1


def _load_blob(blob, default, version, op):
    """The dict a `_dump_blob` blob holds (`default` for none); a blob of
    another version is refused, naming the operator and both versions."""
    if not blob:
        return default
    saved = pickle.loads(blob)
    found = saved.pop("v", 1)
    if found != version:
        raise ValueError(
            "%s: its checkpointed key-group state has format version %r; this runner reads version %d"
            % (op.display_name, found, version)
        )
    return saved


def _dump_blob(state, version):
    return pickle.dumps(dict(state, v=version))


def warn_dropped_for_side_input(op, dropped):
    if dropped:
        _LOG.warning(
            "%s dropped %d late main-input element(s) whose side-input windows had expired "
            "(behind the watermark by more than the allowed lateness)",
            op.display_name,
            dropped,
        )


class GroupOperator:
    """A GroupByKey with its WindowFn, trigger and accumulation mode: one
    reduce driver (triggers.driver) per user key of the key-group."""

    def __init__(self, op, plan, key_groups):
        self.op = op
        self._codec = grouping.GroupCodec(plan.components, op.group)
        merger = grouping.AccumulatorMerger(plan.components, op.group) if op.group.combine else None
        # Behind a lifted combine each value is a partial sum: late input is
        # counted by the records it holds.
        weight = merger.record_count if merger is not None and merger.counts_records else None
        self._spec = ReduceSpec.from_windowing(
            self._codec.windowing, compact=merger, closing=self._codec.closing, weight=weight
        )
        self._dest = Dest.grouped(op.name)
        self._writer = RowWriter(
            plan.keyed_dests, plan.components, key_groups, plan.element_coders, plan.broadcast_dests
        )

    def close(self):
        """Nothing to release: a group's state is all in the key-group's store."""

    def run(self, store, data_rows, steps, draining=False):
        """`store`: the key-group's `keyed_state.Store`. State: per user key
        its reducer's pickled snapshot and its wake-up (the earliest
        watermark it must see: next event-time timer or window end or GC;
        the next processing-time timer; its hold). A batch restores only
        the keys with data or with a wake-up due, so its cost follows the
        batch, not every key the key-group holds."""
        data_rows = R.unpacked(data_rows)
        state = KeyedState(store, MIN_MICROS, MIN_MICROS)
        if state.legacy is not None:
            self._move_in(state, state.legacy)
        clock = ManualClock.at_us(state.pt)
        spec = self._spec
        active = {}
        wm, pt = state.wm, state.pt
        out = []
        decode = self._codec.pre_impl.decode_nested
        state.prefetch(row.key for row in data_rows)

        def reducer_of(key):
            reducer = active.get(key)
            if reducer is None:
                snapshot = state.load(key)
                reducer = active[key] = (
                    spec.new_reducer(clock=clock) if snapshot is None else spec.restore(pickle.loads(snapshot), clock)
                )
            return reducer

        for what, seq, item in schedule(data_rows, steps):
            panes = []
            if what == "data":
                by_key = collections.defaultdict(list)
                for row in item:
                    wkv = decode(row.payload)
                    by_key[row.key].append(wkv.with_value(wkv.value[1]))
                for key, wvs in by_key.items():
                    panes.extend((key, p) for p in reducer_of(key).process_us(wvs, wm))
            else:
                wm, pt = max(wm, item[0]), max(pt, item[1])
                # Elements that arrive after this step see its processing
                # time (a processing-time trigger's deadline counts from
                # it), even if no key's reducer is restored at the step.
                clock.set_us(pt)
                for key in state.due(wm, pt):
                    reducer_of(key)
                for key, reducer in active.items():
                    panes.extend((key, p) for p in reducer.advance_processing_time_us(pt))
                    panes.extend((key, p) for p in reducer.advance_watermark_us(wm))
            if panes:
                out.extend(self._encode(panes, seq))
        # Late data is normal in streaming: counted (progress, metrics), not logged.
        dropped = sum(reducer.dropped_late for reducer in active.values())
        late = sum(reducer.late for reducer in active.values())
        for key, reducer in active.items():
            if reducer.state.is_empty():
                state.save(key, None)
            else:
                state.save(key, pickle.dumps(reducer.snapshot()), self._wake_up(reducer))
        state.wm, state.pt = wm, pt
        hold, wake = state.hold(), state.next_processing_time()
        summary = state.hold_summary() if self.op.summarize_holds else None
        state.commit()
        metrics = _metrics_row(
            self.op.name,
            (),
            len(data_rows),
            R.element_count(out),
            {"dropped_due_to_lateness": dropped, LATE_COUNTER: late},
        )
        return KeyGroupResult(None, out + metrics, hold, wake=wake, hold_summary=summary)

    @staticmethod
    def _move_in(state, legacy):
        """Format 1 (one pickled dict per key-group: "wm", "pt", "keys":
        {key: snapshot}, "wake": {key: (watermark, processing time,
        hold)}) into the per-key layout."""
        state.wm, state.pt = legacy["wm"], legacy["pt"]
        for key, snapshot in legacy["keys"].items():
            wm, pt, hold = legacy["wake"].get(key, (MIN_MICROS, MIN_MICROS, None))
            state.save(key, snapshot, _reducer_wake(wm, pt, hold))

    @staticmethod
    def _wake_up(reducer):
        """When this key's reducer must run again without new data, and
        what it holds back."""
        wm, pt = reducer.next_wake_up_us()
        return _reducer_wake(wm, pt, reducer.state.earliest_hold())

    def _encode(self, panes, seq):
        """The panes' rows: blocks of at most about `R.DATA_ROW_BYTES` (one
        pane larger than that is a block of its own). Spark moves a row as
        one value: a watermark step that fires the panes of a whole
        backlog would otherwise be one row as large as all of them, which
        the JVM copies whole into its buffers."""
        decode_key = self._codec.key_impl.decode_nested
        encode = self._codec.post_impl.encode_to_stream
        stream = create_OutputStream()
        keys = {}
        rows = []
        for key, pane in panes:
            if key not in keys:
                keys[key] = decode_key(key)
            encode(pane.with_value((keys[key], pane.value)), stream, True)
            if stream.size() >= R.DATA_ROW_BYTES:
                rows.extend(self._writer.rows(self._dest, stream.get(), seq))
                stream = create_OutputStream()
        if stream.size() or not rows:
            rows.extend(self._writer.rows(self._dest, stream.get(), seq))
        return rows


def _reducer_wake(wm, pt, hold):
    """A reducer's wake-up (triggers.driver: MAX_US is "nothing before the
    end of time") as a keyed_state.Wake."""
    return Wake(
        wm if wm <= MAX_MICROS else None,
        pt if pt < MAX_MICROS else None,
        hold,
        hold,
    )
