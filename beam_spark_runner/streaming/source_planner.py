"""Plans each micro-batch at the sources: what it reads and the times every
keyed operator applies. No Spark: the Spark source (execution/streaming_udfs.py)
calls `initial_offset`, `next_offset` and `batch_rows` from Spark's
source-planning process and executors.

An offset is a JSON dict, stored by Spark in its offset log, so a replayed
batch re-reads the same events with the same times:

    {"batch": n, "pos": {test stream: next event index},
     "src_wm": {source: micros}, "pt": micros, "times": BatchTimes JSON,
     "steps": {operator: [[seq, input wm, processing time], ...]}, "done": bool,
     "drain": bool, "spark": {Spark source: DataWatermark snapshot}}

Spark data sources (ReadFromSpark) are read by Spark itself, beside this
source, with their own offsets in the same checkpoint; their rows carry no
`seq` order (SPARK_SOURCE_SEQ: before every time step). Their watermarks
follow what earlier batches read (streaming/source_watermarks.py): the
driver puts the newest event times each batch read into its hold record,
and the next offset's "spark" snapshot includes them.

Drain (`request_drain`, from the driver): from the next batch on, the
sources read nothing more (TestStream events not read yet are left unread)
and their watermarks go to +infinity (a Spark data source's once a batch
read nothing from it: Spark reads it, the planner cannot stop it); keyed operators are told in their
CONTROL rows, so splittable DoFns truncate their restrictions (Beam's
drain); processing-time timers stop holding watermarks back, as when a
TestStream is exhausted. The pipeline then ends once every watermark is at
+infinity, every window having fired. "drain" is kept in every later
offset, so a replayed or resumed batch drains as well.

A batch reads every TestStream event not read yet (one event, where a stage
finalizes bundles: `SourceScript.events_per_batch`), and the operator fed by a
TestStream gets one time step per watermark or processing-time event (data
in between is processed before the step), so the events keep their order
and nothing waits for a batch per event. Operators further down get one step
after all data: the upstream output watermark as of the end of the previous
batch (MillWheel; see streaming/watermarks.py). Holds come from the REPORT
rows of the previous batch, which the driver writes to `holds/<n>.json`.

Idling: when a batch planned now would read no event, move no watermark
and find nothing due by processing time (each key-group reports its next
wake-up with its holds; the driver its own), `next_offset` returns the
offset it was given, so Spark runs no batch, after waiting for the next
wake-up (at most IDLE_WAIT_SECONDS per request; Spark asks again). A query
with Spark sources cannot tell whether they have data, so after that wait
it plans a batch anyway: an idle query runs one batch per
IDLE_WAIT_SECONDS, and never idles while its Spark sources deliver rows.
"""

import dataclasses
import json
import os
import time
from typing import Dict, FrozenSet, Optional, Tuple

from beam_spark_runner.streaming import rows as R
from beam_spark_runner.streaming.source_watermarks import DataWatermark, WatermarkRule
from beam_spark_runner.streaming.timestamp_summary import TimestampSummary
from beam_spark_runner.streaming.watermark_lanes import WatermarkLanes
from beam_spark_runner.streaming.watermarks import MAX_MICROS, MIN_MICROS, BatchTimes, StageInputs, WatermarkAuthority

IMPULSE_SOURCE = "impulse"  # as plans.IMPULSE_SOURCE (this module imports no Beam)
AFTER_ALL = 1 << 62  # seq of the step that follows every data row
IMPULSE_SEQ = -1  # Impulse's element comes before any TestStream event
SPARK_SOURCE_SEQ = -2  # a Spark source's rows come before every time step
HOLDS_WAIT_SECONDS = 300
# While idle, how long one offset request may wait before answering "no new
# batch" (Spark asks again at once): bounds the delay of a drain request and
# of stopping the query; a wake-up due sooner ends the wait then. Each
# request costs Spark's query loop a few milliseconds: at 0.2 s the idle JVM
# used 3.7% of a core, at 1 s 1.4% (tests/integration/test_streaming_idle.py's
# pipeline, measured from /proc).
IDLE_WAIT_SECONDS = 1.0


