"""The two halves of a runner-side GroupByKey, around a Spark shuffle.

`shuffle_records` turns blocks written by producers (windowed KV<K, V>) into
`(encoded key, encoded value)` records for Spark to partition by key;
`grouped_blocks` turns one partition of Spark's grouped records back into
blocks of windowed KV<K, Iterable<V>> for the consuming stage. Window and
trigger semantics come from `triggers.batch`; this module only moves bytes.

Keys are compared by their nested encoding: Beam requires deterministic key
coders for GroupByKey, so equal keys encode to equal bytes.
"""

import struct

from apache_beam.coders import coders
from apache_beam.coders.coder_impl import create_InputStream, create_OutputStream
from apache_beam.transforms import window
from apache_beam.utils import windowed_value

from beam_spark_runner.worker import context
from beam_spark_runner.worker.grouped_values import DEFAULT_INLINE_BYTES, GroupedValues
from triggers import RETRACTING
from triggers.batch import group_by_window
from triggers.closing import ClosingRules
from triggers.retraction_coder import grouped_pane_coder

BLOCK_BYTES = 1 << 20


class GroupCodec:
    """Encodings used on both sides of one GroupByKey's shuffle."""

    def __init__(self, components: bytes, group):
        ctx = context.components_context(components)
        pre = ctx.coders[group.input_coder_id]
        post = ctx.coders[group.output_coder_id]
        self.windowing = ctx.windowing_strategies[group.windowing_strategy_id]
        # Windowing objects do not carry these two proto fields.
        self.closing = ClosingRules.from_proto(ctx.windowing_strategies.get_proto_from_id(group.windowing_strategy_id))
        self.trivial_windowing = self.windowing.is_default()
        kv_coder = pre.wrapped_value_coder
        value_coder = kv_coder.value_coder()
        if self.windowing.accumulation_mode == RETRACTING:
            post = _retracting_output_coder(group, post, value_coder)
        self.pre_impl = pre.get_impl()
        self.post_impl = post.get_impl()
        self.key_impl = kv_coder.key_coder().get_impl()
        self.value_impl = value_coder.get_impl()
        self.windowed_value_impl = coders.WindowedValueCoder(value_coder, pre.window_coder).get_impl()
        if self.trivial_windowing:
            # Every output element has the same timestamp, window and pane:
            # encode that header once.
            header_coder = coders.WindowedValueCoder(coders.BytesCoder(), post.window_coder)
            encoded = header_coder.get_impl().encode_nested(_global_on_time(b""))
            self.global_header = encoded[:-1]  # drop the empty value's length byte

    def shuffle_records(self, block):
        stream = create_InputStream(block)
        decode = self.pre_impl.decode_from_stream
        encode_key = self.key_impl.encode_nested
        if self.trivial_windowing:
            encode_value = self.value_impl.encode_nested
            while stream.size() > 0:
                key, value = decode(stream, True).value
                yield encode_key(key), encode_value(value)
        else:
            encode_wv = self.windowed_value_impl.encode_nested
            while stream.size() > 0:
                wkv = decode(stream, True)
                key, value = wkv.value
                yield encode_key(key), encode_wv(wkv.with_value(value))

    def grouped_blocks(self, grouped, inline_bytes=DEFAULT_INLINE_BYTES):
        """grouped: iterable of (encoded key, re-iterable of encoded values).

        Yields blocks of grouped elements; with trivial windowing, a key
        whose encoded values exceed `inline_bytes` instead yields a
        `GroupedValues` that streams them to the consumer (grouped_values.py).
        Under other windowing one key's values are decoded together."""
        out = create_OutputStream()
        if self.trivial_windowing:
            header, pack = self.global_header, struct.Struct(">i").pack
            for key, values in grouped:
                head, size = [], 0
                for value in values:
                    head.append(value)
                    size += len(value)
                    if size > inline_bytes:
                        break
                if size > inline_bytes:
                    del head
                    if out.size():
                        yield out.get()
                        out = create_OutputStream()
                    yield GroupedValues(header, key, values, inline_bytes)
                    continue
                out.write(header + key + pack(len(head)) + b"".join(head))
                if out.size() >= BLOCK_BYTES:
                    yield out.get()
                    out = create_OutputStream()
        else:
            decode_key = self.key_impl.decode_nested
            decode_wv = self.windowed_value_impl.decode_nested
            encode = self.post_impl.encode_to_stream
            for key, values in grouped:
                wvs = [decode_wv(v) for v in values]
                for grouped_wv in group_by_window(self.windowing, decode_key(key), wvs, self.closing):
                    encode(grouped_wv, out, True)
                if out.size() >= BLOCK_BYTES:
                    yield out.get()
                    out = create_OutputStream()
        if out.size():
            yield out.get()


