"""A batch run's Spark job and stage progress (SparkPipelineResult.batch_progress)
and its progress bar (--progress_bar), on the suite's SparkSession."""

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_stream import TestStream

from beam_spark_runner import SparkRunner
from beam_spark_runner.batch_progress import SUCCEEDED
from beam_spark_runner.options import SparkRunnerOptions


def _word_count(options):
    p = beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(options))
    _ = (
        p
        | "Lines" >> beam.Create(["a b", "b c", "c a b"] * 50)
        | "Split" >> beam.FlatMap(str.split)
        | "Count" >> beam.combiners.Count.PerElement()
        | "Format" >> beam.MapTuple(lambda w, n: "%s %d" % (w, n))
    )
    return p.run()


def test_a_finished_batch_run_lists_its_spark_jobs_with_every_task_completed():
    result = _word_count(["--progress_bar=off", "--parallelism=3"])
    result.wait_until_finish()
    progress = result.batch_progress()
    assert progress.jobs and all(job.status == SUCCEEDED for job in progress.jobs)
    stages = [s for job in progress.jobs for s in job.stages]
    # Stages are named after the Beam transforms they run: the Count's
    # shuffle is written by one stage and read by the one ending in Format.
    assert any(s.name.startswith("Count/") for s in stages) and any(s.name.endswith("Format") for s in stages)
    assert progress.tasks_total >= 6  # 3 partitions on each side of the shuffle
    assert progress.tasks_completed == progress.tasks_total
    assert progress.failed_tasks == 0 and progress.running_stage is None


def test_the_progress_bar_draws_the_runs_tasks_to_the_end(capfd):
    result = _word_count(["--progress_bar=on", "--parallelism=3"])
    result.wait_until_finish()
    total = result.batch_progress().tasks_total
    err = capfd.readouterr().err
    assert "Beam on Spark" in err
    assert "%d/%d" % (total, total) in err.rsplit("\r", 1)[-1]


def test_no_bar_when_switched_off(capfd):
    _word_count(["--progress_bar=off"]).wait_until_finish()
    assert "Beam on Spark" not in capfd.readouterr().err


def test_a_streaming_run_has_no_batch_progress_and_warns_that_the_bar_does_nothing(caplog):
    p = beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(["--streaming", "--progress_bar=on"]))
    _ = p | TestStream().add_elements([1]).advance_watermark_to_infinity() | beam.Map(lambda x: x)
    result = p.run()
    result.wait_until_finish()
    assert result.batch_progress().jobs == ()
    assert "--progress_bar=on has no effect" in caplog.text


def test_an_unknown_mode_is_refused_naming_the_option():
    with pytest.raises(SystemExit):
        PipelineOptions(["--progress_bar=sometimes"]).view_as(SparkRunnerOptions)
