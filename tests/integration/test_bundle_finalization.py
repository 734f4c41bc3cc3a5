"""Bundle finalization in batch (execution/batch_finalization.py) and streaming
(the checkpoint coordinator): callbacks run
after the Spark job that ran their bundle succeeded, in the driver; a
splittable DoFn is resumed only after its earlier bundles were finalized."""

import dataclasses
import json
import os
import time

import apache_beam as beam
from apache_beam.io.restriction_trackers import OffsetRange, OffsetRestrictionTracker
from apache_beam.options.pipeline_options import PipelineOptions
import pytest
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms.core import RestrictionProvider

from beam_spark_runner import SparkRunner
from beam_spark_runner.result import PipelineState
from beam_spark_runner.worker import sink_commits


def _pipeline(*args):
    return beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(list(args)))


def _record(path, event):
    with open(path, "a") as f:
        f.write(json.dumps(event) + "\n")


def _events(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f]


class _FinalizeEachBundle(beam.DoFn):
    """Registers one callback per bundle; the bundle of element 0 ends only
    after the other partitions' bundles ended, and each bundle's end is
    recorded, so a callback can tell whether its whole Spark job was done."""

    def __init__(self, log, partitions):
        self._log = log
        self._partitions = partitions

    def start_bundle(self):
        self._elements = []

    def process(self, element, finalizer=beam.DoFn.BundleFinalizerParam):
        if not self._elements:
            log, partitions = self._log, self._partitions

            def callback():
                ended = sum(1 for e in _events(log) if e["what"] == "bundle ended")
                _record(log, {"what": "finalized", "pid": os.getpid(), "bundles ended": ended, "of": partitions})

            finalizer.register(callback)
        self._elements.append(element)
        yield element

    def finish_bundle(self):
        if 0 in self._elements:
            # Wait until the other bundles ended: finalizing in the task
            # would let this bundle's callback run before they did.
            deadline = time.time() + 60
            while (
                sum(1 for e in _events(self._log) if e["what"] == "bundle ended") < self._partitions - 1
                and time.time() < deadline
            ):
                time.sleep(0.05)
        _record(self._log, {"what": "bundle ended", "pid": os.getpid()})


def test_callbacks_run_in_the_driver_after_the_job_that_ran_their_bundles(tmp_path):
    log = str(tmp_path / "events")
    partitions = 2
    with _pipeline("--parallelism=%d" % partitions) as p:
        # Create's reshuffle places each element at random: with 8 elements
        # all landed in one partition once in ~128 runs (one bundle, and the
        # test waited for a second one); with 64, once in ~2^63.
        out = (
            p
            | beam.Create(list(range(64)), reshuffle=True)
            | "Finalizing" >> beam.ParDo(_FinalizeEachBundle(log, partitions))
        )
        assert_that(out, equal_to(list(range(64))))
    events = _events(log)
    ended = [e for e in events if e["what"] == "bundle ended"]
    finalized = [e for e in events if e["what"] == "finalized"]
    assert len(finalized) == len(ended) >= partitions, events
    for e in finalized:
        assert e["pid"] == os.getpid(), "a callback ran in a worker process: %s" % events
        assert e["bundles ended"] == len(ended), "a callback ran before its job was done: %s" % events


class _CountdownProvider(RestrictionProvider):
    def initial_restriction(self, element):
        return OffsetRange(0, element)

    def create_tracker(self, restriction):
        return OffsetRestrictionTracker(restriction)

    def restriction_size(self, element, restriction):
        return restriction.size()


class _ResumesAfterFinalization(beam.DoFn):
    """Claims one position per bundle and checkpoints; each bundle's callback
    records its position. A resumed bundle records which positions it saw
    finalized: with finalization after the Spark job, all earlier ones."""

    def __init__(self, log):
        self._log = log

    def process(
        self,
        element,
        finalizer=beam.DoFn.BundleFinalizerParam,
        tracker=beam.DoFn.RestrictionParam(_CountdownProvider()),
    ):
        position = tracker.current_restriction().start
        if not tracker.try_claim(position):
            return
        log = self._log
        seen = sorted(e["position"] for e in _events(log) if e["what"] == "finalized")
        finalizer.register(lambda: _record(log, {"what": "finalized", "position": position}))
        yield position, seen
        tracker.defer_remainder()


def test_a_splittable_dofn_resumes_only_after_its_earlier_bundles_were_finalized(tmp_path):
    log = str(tmp_path / "events")
    p = _pipeline()
    out = p | beam.Create([4]) | beam.ParDo(_ResumesAfterFinalization(log))
    assert_that(out, equal_to([(0, []), (1, [0]), (2, [0, 1]), (3, [0, 1, 2])]))
    assert p.run().wait_until_finish() == PipelineState.DONE
    assert sorted(e["position"] for e in _events(log)) == [0, 1, 2, 3]