def drain_path(run_dir):
    return os.path.join(run_dir, "drain")


def request_drain(run_dir):
    """Driver side: the batches planned from now on drain the pipeline."""
    with open(drain_path(run_dir), "w") as f:
        f.write("requested %f\n" % time.time())


def holds_path(run_dir, batch):
    return os.path.join(run_dir, "holds", "%d.json" % batch)


# Format of the hold record the driver writes after each batch. 1 (no
# "format" field): {operator: {key-group: [hold, event hold]}}. 2 adds each
# key-group's wake-up and the driver's own, so the planner can let an idle
# query wait. 3 adds what the Spark sources read ("read"). 4 writes a
# key-group's entry as a KeyGroupHold dict, with the summaries of its holds.
HOLDS_FORMAT = 4
_HOLDS_FORMATS_READ = (2, 3, 4)


@dataclasses.dataclass(frozen=True)
class KeyGroupHold:
    """One key-group's end-of-batch report in a hold record (micros, None:
    nothing): its earliest hold, the same without processing-time timers,
    its next wake-up, and the summaries (TimestampSummary JSON) of all its
    holds and event-time holds, for stages read at a watermark percentile
    below 1 (None: not summarized)."""

    hold: Optional[int]
    event_hold: Optional[int]
    wake: Optional[int] = None
    summary: Optional[str] = None
    event_summary: Optional[str] = None

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, entry) -> "KeyGroupHold":
        """A record's entry: a dict (format 4), a list [hold, event hold,
        wake] (2 and 3) or [hold, event hold] or a bare hold (1)."""
        if isinstance(entry, dict):
            return cls(**entry)
        if isinstance(entry, list):
            return cls(*entry[:3])
        return cls(entry, entry)

    def pick(self, frozen: bool):
        """(hold, summary JSON): without processing-time timers when
        processing time is `frozen` (it can no longer move)."""
        return (self.event_hold, self.event_summary) if frozen else (self.hold, self.summary)


def hold_record(holds, driver_wake=None, read=None):
    """The record of a batch's hold reports: `holds` is {operator:
    {key-group: KeyGroupHold JSON (or its older list form)}};
    `driver_wake`: the processing time by which the driver needs another
    batch (its checkpoint coordinator holds side effects back until more
    batches complete), None: no need; `read`: {Spark source: {partition:
    newest event time read}}."""
    return {"format": HOLDS_FORMAT, "holds": holds, "driver_wake": driver_wake, "read": read or {}}


@dataclasses.dataclass(frozen=True)
class HoldReport:
    """A batch's hold record, read: `holds` {operator: {key-group:
    KeyGroupHold}}; `wake`: the earliest processing time at which some
    key-group or the driver has work without new input (None: never);
    `wake_known`: False for a format-1 record, which says nothing of wake-ups
    (the planner then never idles on it); `read`: {Spark source: {partition:
    newest event time}} of the batch's rows."""

    holds: dict
    wake: Optional[int]
    wake_known: bool
    read: dict = dataclasses.field(default_factory=dict)

    @classmethod
    def from_json(cls, data):
        if "format" not in data:
            holds = {op: {kg: KeyGroupHold.from_json(e) for kg, e in by_kg.items()} for op, by_kg in data.items()}
            return cls(holds, None, False)
        if data["format"] not in _HOLDS_FORMATS_READ:
            raise ValueError("hold record format %r, this runner reads %s" % (data["format"], _HOLDS_FORMATS_READ))
        holds = {op: {kg: KeyGroupHold.from_json(e) for kg, e in by_kg.items()} for op, by_kg in data["holds"].items()}
        wakes = [entry.wake for by_kg in holds.values() for entry in by_kg.values()]
        wakes.append(data.get("driver_wake"))
        wake = min((w for w in wakes if w is not None), default=None)
        return cls(holds, wake, True, data.get("read") or {})


