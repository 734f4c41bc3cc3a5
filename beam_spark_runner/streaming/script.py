"""Driver side: compiles a StreamingPlan's sources into a SourceScript.

TestStream events are decoded and re-encoded here, once, into the DATA rows
their outputs' readers expect (windowed values in the global window, keyed
where the reader is keyed), so the planner that Spark runs in its own
process needs no Beam import and replays cost nothing.
"""

import functools
import dataclasses

from apache_beam.coders.coder_impl import create_OutputStream
from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.testing.test_stream import WindowedValueHolder
from apache_beam.transforms import window
from apache_beam.utils import windowed_value
from apache_beam.utils.timestamp import Timestamp

from beam_spark_runner.streaming import rows as R
from beam_spark_runner.streaming.operators import RowWriter
from beam_spark_runner.streaming.source_planner import (
    ELEMENTS,
    IMPULSE_SEQ,
    PROCESSING_TIME,
    WATERMARK,
    ScriptedStream,
    SourceScript,
)
from beam_spark_runner.streaming.source_watermarks import WatermarkRule
from beam_spark_runner.streaming.watermark_lanes import plan_lanes
from beam_spark_runner.streaming.watermarks import MAX_MICROS, MIN_MICROS
from beam_spark_runner.errors import UnsupportedPipelineError
from beam_spark_runner.plans import source_key
from beam_spark_runner.worker import context
from beam_spark_runner.worker.impulse import ENCODED_IMPULSE_VALUE


def compile_script(plan, key_groups) -> SourceScript:
    """The plan's sources as a SourceScript, with each keyed operator in the
    lane of its watermark percentile (streaming/watermark_lanes.py)."""
    writer = RowWriter(plan.keyed_dests, plan.components, key_groups, plan.element_coders, plan.broadcast_dests)
    streams = tuple(_compile_test_stream(source, plan.components, writer) for source in plan.sources)
    impulse_rows = tuple(R.data(R.dest_text(dest), ENCODED_IMPULSE_VALUE, IMPULSE_SEQ) for dest in plan.impulse_dests)
    lanes = plan_lanes(
        plan.watermark_graph,
        {op.name: op.watermark_percentile for op in plan.operators if op.is_keyed},
        [s.name for s in plan.spark_sources],
    )
    rules = {s.name: WatermarkRule(s.out_of_orderness_us, s.idle_timeout_us) for s in plan.spark_sources}
    for lane_source, (name, percentile) in lanes.lane_sources.items():
        rules[lane_source] = dataclasses.replace(rules[name], percentile=percentile)
    return SourceScript(
        streams,
        impulse_rows,
        lanes.operator_graph,
        key_groups,
        # The source planner's CONTROL rows name side inputs as rows do.
        {
            op: {R.dest_text(dest): lanes.rename_inputs(inputs, op) for dest, inputs in sides.items()}
            for op, sides in plan.side_watermarks.items()
        },
        rules,
        lanes if lanes.hold_percentiles or lanes.lane_sources else None,
        plan.same_batch_stages,
        events_per_batch=1 if any(op.stage is not None and op.stage.finalizes for op in plan.operators) else None,
    )


def _compile_test_stream(source, components, writer):
    payload = beam_runner_api_pb2.TestStreamPayload.FromString(source.payload)
    if payload.endpoint.url:
        raise UnsupportedPipelineError(
            "%s: a TestStream reading events from a TestStreamService (%s) is not supported"
            % (source.display_name, payload.endpoint.url)
        )
    element_impl = context.coder_impl(components, payload.coder_id)
    outputs = {tag: (dest, coder_id) for tag, dest, coder_id in source.outputs}
    output_tag = functools.partial(_output_tag, outputs)
    events = []
    for seq, event in enumerate(payload.events):
        if event.HasField("element_event"):
            tag = output_tag(event.element_event.tag)
            rows = ()
            if tag in outputs:
                dest, coder_id = outputs[tag]
                impl = context.coder_impl(components, coder_id)
                stream = create_OutputStream()
                for element in event.element_event.elements:
                    wv = _windowed(element_impl.decode(element.encoded_element), element.timestamp)
                    if any(w != window.GlobalWindow() for w in wv.windows):
                        # The output's coder is the global window's: another
                        # window would be silently replaced.
                        raise UnsupportedPipelineError(
                            "%s: TestStream element %r is in window(s) %s; SparkRunner supports "
                            "TestStream elements in the global window only"
                            % (source.display_name, wv.value, list(wv.windows))
                        )
                    impl.encode_to_stream(wv, stream, True)
                rows = tuple(writer.rows(dest, stream.get(), seq))
            events.append((ELEMENTS, rows))
        elif event.HasField("watermark_event"):
            events.append(
                (
                    WATERMARK,
                    source_key(source.name, output_tag(event.watermark_event.tag)),
                    _millis_to_micros(event.watermark_event.new_watermark),
                )
            )
        else:
            events.append((PROCESSING_TIME, event.processing_time_event.advance_duration * 1000))
    keys = tuple(source_key(source.name, tag) for tag in outputs)
    return ScriptedStream(source.name, keys, tuple(events))


def _output_tag(outputs, tag):
    """The output an event's tag names. Beam Java leaves the tag empty in
    the events of a TestStream's one output, which the transform names
    otherwise (Beam Python writes "None" for its default output): such
    events are that output's, where it is the one output read. Other tags
    stay as they are (an output nobody reads has no dest: its events go
    nowhere)."""
    if not tag and tag not in outputs and len(outputs) == 1:
        return next(iter(outputs))
    return tag


def _windowed(value, timestamp_millis):
    if isinstance(value, WindowedValueHolder):
        # TestStream.add_elements([WindowedValue(...)]) keeps its own window.
        return value.windowed_value
    return windowed_value.WindowedValue(value, Timestamp(micros=timestamp_millis * 1000), (window.GlobalWindow(),))


def _millis_to_micros(ms):
    return max(MIN_MICROS, min(MAX_MICROS, ms * 1000))
