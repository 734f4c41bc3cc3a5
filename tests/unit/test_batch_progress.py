"""A batch run's progress records (beam_spark_runner/batch_progress.py) and
the progress bar that draws them (progress_bar.py), without Spark."""

import io
import sys

import pytest

from beam_spark_runner import progress_bar
from beam_spark_runner.batch_progress import (
    RUNNING,
    SUCCEEDED,
    BatchRunProgress,
    SparkJobProgress,
    SparkStageProgress,
)


def _stage(stage_id, tasks, completed, active=0, failed=0, name=None):
    return SparkStageProgress(stage_id, name or "stage %d" % stage_id, tasks, completed, active, failed)


def test_a_finished_job_counts_the_tasks_it_ran_and_a_running_one_every_task_of_its_stages():
    # Job 0 reused stage 0's shuffle output: Spark skipped it (no task ran).
    finished = SparkJobProgress(0, SUCCEEDED, (_stage(0, 8, 0), _stage(1, 4, 4)))
    running = SparkJobProgress(1, RUNNING, (_stage(2, 8, 3, active=2, failed=1), _stage(3, 4, 0)))
    progress = BatchRunProgress((finished, running))
    assert (finished.tasks_total, finished.tasks_completed) == (4, 4)
    assert (running.tasks_total, running.tasks_completed) == (12, 3)
    assert (progress.tasks_total, progress.tasks_completed, progress.failed_tasks) == (16, 7, 1)
    assert progress.running_stage == "stage 2"
    assert BatchRunProgress().running_stage is None and BatchRunProgress().tasks_total == 0


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_auto_draws_on_a_terminal_or_in_a_jupyter_kernel_only(monkeypatch):
    monkeypatch.delitem(sys.modules, "ipykernel", raising=False)
    assert progress_bar.enabled("auto", _Tty())
    assert not progress_bar.enabled("auto", io.StringIO())
    assert progress_bar.enabled("on", io.StringIO()) and not progress_bar.enabled("off", _Tty())
    monkeypatch.setitem(sys.modules, "ipykernel", object())
    assert progress_bar.enabled("auto", io.StringIO())
    with pytest.raises(ValueError, match="--progress_bar must be one of auto, on, off, not 'sometimes'"):
        progress_bar.enabled("sometimes")


def test_the_bar_follows_the_polled_progress_and_ends_at_the_final_count():
    snapshots = [
        BatchRunProgress(),
        BatchRunProgress((SparkJobProgress(0, RUNNING, (_stage(0, 4, 1, active=3, name="Read+Split"),)),)),
        BatchRunProgress(
            (
                SparkJobProgress(0, SUCCEEDED, (_stage(0, 4, 4),)),
                SparkJobProgress(1, SUCCEEDED, (_stage(1, 2, 2),)),
            )
        ),
    ]
    polled = iter(snapshots)
    current = [snapshots[0]]

    def poll():
        current[0] = next(polled, current[0])
        return current[0]

    out = io.StringIO()
    bar = progress_bar.ProgressBar(poll, file=out, interval_s=3600)  # draws only when told
    bar._draw()  # no job yet: no bar
    assert out.getvalue() == ""
    bar._draw()
    assert "Beam on Spark: Read+Split" in out.getvalue() and "1/4" in out.getvalue()
    bar.start()
    bar.stop()  # the final draw
    assert "6/6" in out.getvalue().rsplit("\r", 1)[-1]


def test_a_failing_poll_does_not_fail_the_run():
    def poll():
        raise RuntimeError("SparkContext stopped")

    out = io.StringIO()
    bar = progress_bar.ProgressBar(poll, file=out, interval_s=0.01).start()
    bar.stop()
    assert out.getvalue() == ""