def write_holds(run_dir, batch, record):
    """Driver side: a batch's hold record (`hold_record`; a format-1 dict
    read back from an older checkpoint is written as it is)."""
    path = holds_path(run_dir, batch)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(record, f)
    os.replace(tmp, path)


def remove_holds(run_dir, batch):
    """Driver side: drops a batch's hold record (the planner reads only the
    newest ones); a record never written is no error."""
    try:
        os.remove(holds_path(run_dir, batch))
    except FileNotFoundError:
        pass


ELEMENTS, WATERMARK, PROCESSING_TIME = "elements", "watermark", "processing_time"


@dataclasses.dataclass(frozen=True)
class ScriptedStream:
    """One TestStream, events pre-encoded by the driver (streaming/script.py):
    (ELEMENTS, rows) | (WATERMARK, source key, micros) | (PROCESSING_TIME, micros)."""

    name: str
    source_keys: Tuple[str, ...]  # one per output tag (watermark sources)
    events: Tuple[tuple, ...]


@dataclasses.dataclass(frozen=True)
class SourceScript:
    """Everything the planner needs, as plain data: no Beam import needed to
    unpickle it (Spark's planning process would pay seconds per query)."""

    streams: Tuple[ScriptedStream, ...]
    impulse_rows: Tuple[tuple, ...]
    watermark_graph: Dict[str, StageInputs]
    key_groups: int
    side_watermarks: Dict[str, Dict[str, StageInputs]] = dataclasses.field(default_factory=dict)
    # Spark data sources (ReadFromSpark): name -> how its watermark follows
    # its data; a lane source (its watermark at a percentile) is one too.
    spark_sources: Dict[str, WatermarkRule] = dataclasses.field(default_factory=dict)
    # The operators' percentile lanes (None: all exact). `watermark_graph`
    # is then `lanes.operator_graph`, the authority plans `lanes.graph`.
    lanes: Optional[WatermarkLanes] = None
    # Operators passing their input watermark on in the same batch
    # (streaming/watermarks.py).
    same_batch_stages: FrozenSet[str] = frozenset()
    # How many TestStream events a batch reads (None: every event not read
    # yet). One where a stage finalizes bundles: each event's bundles are
    # then committed, and finalized, before later events' run (as Beam's
    # DirectRunner commits each event's bundles before the next event).
    events_per_batch: Optional[int] = None

    def read_by(self, spark_source: str) -> str:
        """The Spark source whose rows move `spark_source`'s watermark (itself, or a lane source's)."""
        if self.lanes is not None and spark_source in self.lanes.lane_sources:
            return self.lanes.lane_sources[spark_source][0]
        return spark_source


def is_planner_offset(offset):
    """Whether a source offset (a dict, as Spark's offset log holds it) is
    one `SourcePlanner` planned."""
    return {"batch", "pos", "src_wm", "steps"} <= offset.keys()


