"""How many TestStream events a micro-batch reads: every event not read
yet, or one per batch where a stage finalizes bundles, so that each
event's bundles are committed, and their callbacks run, before later
events' bundles (as Beam's DirectRunner commits each event's bundles
before the next event)."""

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_stream import TestStream

from beam_spark_runner.streaming.script import compile_script
from beam_spark_runner.streaming.source_planner import SourcePlanner, hold_record, write_holds
from beam_spark_runner.translation.planner import pipeline_proto_of, plan_streaming_pipeline
from tests.unit.planning_clock import PlanningClock


class _Finalizing(beam.DoFn):
    def process(self, element, finalizer=beam.DoFn.BundleFinalizerParam):
        finalizer.register(lambda: None)
        yield element


def _positions(tmp_path, dofn):
    """The TestStream position after each batch the planner plans."""
    p = beam.Pipeline(options=PipelineOptions(["--streaming"]))
    stream = TestStream().add_elements([1]).add_elements([2]).advance_watermark_to(10).add_elements([3])
    _ = p | stream.advance_watermark_to_infinity() | beam.ParDo(dofn)
    plan = plan_streaming_pipeline(pipeline_proto_of(p))
    clock = PlanningClock(0)
    planner = SourcePlanner(compile_script(plan, key_groups=1), str(tmp_path), clock=clock, sleep=clock.sleep)
    offset, positions = planner.initial_offset(), []
    while not offset["done"] and len(positions) < 20:
        offset = planner.next_offset(offset)
        write_holds(str(tmp_path), offset["batch"], hold_record({}))
        positions.extend(offset["pos"].values())
    return positions


def test_a_batch_reads_every_event_not_read_yet(tmp_path):
    assert _positions(tmp_path, beam.Map(lambda x: x).dofn)[0] == 5


def test_a_batch_reads_one_event_where_a_stage_finalizes_bundles(tmp_path):
    positions = _positions(tmp_path, _Finalizing())
    assert positions[:5] == [1, 2, 3, 4, 5]
    assert positions[-1] == 5
