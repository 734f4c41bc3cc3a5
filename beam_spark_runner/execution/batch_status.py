"""A batch run's Spark jobs and stages, read from Spark's public status
tracker (`SparkContext.statusTracker()`) by the run's job group, into the
plain records of `batch_progress.py`."""

from beam_spark_runner.batch_progress import BatchRunProgress, SparkJobProgress, SparkStageProgress


def job_group_progress(sc, job_group):
    """The progress of the Spark jobs of `job_group` so far, oldest first.
    Jobs and stages Spark no longer retains (spark.ui.retainedJobs,
    spark.ui.retainedStages) are left out."""
    tracker = sc.statusTracker()
    jobs = []
    for job_id in sorted(tracker.getJobIdsForGroup(job_group)):
        info = tracker.getJobInfo(job_id)
        if info is None:
            continue
        stages = []
        for stage_id in sorted(info.stageIds):
            stage = tracker.getStageInfo(stage_id)
            if stage is None:  # not submitted yet, or no longer retained
                continue
            stages.append(
                SparkStageProgress(
                    stage_id=stage.stageId,
                    name=stage.name,
                    num_tasks=stage.numTasks,
                    completed_tasks=stage.numCompletedTasks,
                    active_tasks=stage.numActiveTasks,
                    failed_tasks=stage.numFailedTasks,
                )
            )
        jobs.append(SparkJobProgress(job_id=job_id, status=str(info.status), stages=tuple(stages)))
    return BatchRunProgress(tuple(jobs))
