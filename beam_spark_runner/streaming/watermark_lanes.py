"""Percentile watermarks per stage, as lanes of one watermark graph.

Each keyed operator runs under a watermark percentile P (MillWheel's
heuristic low watermark: `--watermark_percentile`, or the
`watermark_percentile` annotation of its transforms; 1 by default). A
stage's watermark at P is read, in *lane* P, from

* its sources' watermarks at P: a Spark source's the event time a share P
  of its active partitions reached (streaming/source_watermarks.py);
  scripted sources (TestStream, Impulse) have one watermark in every lane;
* its upstream stages' output watermarks at P: the stage's input watermark
  at P, held at the time a share P of its pending work (the holds of its
  keys or restrictions, summarized per key-group as a `TimestampSummary`)
  has passed, instead of at the earliest of them.

Lane 1 is the exact watermark. Where a stage at P reads an upstream stage
that runs at another percentile, the upstream stage is computed in lane P
as well, as a *lane stage*: a stage of the graph that runs nothing and
reads the real stage's holds. A Spark source read at P < 1 is a *lane
source* named for both. So the watermark authority (streaming/watermarks.py)
plans every lane with its one rule (an output watermark never passes its
input watermark, nothing moves back) and journals lane stages like real
ones, and a replayed batch plans the same watermarks in every lane.

No Spark, no Beam: Spark's source-planning process reads this.
Guarantees checked by tests/unit/test_watermark_lanes.py.
"""

import dataclasses
from typing import Dict, Iterable, Mapping, Tuple

from beam_spark_runner.streaming.watermarks import StageInputs

LANE_MARK = "@watermark_p"


def lane_name(name: str, percentile: float) -> str:
    """The name of `name` (a stage or a Spark source) computed in lane `percentile`."""
    return "%s%s%s" % (name, LANE_MARK, percentile_text(percentile))


def percentile_text(percentile: float) -> str:
    """A percentile as it is written in names and records: 0.95, 1."""
    return repr(float(percentile)).rstrip("0").rstrip(".")


@dataclasses.dataclass(frozen=True)
class WatermarkLanes:
    """A watermark graph with every operator in its lane.

    `graph`: every stage the authority plans, real operators (their inputs
    renamed into their lane) and lane stages, each after the stages it
    reads; `operators`: the real ones, in plan order; `hold_percentiles`:
    the percentile each stage's holds are read at (1 when absent);
    `hold_stage`: lane stage -> the operator whose holds it reads;
    `lane_sources`: lane source -> (the Spark source it reads, percentile)."""

    graph: Dict[str, StageInputs]
    operators: Tuple[str, ...]
    hold_percentiles: Dict[str, float] = dataclasses.field(default_factory=dict)
    hold_stage: Dict[str, str] = dataclasses.field(default_factory=dict)
    lane_sources: Dict[str, Tuple[str, float]] = dataclasses.field(default_factory=dict)

    @property
    def operator_graph(self) -> Dict[str, StageInputs]:
        """The real operators' entries of `graph`, in plan order."""
        return {op: self.graph[op] for op in self.operators}

    @property
    def summarized(self) -> frozenset:
        """The operators whose key-groups report a summary of their holds:
        those read at a percentile below 1, in their own lane or another."""
        return frozenset(self.hold_stage.get(s, s) for s, p in self.hold_percentiles.items() if p < 1)

    def rename_inputs(self, inputs: StageInputs, operator: str) -> StageInputs:
        """`inputs` (of a side input, say) as `operator`'s lane reads them."""
        return self._lane_inputs(inputs, self.hold_percentiles.get(operator, 1.0))

    def _lane_inputs(self, inputs: StageInputs, percentile: float) -> StageInputs:
        sources = tuple(
            lane_name(s, percentile) if percentile < 1 and lane_name(s, percentile) in self.lane_sources else s
            for s in inputs.sources
        )
        stages = tuple(
            u if self.hold_percentiles.get(u, 1.0) == percentile else lane_name(u, percentile) for u in inputs.stages
        )
        return StageInputs(sources=sources, stages=stages)


def plan_lanes(
    graph: Mapping[str, StageInputs], percentiles: Mapping[str, float], spark_sources: Iterable[str] = ()
) -> WatermarkLanes:
    """The lanes of `graph` (operator -> StageInputs, in plan order) when
    each operator runs at `percentiles[op]` (1 when absent). `spark_sources`:
    the sources whose watermark has a percentile (partitioned data)."""
    for op, p in percentiles.items():
        if not 0 < p <= 1:
            raise ValueError("%s: a watermark percentile must be above 0 and at most 1, not %r" % (op, p))
        if op not in graph:
            raise KeyError("unknown operator %r" % op)
    spark = frozenset(spark_sources)
    own = {op: float(percentiles.get(op, 1.0)) for op in graph}
    out: Dict[str, StageInputs] = {}
    hold_percentiles = {op: p for op, p in own.items() if p < 1}
    hold_stage: Dict[str, str] = {}
    lane_sources: Dict[str, Tuple[str, float]] = {}

    def in_lane(inputs, p):
        sources = []
        for s in inputs.sources:
            if p < 1 and s in spark:
                lane_sources[lane_name(s, p)] = (s, p)
                sources.append(lane_name(s, p))
            else:
                sources.append(s)
        stages = []
        for u in inputs.stages:
            if own[u] == p:
                stages.append(u)
            else:
                stages.append(lane_stage(u, p))
        return StageInputs(sources=tuple(sources), stages=tuple(stages))

    def lane_stage(op, p):
        name = lane_name(op, p)
        if name not in out:
            entry = in_lane(graph[op], p)  # its own upstream lane stages first
            out[name] = entry
            hold_stage[name] = op
            if p < 1:
                hold_percentiles[name] = p
        return name

    for op, inputs in graph.items():
        out[op] = in_lane(inputs, own[op])
    return WatermarkLanes(
        graph=out,
        operators=tuple(graph),
        hold_percentiles=hold_percentiles,
        hold_stage=hold_stage,
        lane_sources=lane_sources,
    )
