"""Where a streaming pipeline's Python work runs: the work after a
PeriodicImpulse (one restriction, hence one key-group) in more than one
Spark task, each element once; and batch and streaming tasks of one session
in Python workers forked from one daemon.

Every DoFn here records what it saw in files of its own (one per bundle), so
the assertions read facts, never timings.
"""

import json
import os
import uuid

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms.periodicsequence import PeriodicImpulse

from beam_spark_runner import SparkRunner

# Ticks long past: PeriodicImpulse emits them all at once, as in Nexmark's
# streaming benchmark; fixed, so the elements (and their key-groups) are the
# same on every run.
START = 1_000_000_000
TICKS = 20
PER_TICK = 50


class _Record(beam.DoFn):
    """Writes each bundle's elements with the Spark partition, the task
    attempt and the worker's parent process (its daemon) to a file of its
    own."""

    def __init__(self, directory):
        self._directory = directory

    def start_bundle(self):
        self._seen = []

    def process(self, element):
        self._seen.append(element)

    def finish_bundle(self):
        from pyspark import TaskContext

        task = TaskContext.get()
        record = {
            "elements": self._seen,
            "partition": task.partitionId(),
            "attempt": task.taskAttemptId(),
            "daemon": os.getppid(),
        }
        path = os.path.join(self._directory, uuid.uuid4().hex)
        with open(path + ".tmp", "w") as f:
            json.dump(record, f)
        os.replace(path + ".tmp", path + ".json")


def _records(directory):
    out = []
    for name in sorted(os.listdir(directory)):
        if name.endswith(".json"):
            with open(os.path.join(directory, name)) as f:
                out.append(json.load(f))
    return out


def _elements_of_tick(tick):
    first = int(round(float(tick) - START)) * PER_TICK
    return range(first, first + PER_TICK)


def _run_streaming(directory):
    options = PipelineOptions(["--streaming"])
    with beam.Pipeline(runner=SparkRunner(), options=options) as p:
        (
            p
            | PeriodicImpulse(start_timestamp=START, stop_timestamp=START + TICKS, fire_interval=1)
            | beam.FlatMap(_elements_of_tick)
            | beam.ParDo(_Record(str(directory)))
        )


def test_work_after_a_periodic_impulse_runs_in_several_tasks_each_element_once(tmp_path):
    """PeriodicImpulse's one restriction lives in one key-group; what reads
    its ticks is an operator of its own whose input is re-partitioned, so the
    events made from the ticks are made and processed by more than one task."""
    _run_streaming(tmp_path)
    records = _records(tmp_path)
    elements = [e for r in records for e in r["elements"]]
    assert sorted(elements) == list(range(TICKS * PER_TICK))
    busy = {r["partition"] for r in records if r["elements"]}
    assert len(busy) > 1, busy
    assert len({r["attempt"] for r in records if r["elements"]}) > 1


def test_batch_and_streaming_tasks_of_a_session_share_one_python_worker_daemon(tmp_path):
    """Batch stages run as RDD tasks, a streaming query's as Spark SQL Python
    tasks (mapInArrow): one daemon forks the workers of both, so Beam is
    imported once per session, not again on a streaming query's first
    micro-batch (session.SHARED_DAEMON_KEY)."""
    batch_dir, streaming_dir = tmp_path / "batch", tmp_path / "streaming"
    batch_dir.mkdir()
    streaming_dir.mkdir()
    with beam.Pipeline(runner=SparkRunner(), options=PipelineOptions([])) as p:
        p | beam.Create(list(range(20))) | beam.ParDo(_Record(str(batch_dir)))
    _run_streaming(streaming_dir)
    batch = {r["daemon"] for r in _records(batch_dir) if r["elements"]}
    streaming = {r["daemon"] for r in _records(streaming_dir) if r["elements"]}
    assert batch and streaming
    assert batch == streaming, (batch, streaming)
