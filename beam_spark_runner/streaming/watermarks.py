"""MillWheel-style low watermarks for a graph of stages, computed once per
micro-batch where the batch is planned (the source's planning process).

For every stage, planning batch N:
    output watermark = min(input watermark of batch N-1, the earliest hold
                       the stage reported at the end of batch N-1: buffered
                       panes, pending timers)
    input watermark  = min over its inputs (source watermark estimates after
                       batch N's events, upstream stages' output watermarks)
A stage processes a batch's elements at its previous input watermark, then
advances to the new one; so each stateful stage adds at most one batch of
watermark lag, and nothing an upstream stage emits is late downstream.
Both are monotonic: a value never goes back, even if a late report would
compute a smaller one. A stage read at a watermark percentile P < 1
(streaming/watermark_lanes.py) is held not at its earliest hold but at the
time a share P of its pending work passed, read from the summaries of its
key-groups' holds (streaming/timestamp_summary.py). Holds are reported per
key-group at the end of a batch and apply from the next batch on. The
times a batch used are kept in a journal (JSON-serializable), so a
replayed batch sees exactly the same watermarks and processing time and
produces the same output.

A *same-batch* stage (translation/same_batch_watermarks.py: a GroupByKey
without allowed lateness whose panes are stamped at the window's end) holds
nothing behind its input watermark once its step of a batch is done, so
its output watermark after the batch's data is its input watermark of batch
N, and a stage downstream of it steps to that watermark in the same batch,
after the batch's rows (the panes it fired among them). Until the batch's
data is all in, it is held as the others (`BatchTimes.held_output_watermarks`):
that is what the steps taken at each of a source's events within the batch
and the side inputs read. Should such a stage ever report a hold behind its
previous input watermark, it is held as any other stage.

No Spark here: the streaming executor feeds reports in and reads times out.
Guarantees checked by tests/unit/test_watermarks.py.
"""

import dataclasses
import json
from typing import Dict, Iterable, Mapping, Optional, Sequence, Tuple

from beam_spark_runner.streaming.timestamp_summary import TimestampSummary

# Beam's MIN_TIMESTAMP / MAX_TIMESTAMP in microseconds (a test checks they
# agree). Not imported: Spark's source-planning process runs this module and
# importing Beam there would cost seconds per query start.
MIN_MICROS = -9223372036854775000
MAX_MICROS = 9223372036854775000


@dataclasses.dataclass(frozen=True)
class StageInputs:
    """What feeds one stage: sources by name and upstream stages by name."""

    sources: Tuple[str, ...] = ()
    stages: Tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class BatchTimes:
    """The times one micro-batch runs with (all in microseconds)."""

    batch_id: int
    processing_time: int
    input_watermarks: Mapping[str, int]
    # What a stage's readers step to after the batch's data.
    output_watermarks: Mapping[str, int]
    # A stage's output watermark while the batch's data is still arriving
    # (behind `output_watermarks` only for same-batch stages); None: the same.
    held_output_watermarks: Optional[Mapping[str, int]] = None

    def __post_init__(self):
        if self.held_output_watermarks is None:
            object.__setattr__(self, "held_output_watermarks", dict(self.output_watermarks))

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "BatchTimes":
        data = json.loads(text)
        held = data.get("held_output_watermarks")  # absent in times journaled before same-batch stages
        return cls(
            data["batch_id"],
            data["processing_time"],
            dict(data["input_watermarks"]),
            dict(data["output_watermarks"]),
            dict(held) if held is not None else None,
        )