class AccumulatorMerger:
    """`compact` for the reduce driver of a GroupByKey around which a
    combiner was lifted (`GroupPlan.combine`): merges the accumulators a
    window has buffered into one with the CombineFn's `merge_accumulators`,
    as Beam's runners combine in their GroupAlsoByWindow. Without it an
    ACCUMULATING window with early firings keeps, and re-emits in every pane,
    one accumulator per producing task and micro-batch.

    The runner holds values as its "safe" coder decodes them (opaque bytes
    for a coder it does not know); an accumulator is recovered through the
    byte-identical SDK-side data channel coder, and the merged one goes back
    the same way."""

    def __init__(self, components: bytes, group):
        from apache_beam.portability.api import beam_runner_api_pb2
        from apache_beam.transforms import core

        ctx = context.components_context(components)
        runner_value = ctx.coders[group.input_coder_id].wrapped_value_coder.value_coder().get_impl()
        sdk_value = ctx.coders[group.combine.data_input_coder_id].wrapped_value_coder.value_coder().get_impl()
        self._to_runner = lambda acc: runner_value.decode_nested(sdk_value.encode_nested(acc))
        self._to_accumulator = lambda v: sdk_value.decode_nested(runner_value.encode_nested(v))
        spec = beam_runner_api_pb2.FunctionSpec.FromString(group.combine.combine_fn)
        self._fn = core.CombineFn.from_runner_api(spec, ctx)
        self._fn.setup()

    def __call__(self, values):
        merged = self._fn.merge_accumulators([self._to_accumulator(v) for v in values])
        return [self._to_runner(merged)]


def _retracting_output_coder(group, post, value_coder):
    """The output coder of a RETRACTING GroupByKey, whose panes may be
    `Retraction(values)`. `translation.retracting.rewrite_retracting` gave its
    output PCollection the coder KV<K, RetractionAware(Iterable<V'>)>, which
    the safe coder `post` shows as KV<K, bytes>; write exactly those bytes."""
    kv = post.wrapped_value_coder
    if not isinstance(kv.value_coder(), coders.BytesCoder):
        raise ValueError(
            "%s: the output coder %s of a RETRACTING GroupByKey cannot carry retractions: "
            "the pipeline was not rewritten by translation.retracting.rewrite_retracting" % (group.display_name, kv)
        )
    return coders.WindowedValueCoder(
        coders.TupleCoder([kv.key_coder(), grouped_pane_coder(value_coder)]), post.window_coder
    )


def _global_on_time(value):
    return windowed_value.WindowedValue(
        value,
        window.GlobalWindow().max_timestamp(),
        (window.GlobalWindow(),),
        windowed_value.PaneInfo(True, True, windowed_value.PaneInfoTiming.ON_TIME, 0, 0),
    )


def split_elements(block, coder_impl):
    """Splits a block into the encodings of its single elements."""
    for _, encoded in decode_elements(block, coder_impl):
        yield encoded


def decode_elements(block, coder_impl):
    """Yields (decoded element, its own encoding) for each element of a block."""
    stream = create_InputStream(block)
    decode, encode = coder_impl.decode_from_stream, coder_impl.encode_nested
    while stream.size() > 0:
        element = decode(stream, True)
        yield element, encode(element)