class SourcePlanner:
    """Offsets and rows of every batch of one streaming pipeline.

    `clock()` gives wall-clock processing time in micros for pipelines
    without a TestStream (with one, processing time is the TestStream's own
    clock, starting at 0, moved only by its processing-time events).
    """

    def __init__(self, script: SourceScript, run_dir, clock=None, sleep=time.sleep):
        self.script = script
        self.run_dir = run_dir
        self._streams = script.streams
        self._clock = clock or (lambda: int(time.time() * 1e6))
        self._sleep = sleep
        self._authority = None
        self._batch_pt = MIN_MICROS
        self._last_source_wms = {}
        self._report = None  # the HoldReport of the last batch

    # -- offsets -----------------------------------------------------------
    def initial_offset(self):
        wms = {key: MIN_MICROS for s in self._streams for key in s.source_keys}
        if self.script.impulse_rows:
            wms[IMPULSE_SOURCE] = MIN_MICROS
        for name in self.script.spark_sources:
            wms[name] = MIN_MICROS
        return {
            "batch": 0,
            "pos": {s.name: 0 for s in self._streams},
            "src_wm": wms,
            "pt": 0 if self._streams else int(self._clock()),
            "times": None,
            "steps": {},
            "done": False,
            "drain": False,
            "spark": {name: DataWatermark(rule).snapshot() for name, rule in self.script.spark_sources.items()},
        }

    def next_offset(self, start):
        """The offset of the batch after `start` (or `start` itself when the
        pipeline is done, or idle without Spark sources: Spark then runs no
        batch). With Spark sources an idle query still plans a batch once
        the wait is over: only a batch can read what they have."""
        if start["done"]:
            return start
        planned = self._plan(start)
        if planned is not None:
            return planned
        self._wait_idle(self._batch_pt)
        if not self.script.spark_sources:
            return start  # the same offset: Spark runs no batch, and asks again
        return self._plan(start, may_idle=False)

    def _plan(self, start, may_idle=True):
        """The offset of the batch after `start`, or None when that batch
        would have nothing to do and `may_idle`."""
        batch = start["batch"] + 1
        authority = self._authority_after(start)
        src_wm = dict(start["src_wm"])
        pt = start["pt"]
        draining = bool(start.get("drain")) or os.path.exists(drain_path(self.run_dir))
        # The moments time moves in this batch, in seq order: (seq, source wms, pt).
        moments = []
        if src_wm.get(IMPULSE_SOURCE, MAX_MICROS) < MAX_MICROS:
            src_wm[IMPULSE_SOURCE] = MAX_MICROS
            moments.append((IMPULSE_SEQ, dict(src_wm), pt))
        if draining:
            # Nothing more is read; every source's watermark goes to +infinity
            # (a Spark source's once it is quiet: _spark_watermarks).
            pos = dict(start["pos"])
            closing = [s for s in src_wm if s not in self.script.spark_sources]
            if any(src_wm[s] < MAX_MICROS for s in closing):
                src_wm.update({s: MAX_MICROS for s in closing})
                moments.append((max(pos.values(), default=0), dict(src_wm), pt))
        else:
            pos, pt = self._read_events(start, src_wm, pt, moments)
        if not self._streams:
            pt = max(pt, int(self._clock()))
        spark = self._spark_watermarks(start, src_wm, pt, draining)
        for source, wm in src_wm.items():
            if source in authority.sources:
                authority.report_source(source, wm)
        self._batch_pt = pt
        self._last_source_wms = src_wm
        times = authority.plan(batch)
        if may_idle and not draining and not moments and pos == start["pos"] and self._idle(start, times):
            authority.forget(batch)
            return None
        return {
            "batch": batch,
            "pos": pos,
            "src_wm": src_wm,
            "pt": times.processing_time,
            "times": times.to_json(),
            "steps": self._steps(times, start, moments),
            # Unread TestStream events (a script read an event per batch) are
            # work still to do, whatever the watermarks say, unless draining
            # (a drain reads nothing more).
            "done": authority.finished() and (draining or all(pos[s.name] >= len(s.events) for s in self._streams)),
            "drain": draining,
            "spark": spark,
        }

    def _spark_watermarks(self, start, src_wm, pt, draining):
        """Moves each Spark source's watermark in `src_wm` (in place) by what
        the last batch read; returns the sources' snapshots for the offset.

        Spark reads these sources itself, so a drain cannot stop them: while
        draining, a source's watermark goes to +infinity once a batch read
        nothing from it (rows it delivers later are late data)."""
        snapshots = {}
        previous = start.get("spark") or {}
        read = self._report.read if self._report is not None else {}
        for name, rule in self.script.spark_sources.items():
            data_wm = DataWatermark.restore(rule, previous.get(name))
            rows_read = read.get(self.script.read_by(name))
            if rows_read:
                data_wm.observe(rows_read, start["pt"])
            if draining and start["batch"] >= 1 and not rows_read:
                src_wm[name] = MAX_MICROS
            else:
                src_wm[name] = max(src_wm.get(name, MIN_MICROS), data_wm.watermark(pt))
            snapshots[name] = data_wm.snapshot()
        return snapshots

    def _idle(self, start, times):
        """Whether a batch planned now would have nothing to do: no event
        read (the caller checks), no watermark of any stage moved since the
        last batch, and no key-group (or the driver) woken by processing
        time yet. The query then idles instead of running empty batches."""
        if not start["times"] or self._report is None or not self._report.wake_known:
            return False
        if self._report.read:
            return False  # a Spark source is delivering: the next batch may read more
        previous = BatchTimes.from_json(start["times"])
        if _watermarks_of(previous) != _watermarks_of(times):
            return False
        wake = self._report.wake
        return wake is None or wake > times.processing_time

    def _wait_idle(self, now):
        """Waits until the next wake-up is due, at most IDLE_WAIT_SECONDS."""
        wake = self._report.wake if self._report is not None else None
        wait_s = IDLE_WAIT_SECONDS if wake is None else min(IDLE_WAIT_SECONDS, max(0.0, (wake - now) / 1e6))
        if wait_s > 0:
            self._sleep(wait_s)

    def _read_events(self, start, src_wm, pt, moments):
        """Applies the TestStream events this batch reads (every one not read
        yet, or the script's `events_per_batch`) to `src_wm` and `moments`
        (in place); returns (the streams' new positions, the processing time
        after the events)."""
        # Several TestStreams move in lockstep: event `seq` of every stream
        # is applied before event seq + 1 of any, so a moment's source
        # watermarks are each stream's after its events up to `seq` (not a
        # later stream's after all of its events, which put an operator's
        # input watermark past data of another stream still to come).
        first = min((start["pos"][s.name] for s in self._streams), default=0)
        per_batch = self.script.events_per_batch
        pos = {
            s.name: len(s.events)
            if per_batch is None
            else max(start["pos"][s.name], min(len(s.events), first + per_batch))
            for s in self._streams
        }
        for seq in range(first, max(pos.values(), default=0) + 1):
            for s in self._streams:
                if start["pos"][s.name] <= seq < pos[s.name]:
                    event = s.events[seq]
                    if event[0] == WATERMARK:
                        if event[1] in src_wm:  # else: an output nobody reads
                            src_wm[event[1]] = max(src_wm[event[1]], event[2])
                        moments.append((seq, dict(src_wm), pt))
                    elif event[0] == PROCESSING_TIME:
                        pt += event[1]
                        moments.append((seq, dict(src_wm), pt))
                elif seq == len(s.events) == pos[s.name] and any(src_wm[key] < MAX_MICROS for key in s.source_keys):
                    # The end of the stream closes every output (as Beam's DirectRunner).
                    for key in s.source_keys:
                        src_wm[key] = MAX_MICROS
                    moments.append((seq, dict(src_wm), pt))
        return pos, pt

    def _steps(self, times, start, moments):
        """Per keyed operator: a step at each moment for operators a source
        feeds, then one after all data at the batch's planned watermark.
        A side-input operator's steps also carry each side input's
        watermark: [seq, wm, pt, {side dest: wm}]."""
        previous = BatchTimes.from_json(start["times"]).input_watermarks if start["times"] else {}
        steps = {}
        moments = sorted(moments, key=lambda m: m[0])
        for op, inputs in self.script.watermark_graph.items():
            sides = self.script.side_watermarks.get(op, {})
            op_steps = []
            wm = previous.get(op, MIN_MICROS)
            if inputs.sources:
                for seq, wms, pt in moments:
                    wm = max(wm, _watermark_of(inputs, wms, times))
                    step = [seq, wm, pt]
                    if sides:
                        step.append({d: _watermark_of(i, wms, times) for d, i in sides.items()})
                    op_steps.append(step)
            step = [AFTER_ALL, times.input_watermarks[op], times.processing_time]
            if sides:
                step.append({d: _watermark_of(i, self._last_source_wms, times) for d, i in sides.items()})
            op_steps.append(step)
            steps[op] = op_steps
        return steps

    def _authority_after(self, start):
        graph = self.script.watermark_graph
        if self._authority is None:
            # The authority's processing time is the one next_offset chose.
            lanes = self.script.lanes
            self._authority = WatermarkAuthority(
                lanes.graph if lanes is not None else graph,
                lambda: self._batch_pt,
                hold_percentiles=lanes.hold_percentiles if lanes is not None else None,
                hold_stage=lanes.hold_stage if lanes is not None else None,
                same_batch=self.script.same_batch_stages,
            )
            if start["times"]:
                self._authority.restore(
                    BatchTimes.from_json(start["times"]),
                    {s: wm for s, wm in start["src_wm"].items() if s in self._authority.sources},
                )
        if start["batch"] >= 1 and (graph or self.script.spark_sources):
            # Once a TestStream is exhausted its processing time never moves
            # again: processing-time timers can no longer fire, so their
            # holds no longer count (as Beam's DirectRunner, which ends with
            # such timers unfired once every watermark is at +infinity).
            frozen = self._processing_time_frozen(start)
            self._report = HoldReport.from_json(self._wait_for_holds(start["batch"]))
            for op, holds in self._report.holds.items():
                if op in graph:
                    picked = {int(kg): h.pick(frozen) for kg, h in holds.items()}
                    self._authority.report_holds(
                        op,
                        {kg: hold for kg, (hold, _) in picked.items()},
                        {kg: TimestampSummary.from_json(text) for kg, (_, text) in picked.items() if text},
                    )
        return self._authority

    def _processing_time_frozen(self, start):
        """True when the pipeline drains, or when processing time comes from
        TestStreams that have no events left and whose outputs are all at
        +infinity."""
        if start.get("drain"):
            return True
        return bool(self._streams) and all(
            start["pos"].get(s.name, 0) >= len(s.events)
            and all(start["src_wm"].get(key, MAX_MICROS) >= MAX_MICROS for key in s.source_keys)
            for s in self._streams
        )

    def _wait_for_holds(self, batch):
        path = holds_path(self.run_dir, batch)
        deadline = time.monotonic() + HOLDS_WAIT_SECONDS
        while not os.path.exists(path):
            if time.monotonic() > deadline:
                raise RuntimeError("no hold report for batch %d at %s" % (batch, path))
            time.sleep(0.01)
        with open(path) as f:
            return json.load(f)

    # -- rows -----------------------------------------------------------------
    def batch_rows(self, start, end):
        """Every row the batch `end` reads: TestStream elements, Impulse,
        CONTROL rows for each keyed operator and key-group, one STATUS row."""
        out = []
        if start["batch"] == 0 and end["batch"] >= 1:
            out.extend(self.script.impulse_rows)
        for s in self._streams:
            for seq in range(start["pos"][s.name], end["pos"][s.name]):
                if s.events[seq][0] == ELEMENTS:
                    out.extend(s.events[seq][1])
        for op, steps in end["steps"].items():
            for kg in R.key_group_labels(self.script.key_groups):
                out.append(R.control(op, kg, end["batch"], steps, draining=end.get("drain", False)))
        out.append(R.status(end["batch"], json.dumps(end).encode()))
        return out


def _watermarks_of(times):
    return times.input_watermarks, times.output_watermarks, times.held_output_watermarks


def _watermark_of(inputs, source_wms, times):
    """min over `inputs`: source watermarks now, upstream output watermarks
    planned for the batch while its data is still arriving (+infinity when
    nothing feeds it)."""
    candidates = [source_wms.get(s, MIN_MICROS) for s in inputs.sources] + [
        times.held_output_watermarks[u] for u in inputs.stages
    ]
    return min(candidates) if candidates else MAX_MICROS
