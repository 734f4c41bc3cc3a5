"""The watermark of a source whose data carries its own event times (a
Spark data source read with `ReadFromSpark` in a streaming pipeline). No
Spark, no Beam: the source planner keeps one `DataWatermark` per such
source and stores its `snapshot()` in every offset, so a replayed or
resumed batch plans with the same watermark.

The rule (`WatermarkRule`), per source partition (a Kafka topic partition,
or the whole source when it has no partition columns):

    watermark = min over active partitions of (newest event time seen
                                               - max_out_of_orderness)

With a percentile P below 1 (`--watermark_percentile`, MillWheel's
heuristic low watermark), the minimum becomes the event time that a share
P of the active partitions have reached: the slowest partitions, up to a
(1 - P) share, no longer hold it. It is read from a `TimestampSummary` of
the partitions' newest event times (one unit of weight each), so it is
never later than that exact percentile and at most its bucket width
(1 ms at first, more only for partitions spread over a long span) earlier.

It never moves back. A partition is *idle* once no batch has read a row of
it for `idle_timeout` of processing time (None: never idle); idle
partitions do not count, and when every partition seen is idle the
watermark is the newest of them all (the source has caught up: nothing
seen is waiting). A source that has read nothing yet holds the watermark
at the minimum.

What a batch read reaches the planner one batch later (the batch's rows are
counted on the executors and reported with its holds), so data read in
batch n moves the watermark of batch n + 1: a row is never behind the
watermark it is processed under unless it is more than
`max_out_of_orderness` behind the newest row of its partition.
"""

import dataclasses
from typing import Dict, Mapping, Optional

from beam_spark_runner.streaming.timestamp_summary import TimestampSummary
from beam_spark_runner.streaming.watermarks import MIN_MICROS

SNAPSHOT_FORMAT = 1


@dataclasses.dataclass(frozen=True)
class WatermarkRule:
    """How a data-driven source's watermark follows its data (micros)."""

    out_of_orderness_us: int = 0
    idle_timeout_us: Optional[int] = None
    percentile: float = 1.0

    def __post_init__(self):
        if not 0 < self.percentile <= 1:
            raise ValueError("a watermark percentile must be above 0 and at most 1, not %r" % (self.percentile,))


@dataclasses.dataclass(frozen=True)
class PartitionTimes:
    """What one partition has shown: its newest event time, and the
    processing time of the last batch that read a row of it."""

    newest_event_us: int
    last_read_us: int


class DataWatermark:
    """One source's watermark under a `WatermarkRule` (see the module's docstring)."""

    def __init__(self, rule: WatermarkRule):
        self.rule = rule
        self._partitions: Dict[str, PartitionTimes] = {}
        self._watermark = MIN_MICROS

    def observe(self, newest_by_partition: Mapping[str, int], read_at_us: int):
        """A batch planned at processing time `read_at_us` read rows whose
        newest event time per partition is `newest_by_partition`."""
        for partition, newest in newest_by_partition.items():
            seen = self._partitions.get(partition)
            newest = newest if seen is None else max(newest, seen.newest_event_us)
            self._partitions[partition] = PartitionTimes(int(newest), int(read_at_us))

    def idle_partitions(self, now_us: int):
        """The partitions no batch read for `idle_timeout` up to `now_us`, sorted."""
        timeout = self.rule.idle_timeout_us
        if timeout is None:
            return []
        return sorted(p for p, t in self._partitions.items() if now_us - t.last_read_us >= timeout)

    def watermark(self, now_us: int) -> int:
        """The source's watermark at processing time `now_us` (never less
        than an earlier answer)."""
        if self._partitions:
            idle = set(self.idle_partitions(now_us))
            active = [t.newest_event_us for p, t in self._partitions.items() if p not in idle]
            if not active:
                newest = max(t.newest_event_us for t in self._partitions.values())
            elif self.rule.percentile < 1:
                newest = TimestampSummary.of(active).low_watermark(self.rule.percentile)
            else:
                newest = min(active)
            self._watermark = max(self._watermark, newest - self.rule.out_of_orderness_us)
        return self._watermark

    def snapshot(self) -> dict:
        """JSON-able state: what `restore` takes back."""
        return {
            "format": SNAPSHOT_FORMAT,
            "watermark": self._watermark,
            "partitions": {p: [t.newest_event_us, t.last_read_us] for p, t in sorted(self._partitions.items())},
        }

    @classmethod
    def restore(cls, rule: WatermarkRule, snapshot: Optional[dict]) -> "DataWatermark":
        """A DataWatermark as `snapshot` left it (None: a new one)."""
        out = cls(rule)
        if snapshot is None:
            return out
        if snapshot.get("format") != SNAPSHOT_FORMAT:
            raise ValueError(
                "source watermark snapshot format %r; this runner reads %d" % (snapshot.get("format"), SNAPSHOT_FORMAT)
            )
        out._watermark = int(snapshot["watermark"])
        out._partitions = {p: PartitionTimes(int(n), int(r)) for p, (n, r) in snapshot["partitions"].items()}
        return out
