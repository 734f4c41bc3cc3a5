"""Beam's `userstate_test.StatefulDoFnOnDirectRunnerTest`, from the installed
wheel, on SparkRunner: stateful DoFns with bag, set, read-modify-write and
combining state, event-time and dynamic timers, timer output timestamps,
mostly fed by TestStream (so they run on the streaming runner).

The suite runs twice: `SparkStatefulDoFnTest` on the runner's own stateful
DoFn path (worker/stateful_step.py; a DoFn it does not take, e.g. one with
ordered-list state, runs in the harness there too) and
`SparkStatefulDoFnOnHarnessTest` with `--sdk_harness_only`, every stateful
DoFn in Beam's SDK harness.

The test bodies (pipelines and assertions) are Beam's, unmodified. Beam's
tests collect their output with `record_dofn()`, a DoFn appending to a list
on the test class: that only works when DoFns run in the test process. Here
`record_dofn()` returns `_RecordToFiles`, which writes each element to a
file in a directory of the test, and the module's `TestPipeline` is pointed
at a subclass that, once the pipeline has run, reads those files back into
that list in the order they were written (CLOCK_MONOTONIC, which Linux
shares across processes) before the test's assertions read it.
"""

import os
import pickle
import shutil
import tempfile
import time
import unittest

import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.transforms import core, userstate_test

from beam_spark_runner import SparkRunner
from beam_spark_runner.options import SparkRunnerOptions

# Not bound to a module-level name: pytest would collect it as it stands.
_RECORDED = "StatefulDoFnOnDirectRunnerTest"

SKIPS = {
    "test_generate_sequence_with_realtime_timer": (
        "pins its pipeline to DirectRunner (beam.Pipeline(argv=['--runner=DirectRunner'])): "
        "it would not exercise SparkRunner, and waits for no issue (processing-time timers "
        "of stateful DoFns run in Beam's deduplicate_test, tests/conformance/test_streaming_suites.py)"
    ),
    "test_stateful_set_state_compaction_race_portably": (
        "exercises the SDK harness's gRPC state handler (it delays GrpcStateHandler requests) in "
        "an --environment_type=LOOPBACK run; SparkRunner runs the Python SDK embedded in Spark's "
        "workers, with no gRPC state channel, and refuses --environment_type=LOOPBACK rather than "
        "ignore it (the job service is where LOOPBACK runs)"
    ),
}


class _RecordToFiles(core.DoFn):
    """Writes every element it sees to its own file under `directory`,
    named so that sorting the names sorts by the time of writing."""

    def __init__(self, directory):
        self.directory = directory
        self._count = 0

    def process(self, element):
        self._count += 1
        name = "%020d-%08d-%08d" % (time.monotonic_ns(), os.getpid(), self._count)
        tmp = os.path.join(self.directory, "." + name)
        with open(tmp, "wb") as f:
            pickle.dump(element, f)
        os.replace(tmp, os.path.join(self.directory, name))


def _read_records(directory):
    records = []
    for name in sorted(n for n in os.listdir(directory) if not n.startswith(".")):
        with open(os.path.join(directory, name), "rb") as f:
            records.append(pickle.load(f))
    return records


class _RecordingSparkTestPipeline(TestPipeline):
    """TestPipeline on SparkRunner that, after a run, loads what
    `_RecordToFiles` wrote into Beam's `all_records` list. With
    `harness_only`, the stateful DoFns run in Beam's SDK harness
    (`--sdk_harness_only`) instead of the runner's own stateful path."""

    directory = None
    harness_only = False

    def __init__(self, runner=None, options=None, *args, **kwargs):
        super().__init__(runner or SparkRunner(), options, *args, **kwargs)
        self.options.view_as(SparkRunnerOptions).sdk_harness_only = self.harness_only

    def run(self, test_runner_api="AUTO"):
        result = super().run(test_runner_api)
        result.wait_until_finish()
        getattr(userstate_test, _RECORDED).all_records[:] = _read_records(self.directory)
        return result


@pytest.fixture(autouse=True, scope="module")
def spark_test_pipeline_in_userstate_test():
    module_pipeline = userstate_test.TestPipeline
    userstate_test.TestPipeline = _RecordingSparkTestPipeline
    yield
    userstate_test.TestPipeline = module_pipeline


class _RecordingAcrossProcesses:
    harness_only = False

    def setUp(self):
        super().setUp()
        self._directory = tempfile.mkdtemp(prefix="beam-spark-records-")
        _RecordingSparkTestPipeline.directory = self._directory
        _RecordingSparkTestPipeline.harness_only = self.harness_only

    def tearDown(self):
        _RecordingSparkTestPipeline.directory = None
        _RecordingSparkTestPipeline.harness_only = False
        shutil.rmtree(self._directory, ignore_errors=True)
        super().tearDown()

    def record_dofn(self):
        return _RecordToFiles(self._directory)


def _on_spark(case, name, harness_only):
    attrs = {"__module__": __name__, "harness_only": harness_only}
    for name, reason in SKIPS.items():
        if not hasattr(case, name):
            raise AttributeError("skip list names %s, which does not exist" % name)
        attrs[name] = unittest.skip(reason)(getattr(case, name))
    return type(name, (_RecordingAcrossProcesses, case), attrs)


# The runner's own stateful DoFn path (worker/stateful_step.py), where the
# DoFns qualify, and Beam's SDK harness (--sdk_harness_only).
SparkStatefulDoFnTest = _on_spark(getattr(userstate_test, _RECORDED), "SparkStatefulDoFnTest", False)
SparkStatefulDoFnOnHarnessTest = _on_spark(getattr(userstate_test, _RECORDED), "SparkStatefulDoFnOnHarnessTest", True)


def test_records_written_in_another_process_come_back_in_order(tmp_path):
    """The recorder itself: what it writes, in whatever process, reads back
    in the order written."""
    import multiprocessing

    recorder = _RecordToFiles(str(tmp_path))
    recorder.process("first")
    ctx = multiprocessing.get_context("spawn")
    child = ctx.Process(target=_record_in_child, args=(str(tmp_path), "second"))
    child.start()
    child.join(60)
    assert child.exitcode == 0
    recorder.process("third")
    assert _read_records(str(tmp_path)) == ["first", "second", "third"]


def _record_in_child(directory, element):
    _RecordToFiles(directory).process(element)
