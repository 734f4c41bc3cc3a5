"""Window-expiration callbacks (`@OnWindowExpiration`) of a stateful DoFn
in Beam's Java SDK.

A ParDo whose `on_window_expiration_timer_family_spec` names a timer
family asks the runner to deliver, for every key and window the DoFn saw,
one timer of that family once the input watermark passes the window's end
plus the allowed lateness (the SDK calls the DoFn's `@OnWindowExpiration`
method for it, then the window's state goes). The runner sets that timer
itself, as if the DoFn had set it when the key's element arrived: fire
time the window's expiry, output timestamp (and watermark hold) the
window's max timestamp, as Beam's runners-core invokes the callback. From
there it is a pending timer like the DoFn's own, in batch and in streaming
(kept with the key's state, a wake-up at its time), except that it fires
after the other timers due at the same time (`PendingTimers` takes such a
"last" family only when nothing else is due), so a window's own timers run
before the callback that ends it.

Plain Python: built from the stage's ProcessBundleDescriptor.
"""

import struct
from typing import NamedTuple, Optional

from apache_beam.coders.coder_impl import create_InputStream
from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_fn_api_pb2, beam_runner_api_pb2
from apache_beam.transforms import userstate
from apache_beam.utils import windowed_value
from apache_beam.utils.timestamp import MAX_TIMESTAMP, Timestamp

from beam_spark_runner.worker import context
from beam_spark_runner.worker.beam_internals import DATA_INPUT_URN
from beam_spark_runner.worker.grouped_values import GroupedValues

_INT32 = struct.Struct(">i")


class ExpirationFamily(NamedTuple):
    """The timer family of one ParDo's window-expiration callback."""

    transform_id: str
    family_id: str
    data_input_id: str  # the stage's data input whose elements reach the ParDo
    allowed_lateness_us: int


def expiration_family(descriptor: beam_fn_api_pb2.ProcessBundleDescriptor) -> Optional[ExpirationFamily]:
    """The stage's window-expiration family, if a ParDo of it has one."""
    for transform_id, transform in descriptor.transforms.items():
        if transform.spec.urn != common_urns.primitives.PAR_DO.urn:
            continue
        payload = beam_runner_api_pb2.ParDoPayload.FromString(transform.spec.payload)
        family = payload.on_window_expiration_timer_family_spec
        if not family:
            continue
        main_pcoll = next(pc for tag, pc in transform.inputs.items() if tag not in payload.side_inputs)
        strategy = descriptor.windowing_strategies[descriptor.pcollections[main_pcoll].windowing_strategy_id]
        return ExpirationFamily(
            transform_id, family, _data_input_of(descriptor, main_pcoll), strategy.allowed_lateness * 1000
        )
    return None


def _data_input_of(descriptor, pcoll):
    for tid, t in descriptor.transforms.items():
        if t.spec.urn == DATA_INPUT_URN and pcoll in t.outputs.values():
            return tid
    raise ValueError(
        "The window-expiration callback's ParDo reads PCollection %s, which no data input of the stage writes: "
        "the runner delivers its timers only to a stateful ParDo at the start of its stage" % pcoll
    )


class WindowExpirationTimers:
    """Makes the expiration timers of the keys and windows of a stage's
    input blocks. `input_coder_id`: the coder (in `components`, the plan's,
    serialized) the runner reads the family's data input with, which reads
    another SDK's value coders as bytes."""

    def __init__(self, family: ExpirationFamily, input_coder_id: str, components: bytes):
        self.family = family
        self.family_key = (family.transform_id, family.family_id)
        self._element_impl = context.coder_impl(components, input_coder_id)

    def timers_of(self, block):
        """The family's timers for every (key, window) of an input block
        (encoded elements, or a streamed group), unique per key and window."""
        if isinstance(block, GroupedValues):
            # The group's key and windows without its values: an empty group.
            block = block.header + block.key + _INT32.pack(0)
        pairs = set()
        stream = create_InputStream(block)
        while stream.size() > 0:
            wv = self._element_impl.decode_from_stream(stream, True)
            key = wv.value[0]
            pairs.update((key, window) for window in wv.windows)
        return [self.timer(key, window) for key, window in pairs]

    def timer(self, key, window):
        """The expiration timer of `key` in `window`."""
        end = window.max_timestamp()
        expiry = min(end.micros + self.family.allowed_lateness_us, MAX_TIMESTAMP.micros)
        return userstate.Timer(
            user_key=key,
            dynamic_timer_tag="",
            windows=(window,),
            clear_bit=False,
            fire_timestamp=Timestamp(micros=expiry),
            hold_timestamp=end,
            paneinfo=windowed_value.PANE_INFO_UNKNOWN,
        )
