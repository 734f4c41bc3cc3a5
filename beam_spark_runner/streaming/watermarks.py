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
compute a smaller one. Holds are reported per key-group at the end of a
batch and apply from the next batch on. The times a batch used are kept in
a journal (JSON-serializable), so a replayed batch sees exactly the same
watermarks and processing time and produces the same output.

No Spark here: the streaming executor feeds reports in and reads times out.
Guarantees checked by tests/unit/test_watermarks.py.
"""

import dataclasses
import json
from typing import Dict, Mapping, Optional, Sequence, Tuple

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
    output_watermarks: Mapping[str, int]

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "BatchTimes":
        data = json.loads(text)
        return cls(
            data["batch_id"], data["processing_time"], dict(data["input_watermarks"]), dict(data["output_watermarks"])
        )


class WatermarkAuthority:
    """Plans the watermarks of each micro-batch for a stage graph.

    `graph` maps each stage to its StageInputs and must list stages so that
    every stage comes after the stages feeding it. `clock()` returns the
    processing time in microseconds (injectable: tests control time).
    """

    def __init__(self, graph: Mapping[str, StageInputs], clock, journal: Optional[Dict[int, str]] = None):
        self._graph = dict(graph)
        self._order = list(graph)
        for i, stage in enumerate(self._order):
            for upstream in self._graph[stage].stages:
                if upstream not in self._order[:i]:
                    raise ValueError("stage %r is fed by %r, which is not listed before it" % (stage, upstream))
        self._clock = clock
        self._sources = {s: MIN_MICROS for inputs in graph.values() for s in inputs.sources}
        self._holds: Dict[str, Dict[int, int]] = {s: {} for s in self._order}
        self._input = {s: MIN_MICROS for s in self._order}
        self._output = {s: MIN_MICROS for s in self._order}
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

    def report_holds(self, stage: str, holds: Mapping[int, Optional[int]]):
        """End-of-batch holds of a stage, per key-group: the earliest
        timestamp its buffered state or pending timers may still emit at, or
        None when the key-group holds nothing. Replaces earlier reports of
        the same key-groups."""
        current = self._holds[stage]
        for key_group, hold in holds.items():
            if hold is None or hold >= MAX_MICROS:
                current.pop(key_group, None)
            else:
                current[key_group] = hold

    # -- planning ----------------------------------------------------------------
    def plan(self, batch_id: int) -> BatchTimes:
        """The times of `batch_id`. A batch planned before (a replay after
        failure) gets its journaled times back unchanged."""
        if batch_id in self.journal:
            times = BatchTimes.from_json(self.journal[batch_id])
            self._restore(times)
            return times
        # Output watermarks first, from the inputs of the previous batch and
        # the holds reported at its end: a stage may emit during this batch
        # anything buffered then or arriving now, and what arrives now is not
        # earlier than its previous input watermark. So a downstream stage
        # sees its upstream's output watermark one batch late, never early.
        for stage in self._order:
            hold = min(self._holds[stage].values(), default=MAX_MICROS)
            self._output[stage] = max(self._output[stage], min(self._input[stage], hold))
        for stage in self._order:
            inputs = self._graph[stage]
            candidates = [self._sources[s] for s in inputs.sources] + [self._output[u] for u in inputs.stages]
            new_input = min(candidates) if candidates else MAX_MICROS
            self._input[stage] = max(self._input[stage], new_input)
        self._last_processing_time = max(self._last_processing_time, int(self._clock()))
        times = BatchTimes(batch_id, self._last_processing_time, dict(self._input), dict(self._output))
        self.journal[batch_id] = times.to_json()
        return times

    def forget(self, batch_id: int):
        """Drops the journaled times of `batch_id`, planned but not run (the
        query idles instead: streaming/source_planner.py); the next plan of
        that batch is made afresh, with the processing time it runs at."""
        self.journal.pop(batch_id, None)

    def _restore(self, times: BatchTimes):
        for stage in self._order:
            self._input[stage] = max(self._input[stage], times.input_watermarks[stage])
            self._output[stage] = max(self._output[stage], times.output_watermarks[stage])
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
