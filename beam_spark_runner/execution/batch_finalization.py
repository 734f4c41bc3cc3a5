"""Bundle finalization in batch: callbacks run after Spark holds the output.

Tasks of a stage whose DoFns request finalization (`StagePlan.finalizes`)
do not run a bundle's callbacks when the bundle ends: they pickle them
(`HarnessStageRunner.finalize_after_commit`) into an accumulator. Spark merges a
task's accumulator updates only when the task succeeded, so callbacks of a
failed or retried attempt are never run. After every Spark job of the run
the driver runs the callbacks that job's tasks handed over
(`Finalizer.run_new`): by then Spark has the bundles' output (shuffle files,
persisted blocks or the job's result), so a callback that acknowledges
input to an external system cannot lose data. Callbacks run in the driver
process, in the order their tasks finished; a failing callback is logged and
does not fail the pipeline, as in the SDK harness, but for a sink's commit
(worker/sink_commits.py), which must succeed: one that fails fails the run. A callback that cannot
be pickled runs in the worker when its bundle ends, with a warning.

A finalizing stage without keyed state runs in rounds (`run_in_rounds`):
each Spark job runs every bundle once; the SDF residuals (self-checkpoints)
become the input of the next job, started after the previous job's
callbacks ran and after the shortest resume delay the residuals asked for.
A splittable DoFn therefore sees its earlier bundles finalized before it
resumes. A stateful finalizing stage keeps its residual loop inside the task
(its state lives there); its callbacks still run after the job.
"""

import time

from beam_spark_runner.worker.beam_internals import pickler
from pyspark.accumulators import AccumulatorParam

from beam_spark_runner.execution import checkpoint_files
from beam_spark_runner.execution.naming import name_rdd, spark_call_site
from beam_spark_runner.worker import sink_commits
from beam_spark_runner.worker.harness_stage import RESIDUAL, run_finalization_callbacks


class FinalizationsParam(AccumulatorParam):
    """Accumulates [(stage display name, pickled list of callbacks)]."""

    def zero(self, value):
        return []

    def addInPlace(self, acc, update):
        acc.extend(update)
        return acc


class Finalizer:
    """The driver's side: the accumulator tasks add to, and the callbacks
    not yet run. `spark`: the session whose file systems the sinks'
    commits read through."""

    def __init__(self, spark):
        self.accumulator = spark.sparkContext.accumulator([], FinalizationsParam())
        self._context = sink_commits.CommitContext(lambda root: checkpoint_files.open_checkpoint_files(spark, root))
        self._done = 0

    def run_new(self):
        """Runs the callbacks handed over since the last call; returns how
        many ran."""
        handed = self.accumulator.value
        new, self._done = handed[self._done :], len(handed)
        ran = 0
        for stage_name, blob in new:
            commits, others = sink_commits.split(pickler.loads(blob))
            ran += sink_commits.run_commits(commits, self._context)
            run_finalization_callbacks(others, stage_name)
            ran += len(others)
        return ran


def run_in_rounds(execution, stage, inputs, run_partition, sleep=time.sleep):
    """Runs a finalizing stage now, one Spark job per round (see the module
    docstring); returns the RDD of its (output index, block) records.

    `inputs`: the stage's (input index, block) RDD; `run_partition`: the
    task function, which yields outputs and then RESIDUAL records."""
    sc = execution.sc
    rounds = []
    current = inputs
    number = 0
    while True:
        number += 1
        execution.check_not_cancelled()
        name = stage.display_name if number == 1 else "%s (resumed, round %d)" % (stage.display_name, number)
        with spark_call_site(sc, name):
            records = name_rdd(current.mapPartitions(run_partition), name)
        execution.persist(records)
        sc.setJobDescription("Beam: %s" % name)
        with spark_call_site(sc, name):
            count, delay = records.filter(_is_residual).map(_count_and_delay).fold((0, None), _add)
        execution.after_spark_job()
        rounds.append(records.filter(_is_not_residual))
        if not count:
            break
        if delay:
            sleep(delay)
        current = records.filter(_is_residual).map(_residual_input)
    return rounds[0] if len(rounds) == 1 else sc.union(rounds)


# -- functions shipped to executors (module level so they pickle by name) --


def _is_residual(record):
    return record[0] == RESIDUAL


def _is_not_residual(record):
    return record[0] != RESIDUAL


def _count_and_delay(record):
    return 1, record[1][2]


def _add(a, b):
    """(count, shortest delay) of two (count, delay or None) pairs."""
    delays = [d for d in (a[1], b[1]) if d is not None]
    return a[0] + b[0], min(delays) if delays else None


def _residual_input(record):
    index, element, _ = record[1]
    return index, element
