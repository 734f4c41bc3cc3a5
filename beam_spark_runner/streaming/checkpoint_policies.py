"""The checkpoint coordinator's policies, as small objects with an injected
clock (milliseconds), so tests drive time. No Spark, no Beam."""

import dataclasses
import time


def wall_clock_ms():
    return int(time.time() * 1000)


@dataclasses.dataclass
class ReleasePolicy:
    """When completed batches release their side effects (finalizers
    run): once `every_batches` batches completed unreleased, or `every_ms`
    passed since the last release, whichever comes first. The default, every batch, gives the lowest latency;
    releasing less often trades latency for fewer calls to external systems.
    A finished pipeline always releases everything."""

    every_batches: int = 1
    every_ms: int = 0  # 0: no time condition
    clock: object = wall_clock_ms
    _last_release_ms: int = None

    def __post_init__(self):
        if self.every_batches < 1:
            raise ValueError("ReleasePolicy.every_batches must be at least 1, got %r" % self.every_batches)
        if self.every_ms < 0:
            raise ValueError("ReleasePolicy.every_ms must not be negative, got %r" % self.every_ms)
        self._last_release_ms = self.clock()

    def due(self, unreleased_batches, finished=False):
        if unreleased_batches == 0:
            return False
        if finished or unreleased_batches >= self.every_batches:
            return True
        return self.every_ms > 0 and self.clock() - self._last_release_ms >= self.every_ms

    def released(self):
        self._last_release_ms = self.clock()


@dataclasses.dataclass(frozen=True)
class RetentionPolicy:
    """How many completed-checkpoint records stay in the checkpoint (the
    newest ones); older ones are deleted as new ones complete."""

    keep: int = 3

    def __post_init__(self):
        if self.keep < 1:
            raise ValueError("RetentionPolicy.keep must be at least 1, got %r" % self.keep)

    def expired(self, epochs):
        """The epochs (ascending) whose records may go."""
        return list(epochs)[: max(0, len(epochs) - self.keep)]


@dataclasses.dataclass
class FailurePolicy:
    """How many micro-batches may fail in a row before the run fails (Flink's
    tolerable checkpoint failures). A batch that completes resets the count;
    each tolerated failure restarts the query from the last completed
    checkpoint."""

    tolerable_consecutive: int = 0
    _failures: int = 0

    def __post_init__(self):
        if self.tolerable_consecutive < 0:
            raise ValueError(
                "FailurePolicy.tolerable_consecutive must not be negative, got %r" % self.tolerable_consecutive
            )

    def failed(self) -> bool:
        """A batch failed: True if the run may go on (restart), False if it fails."""
        self._failures += 1
        return self._failures <= self.tolerable_consecutive

    def completed(self):
        self._failures = 0

    @property
    def consecutive_failures(self):
        return self._failures


@dataclasses.dataclass(frozen=True)
class CheckpointSettings:
    """The user's choices for a streaming run's checkpoints (SparkRunner's
    --publish_every_batches, --publish_interval_ms and
    --tolerable_failed_batches); builds the policies."""

    publish_every_batches: int = 1
    publish_interval_ms: int = 0
    tolerable_failed_batches: int = 0

    def release_policy(self, clock=wall_clock_ms) -> ReleasePolicy:
        return ReleasePolicy(self.publish_every_batches, self.publish_interval_ms, clock)

    def failure_policy(self) -> FailurePolicy:
        return FailurePolicy(self.tolerable_failed_batches)
