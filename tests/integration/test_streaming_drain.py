"""Draining a streaming run (SparkPipelineResult.drain): the sources read
nothing more, splittable DoFns truncate their restrictions, every window
fires and the run ends DRAINED with nothing lost."""

import time

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from beam_spark_runner import SparkRunner
from beam_spark_runner.result import NotDrainable, PipelineState
from tests import drain_pipelines

DRAIN_TIMEOUT_S = 120


def _run(build, directory):
    p = beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(["--streaming"]))
    build(p, str(directory))
    return p.run()


def _drained(result):
    started = time.time()
    assert result.drain() == PipelineState.DRAINING
    assert result.state == PipelineState.DRAINING
    assert result.drain() == PipelineState.DRAINING  # a second request changes nothing
    state = result.wait_until_finish(DRAIN_TIMEOUT_S * 1000)
    if state is None:
        result.cancel()
        pytest.fail("the drained run had not ended after %d s" % DRAIN_TIMEOUT_S)
    return state, time.time() - started


def test_drain_ends_an_unbounded_source_and_fires_every_window(tmp_path):
    """PeriodicImpulse has no end and a stateful DoFn holds a processing-time
    timer an hour ahead: without a drain the run goes on and its one-hour
    window never fires. Drained, the impulse's remaining work truncates to
    nothing, the watermark reaches +infinity, the window fires ON_TIME
    with every tick counted once, and the run ends DRAINED."""
    result = _run(drain_pipelines.ticks, tmp_path)
    drain_pipelines.wait_for(tmp_path, "tick", 3)
    assert drain_pipelines.count(tmp_path, "sum") == 0
    state, _ = _drained(result)
    assert state == PipelineState.DRAINED
    drain_pipelines.assert_ticks_drained(tmp_path)
    with pytest.raises(NotDrainable, match="DRAINED"):
        result.drain()


def test_drain_finishes_the_truncated_restriction_of_a_splittable_dofn(tmp_path):
    """A splittable DoFn whose RestrictionProvider.truncate keeps three more
    positions: after the drain exactly those run, then the run ends."""
    result = _run(drain_pipelines.tail, tmp_path)
    drain_pipelines.wait_for(tmp_path, "pos", 3)
    state, _ = _drained(result)
    assert state == PipelineState.DRAINED
    drain_pipelines.assert_tail_truncated(tmp_path)


def test_a_batch_run_cannot_be_drained():
    p = beam.Pipeline(runner=SparkRunner(), options=PipelineOptions([]))
    _ = p | beam.Create([1, 2]) | beam.Map(lambda x: x)
    result = p.run()
    with pytest.raises(NotDrainable, match="batch run ends by itself"):
        result.drain()
    assert result.wait_until_finish() == PipelineState.DONE
