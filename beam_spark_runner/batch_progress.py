"""A batch run's progress as data: the Spark jobs and stages it ran so far.

Plain records, no Spark in them: `execution/batch_status.py` fills them from
Spark's status tracker, `SparkPipelineResult.batch_progress()` returns them,
and `progress_bar.py` draws them. A batch run is several Spark jobs (one per
pipeline leaf, side inputs, native writes), each of stages of tasks; the
totals count tasks, the unit Spark schedules and retries.
"""

import dataclasses

# SparkJobInfo.status values (Spark's JobExecutionStatus).
RUNNING = "RUNNING"
SUCCEEDED = "SUCCEEDED"
FAILED = "FAILED"
UNKNOWN = "UNKNOWN"


@dataclasses.dataclass(frozen=True)
class SparkStageProgress:
    """One Spark stage of a job: its name (the Beam transforms it runs, as
    the Spark UI shows them) and its tasks."""

    stage_id: int
    name: str
    num_tasks: int
    completed_tasks: int
    active_tasks: int
    failed_tasks: int


@dataclasses.dataclass(frozen=True)
class SparkJobProgress:
    """One Spark job of the run. `stages` holds the stages Spark reported
    so far; a stage Spark skipped (its shuffle output was reused) or has not
    submitted yet is absent or has no completed tasks."""

    job_id: int
    status: str
    stages: tuple

    @property
    def tasks_total(self):
        """Tasks the job runs: a finished job counts the tasks it ran (a
        stage it skipped adds none), a running one every task of its
        stages."""
        if self.status == SUCCEEDED:
            return sum(s.completed_tasks for s in self.stages)
        return sum(s.num_tasks for s in self.stages)

    @property
    def tasks_completed(self):
        return sum(min(s.completed_tasks, s.num_tasks) for s in self.stages)


@dataclasses.dataclass(frozen=True)
class BatchRunProgress:
    """A batch run's Spark jobs so far, oldest first. Empty before the first
    job starts and for a streaming run (see `streaming_progress()`)."""

    jobs: tuple = ()

    @property
    def tasks_total(self):
        return sum(j.tasks_total for j in self.jobs)

    @property
    def tasks_completed(self):
        return sum(j.tasks_completed for j in self.jobs)

    @property
    def failed_tasks(self):
        return sum(s.failed_tasks for j in self.jobs for s in j.stages)

    @property
    def running_stage(self):
        """The name of the newest stage with tasks running (None: none is)."""
        running = [s for j in self.jobs for s in j.stages if s.active_tasks > 0]
        return max(running, key=lambda s: s.stage_id).name if running else None
