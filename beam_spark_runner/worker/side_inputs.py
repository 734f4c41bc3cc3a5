"""Side inputs: a materialized PCollection turned into Fn API state entries.

Built on the driver from the collected PCollection and broadcast; each
executor loads the entries into its harness's state, where the SDK reads
them through the Fn API state protocol (iterable and multimap access).
"""

import collections
import struct

from apache_beam.coders import coders
from apache_beam.coders.coder_impl import create_InputStream, create_OutputStream
from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_fn_api_pb2

from beam_spark_runner.worker import context

ITERABLE = common_urns.side_inputs.ITERABLE.urn
MULTIMAP = common_urns.side_inputs.MULTIMAP.urn


class UnsupportedSideInput(ValueError):
    pass


def latest_window_end_us(side_input, block, components: bytes):
    """The latest max timestamp (micros) over the windows of the elements
    encoded in `block` (windowed values, nested): when the block's data
    can stop mattering."""
    impl = context.components_context(components).coders[side_input.coder_id].get_impl()
    stream = create_InputStream(block)
    latest = None
    while stream.size() > 0:
        for w in impl.decode_from_stream(stream, True).windows:
            end = w.max_timestamp().micros
            latest = end if latest is None else max(latest, end)
    return latest


def state_entries(side_input, blocks, components: bytes):
    """Returns [(serialized StateKey, encoded data)] for one side input."""
    windowed_coder = context.components_context(components).coders[side_input.coder_id]
    element_impl = windowed_coder.get_impl()
    window_coder = windowed_coder.window_coder
    if side_input.access_pattern == ITERABLE:
        key_coder, value_coder = coders.SingletonCoder(""), windowed_coder.wrapped_value_coder
        split = lambda v: ("", v)
    elif side_input.access_pattern == MULTIMAP:
        kv = windowed_coder.wrapped_value_coder
        key_coder, value_coder = kv.key_coder(), kv.value_coder()
        split = lambda v: v
    else:
        raise UnsupportedSideInput(
            "Side input %r of %r uses access pattern %s, which the Spark runner does not support"
            % (side_input.tag, side_input.transform_id, side_input.access_pattern)
        )

    by_key_window = collections.defaultdict(list)
    for block in blocks:
        stream = create_InputStream(block)
        while stream.size() > 0:
            wv = element_impl.decode_from_stream(stream, True)
            key, value = split(wv.value)
            for w in wv.windows:
                by_key_window[key, w].append(value)

    key_impl, value_impl = key_coder.get_impl(), value_coder.get_impl()
    entries = []
    for (key, w), values in by_key_window.items():
        encoded_window = window_coder.encode(w)
        out = create_OutputStream()
        for value in values:
            value_impl.encode_to_stream(value, out, True)
        data = out.get()
        tid, tag = side_input.transform_id, side_input.tag
        if side_input.access_pattern == ITERABLE:
            entries.append(
                (
                    _key(
                        iterable_side_input=beam_fn_api_pb2.StateKey.IterableSideInput(
                            transform_id=tid, side_input_id=tag, window=encoded_window
                        )
                    ),
                    data,
                )
            )
            continue
        encoded_key = key_impl.encode_nested(key)
        entries.append(
            (
                _key(
                    multimap_side_input=beam_fn_api_pb2.StateKey.MultimapSideInput(
                        transform_id=tid, side_input_id=tag, window=encoded_window, key=encoded_key
                    )
                ),
                data,
            )
        )
        entries.append(
            (
                _key(
                    multimap_keys_side_input=beam_fn_api_pb2.StateKey.MultimapKeysSideInput(
                        transform_id=tid, side_input_id=tag, window=encoded_window
                    )
                ),
                encoded_key,
            )
        )
        entries.append(
            (
                _key(
                    multimap_keys_values_side_input=beam_fn_api_pb2.StateKey.MultimapKeysValuesSideInput(
                        transform_id=tid, side_input_id=tag, window=encoded_window
                    )
                ),
                encoded_key + struct.pack(">i", len(values)) + data,
            )
        )
    return entries


def _key(**kwargs):
    return beam_fn_api_pb2.StateKey(**kwargs).SerializeToString()
