"""Beam's drain step for a splittable DoFn, applied by the runner.

When a pipeline drains, Beam truncates every restriction still to be
processed (the SDK harness's TruncateAndSizeRestriction, which Beam's
FnApiRunner plans only when a run starts in drain mode): the DoFn's
`RestrictionProvider.truncate(element, restriction)` returns the finite
part of the work to finish, or None when nothing more is to be done (the
default for an unbounded restriction; PeriodicImpulse always says None).
A streaming run starts draining mid-way, so the runner applies the same
call to the encoded element-and-restriction values it holds (residuals)
and receives (new input) while draining.
"""

from typing import Optional

from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_fn_api_pb2, beam_runner_api_pb2
from apache_beam.runners import pipeline_context

from beam_spark_runner.worker.beam_internals import restriction_provider_of

PROCESS_URN = common_urns.sdf_components.PROCESS_SIZED_ELEMENTS_AND_RESTRICTIONS.urn


class RestrictionTruncator:
    """Truncates the encoded input of a stage's splittable DoFn.

    Guarantees: `truncate` returns the element re-encoded with the
    provider's truncated restriction and its size (window, timestamp and
    pane kept), or None when the provider truncates it to nothing; values
    of the stage's other inputs (side inputs) are returned unchanged.
    """

    def __init__(self, descriptor: beam_fn_api_pb2.ProcessBundleDescriptor, input_ids, input_index_feeding):
        """`input_ids`: the stage's data input transforms, in input index
        order; `input_index_feeding(transform_id, input_id)`: the index of
        the one whose elements reach that transform input (the stage
        runner's)."""
        process_id, process = _process_transform(descriptor)
        payload = beam_runner_api_pb2.ParDoPayload.FromString(process.spec.payload)
        main_inputs = [
            name
            for name in process.inputs
            if name not in payload.side_inputs and name not in payload.timer_family_specs
        ]
        if len(main_inputs) != 1:
            raise ValueError(
                "splittable DoFn %s has %d main inputs, expected 1" % (process.unique_name, len(main_inputs))
            )
        self.main_index = input_index_feeding(process_id, main_inputs[0])
        self._provider = restriction_provider_of(payload.do_fn.payload)
        self._impl = _wire_coder_impl(descriptor, input_ids[self.main_index])
        self.transform_name = process.unique_name

    def truncate(self, index: int, encoded: bytes) -> Optional[bytes]:
        if index != self.main_index:
            return encoded
        wv = self._impl.decode_nested(encoded)
        (element, (restriction, estimator_state)), _ = wv.value
        truncated = self._provider.truncate(element, restriction)
        if truncated is None:
            return None
        size = self._provider.restriction_size(element, truncated)
        if size < 0:
            raise ValueError(
                "%s: restriction_size of a truncated restriction is %s; it must be >= 0" % (self.transform_name, size)
            )
        return self._impl.encode_nested(wv.with_value(((element, (truncated, estimator_state)), size)))

    def close(self):
        """Nothing to release (worker/java_truncation.py's holds a descriptor
        in its JVM)."""


def _process_transform(descriptor):
    found = [(tid, t) for tid, t in descriptor.transforms.items() if t.spec.urn == PROCESS_URN]
    if len(found) != 1:
        raise ValueError("expected one splittable DoFn in the stage, found %d" % len(found))
    return found[0]


def _wire_coder_impl(descriptor, data_input_id):
    """The coder the stage's data input `data_input_id` reads elements with
    (as the SDK harness decodes them)."""
    port = beam_fn_api_pb2.RemoteGrpcPort.FromString(descriptor.transforms[data_input_id].spec.payload)
    return pipeline_context.PipelineContext(descriptor).coders[port.coder_id].get_impl()