class WatermarkAuthority:
    """Plans the watermarks of each micro-batch for a stage graph.

    `graph` maps each stage to its StageInputs and must list stages so that
    every stage comes after the stages feeding it. `clock()` returns the
    processing time in microseconds (injectable: tests control time).
    `hold_percentiles`: stage -> the percentile its holds are read at (1
    when absent: the earliest); `hold_stage`: a lane stage -> the stage
    whose holds it reads (streaming/watermark_lanes.py); `same_batch`: the
    same-batch stages (the module's docstring).
    """

    def __init__(
        self,
        graph: Mapping[str, StageInputs],
        clock,
        journal: Optional[Dict[int, str]] = None,
        hold_percentiles: Optional[Mapping[str, float]] = None,
        hold_stage: Optional[Mapping[str, str]] = None,
        same_batch: Iterable[str] = (),
    ):
        self._graph = dict(graph)
        self._same_batch = frozenset(same_batch) & frozenset(graph)
        self._hold_percentiles = dict(hold_percentiles or {})
        self._hold_stage = dict(hold_stage or {})
        self._order = list(graph)
        for i, stage in enumerate(self._order):
            for upstream in self._graph[stage].stages:
                if upstream not in self._order[:i]:
                    raise ValueError("stage %r is fed by %r, which is not listed before it" % (stage, upstream))
        self._clock = clock
        self._sources = {s: MIN_MICROS for inputs in graph.values() for s in inputs.sources}
        for lane_stage, stage in self._hold_stage.items():
            if lane_stage not in self._graph or stage not in self._graph:
                raise ValueError("lane stage %r reads the holds of %r: both must be in the graph" % (lane_stage, stage))
        self._holds: Dict[str, Dict[int, int]] = {s: {} for s in self._order}
        self._summaries: Dict[str, Dict[int, TimestampSummary]] = {s: {} for s in self._order}
        self._input = {s: MIN_MICROS for s in self._order}
        self._output = {s: MIN_MICROS for s in self._order}
        self._held_output = {s: MIN_MICROS for s in self._order}
        self._last_processing_time = MIN_MICROS
        self.journal: Dict[int, str] = dict(journal or {})

    @property
    def sources(self):
        """Names of the sources the graph reads."""
        return frozenset(self._sources)

    # -- reports -------------------------------------------------------------
    def report_source(self, source: str, watermark_micros: int):
        """A source's watermark estimate; estimates never move back."""
        if source not in self._sources:
            raise KeyError("unknown source %r" % source)
        self._sources[source] = max(self._sources[source], watermark_micros)

    def report_holds(
        self,
        stage: str,
        holds: Mapping[int, Optional[int]],
        summaries: Optional[Mapping[int, Optional[TimestampSummary]]] = None,
    ):
        """End-of-batch holds of a stage, per key-group: the earliest
        timestamp its buffered state or pending timers may still emit at, or
        None when the key-group holds nothing; `summaries`: per key-group,
        the summary of all its holds (read at a percentile below 1; a
        key-group without one counts as its earliest hold alone). Replaces
        earlier reports of the same key-groups."""
        current, summarized = self._holds[stage], self._summaries[stage]
        summaries = summaries or {}
        for key_group, hold in holds.items():
            summarized.pop(key_group, None)
            if hold is None or hold >= MAX_MICROS:
                current.pop(key_group, None)
            else:
                current[key_group] = hold
                if summaries.get(key_group) is not None:
                    summarized[key_group] = summaries[key_group]

    def _hold(self, stage: str) -> int:
        """The time `stage` holds its output watermark at: its earliest
        hold, or at a percentile below 1 the time that share of its holds passed."""
        source = self._hold_stage.get(stage, stage)
        holds = self._holds[source]
        percentile = self._hold_percentiles.get(stage, 1.0)
        if not holds:
            return MAX_MICROS
        if percentile >= 1:
            return min(holds.values())
        summaries = self._summaries[source]
        merged = TimestampSummary.merged(
            summaries[kg] if kg in summaries else TimestampSummary.of([hold]) for kg, hold in sorted(holds.items())
        )
        return merged.low_watermark(percentile)

    # -- planning ----------------------------------------------------------------
    def plan(self, batch_id: int) -> BatchTimes:
        """The times of `batch_id`. A batch planned before (a replay after
        failure) gets its journaled times back unchanged."""
        if batch_id in self.journal:
            times = BatchTimes.from_json(self.journal[batch_id])
            self._restore(times)
            return times
        # In plan order, so each stage's upstream outputs are final. A
        # stage's output watermark comes from its input watermark of the
        # previous batch and the holds reported at its end: it may emit
        # during this batch anything buffered then or arriving now, and what
        # arrives now is not earlier than its previous input watermark. So
        # a downstream stage sees its upstream's output watermark one batch
        # late, never early; a same-batch stage's, in the same batch.
        for stage in self._order:
            previous_input, hold = self._input[stage], self._hold(stage)
            held = max(self._held_output[stage], min(previous_input, hold))
            self._held_output[stage] = held
            inputs = self._graph[stage]
            candidates = [self._sources[s] for s in inputs.sources] + [self._output[u] for u in inputs.stages]
            new_input = min(candidates) if candidates else MAX_MICROS
            self._input[stage] = max(previous_input, new_input)
            # A same-batch stage: everything it holds now fires or expires
            # in this batch's step, or is not behind the new input watermark.
            same_batch = stage in self._same_batch and hold >= previous_input
            output = self._input[stage] if same_batch else held
            self._output[stage] = max(self._output[stage], output)
        self._last_processing_time = max(self._last_processing_time, int(self._clock()))
        times = BatchTimes(
            batch_id,
            self._last_processing_time,
            dict(self._input),
            dict(self._output),
            dict(self._held_output),
        )
        self.journal[batch_id] = times.to_json()
        return times

    def forget(self, batch_id: int):
        """Drops the journaled times of `batch_id`, planned but not run (the
        query idles instead: streaming/source_planner.py); the next plan of
        that batch is made afresh, with the processing time it runs at."""
        self.journal.pop(batch_id, None)

    def _restore(self, times: BatchTimes):
        # A stage missing from `times` (a lane the run before had not): from the minimum.
        for stage in self._order:
            self._input[stage] = max(self._input[stage], times.input_watermarks.get(stage, MIN_MICROS))
            self._output[stage] = max(self._output[stage], times.output_watermarks.get(stage, MIN_MICROS))
            self._held_output[stage] = max(
                self._held_output[stage], times.held_output_watermarks.get(stage, MIN_MICROS)
            )
        self._last_processing_time = max(self._last_processing_time, times.processing_time)

    def lag_micros(self, stage: str) -> int:
        """How far a stage's output watermark trails processing time."""
        return self._last_processing_time - self._output[stage]

    def finished(self) -> bool:
        """True once every stage's input and output watermark reached
        +infinity: nothing can be emitted any more."""
        return all(w >= MAX_MICROS for w in self._output.values()) and all(
            w >= MAX_MICROS for w in self._input.values()
        )

    def restore(self, times: BatchTimes, source_watermarks: Mapping[str, int]):
        """Resumes after `times` (a restarted planner): watermarks and
        processing time continue from there."""
        for source, wm in source_watermarks.items():
            self.report_source(source, wm)
        self._restore(times)


def chain(stage_names: Sequence[str], source: str) -> Dict[str, StageInputs]:
    """A linear graph: source -> stage 0 -> stage 1 -> ..."""
    graph = {}
    previous = None
    for name in stage_names:
        graph[name] = StageInputs(sources=(source,)) if previous is None else StageInputs(stages=(previous,))
        previous = name
    return graph