def test_a_callback_that_cannot_be_pickled_still_runs_when_its_bundle_ends(tmp_path):
    log = str(tmp_path / "events")

    class Unpicklable(beam.DoFn):
        def process(self, element, finalizer=beam.DoFn.BundleFinalizerParam):
            pending = (e for e in [element])  # closes over a generator: cannot be pickled

            def callback():
                _record(log, {"what": "finalized", "pid": os.getpid(), "element": next(pending)})

            finalizer.register(callback)
            yield element

    with _pipeline() as p:
        assert_that(p | beam.Create([1]) | beam.ParDo(Unpicklable()), equal_to([1]))
    (event,) = _events(log)
    assert event["element"] == 1
    assert event["pid"] != os.getpid()  # in the worker, when the bundle ended


@dataclasses.dataclass(frozen=True)
class _RefusedCommit(sink_commits.SinkCommit):
    """A sink's commit whose target refuses the epoch."""

    log: str

    def commit(self, context):
        _record(self.log, {"what": "commit tried", "pid": os.getpid()})
        raise RuntimeError("toy sink: the target refused epoch 0")


class _RegistersCallbacks(beam.DoFn):
    def __init__(self, log):
        self._log = log

    def process(self, element, finalizer=beam.DoFn.BundleFinalizerParam):
        log = self._log

        def failing_callback():
            _record(log, {"what": "callback tried", "pid": os.getpid()})
            raise RuntimeError("an acknowledgement the source refused")

        finalizer.register(failing_callback if element == "callback" else _RefusedCommit(log))
        yield element


def test_a_failing_callback_is_logged_but_a_failing_sink_commit_fails_the_run(tmp_path):
    """As in Beam's SDK harness a finalization callback that fails does not
    fail the pipeline; a sink's commit (worker/sink_commits.py) that fails
    does: its rows would otherwise never be published."""
    log = str(tmp_path / "events")
    with _pipeline() as p:
        assert_that(p | beam.Create(["callback"]) | beam.ParDo(_RegistersCallbacks(log)), equal_to(["callback"]))
    assert [e["what"] for e in _events(log)] == ["callback tried"]

    os.remove(log)
    p = _pipeline()
    _ = p | beam.Create(["commit"]) | beam.ParDo(_RegistersCallbacks(log))
    with pytest.raises(Exception, match="toy sink: the target refused epoch 0"):
        p.run().wait_until_finish()
    (event,) = _events(log)
    assert event == {"what": "commit tried", "pid": os.getpid()}  # in the driver


def _commits(checkpoint):
    """Batches in Spark's commit log under a streaming checkpoint."""
    commits = os.path.join(checkpoint, "spark", "commits")
    return sorted(int(n) for n in os.listdir(commits) if n.isdigit()) if os.path.isdir(commits) else []


class _FinalizeAfterCommit(beam.DoFn):
    """Records, per element, the batches Spark had committed when the
    element was processed and when its bundle's callback ran."""

    def __init__(self, log, checkpoint):
        self._log, self._checkpoint = log, checkpoint

    def process(self, element, finalizer=beam.DoFn.BundleFinalizerParam):
        log, checkpoint = self._log, self._checkpoint
        key = element[0]
        _record(log, {"what": "processed", "key": key, "commits": _commits(checkpoint)})

        def callback():
            _record(log, {"what": "finalized", "key": key, "pid": os.getpid(), "commits": _commits(checkpoint)})

        finalizer.register(callback)
        yield element


def test_streaming_callbacks_run_in_the_driver_after_their_batch_committed(tmp_path):
    """Beam's contract: finalize a bundle only after the runner durably
    committed its output. In streaming that is Spark's commit log entry of
    the micro-batch that ran the bundle, so the callback must see one more
    committed batch than the bundle saw."""
    from apache_beam.testing.test_stream import TestStream

    log, checkpoint = str(tmp_path / "log"), str(tmp_path / "checkpoint")

    def at(*values):
        return [beam.window.TimestampedValue(v, v) for v in values]

    stream = (
        TestStream()
        .add_elements(at(1, 2))
        .advance_watermark_to(10)
        .add_elements(at(13))
        .advance_watermark_to(20)
        .add_elements(at(24))
        .advance_watermark_to_infinity()
    )
    p = _pipeline("--streaming", "--sdk_harness_only", "--checkpoint_dir=%s" % checkpoint)
    out = (
        p
        | stream
        | beam.Map(lambda x: (x % 2, x))
        | beam.WindowInto(beam.window.FixedWindows(100))
        | beam.GroupByKey()
        | beam.ParDo(_FinalizeAfterCommit(log, checkpoint))
    )
    assert_that(out | beam.Map(lambda kv: kv[0]), equal_to([0, 1]))
    assert p.run().wait_until_finish() == PipelineState.DONE
    events = _events(log)
    processed = {e["key"]: e["commits"] for e in events if e["what"] == "processed"}
    finalized = [e for e in events if e["what"] == "finalized"]
    assert sorted(processed) == [0, 1] and sorted(e["key"] for e in finalized) == [0, 1]
    for e in finalized:
        assert e["pid"] == os.getpid(), "callbacks run in the driver"
        assert len(e["commits"]) > len(processed[e["key"]]), "a callback ran before its batch committed: %s" % e
