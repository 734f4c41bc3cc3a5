"""The two halves of a runner-side GroupByKey, around a Spark shuffle.

`shuffle_records` turns blocks written by producers (windowed KV<K, V>) into
`(encoded key, encoded value)` records for Spark to partition by key;
`grouped_blocks` turns one partition of Spark's grouped records back into
blocks of windowed KV<K, Iterable<V>> for the consuming stage. Window and
trigger semantics come from `triggers.batch`; this module only moves bytes.

Three shapes of record, by the GroupByKey's windowing:

* default windowing (global window, default trigger): the key, and the
  value's encoding; a group is one element in the global window;
* one pane per window at its end (`triggers.batch.one_end_of_window_pane`:
  a non-merging WindowFn with the default trigger and the end-of-window
  timestamp combiner): the key followed by the window's encoding, and the
  value's, one record per window of an element; a group is one window of
  one key, its pane known without looking at its values;
* anything else: the key, and the whole windowed value's encoding; a key's
  values are decoded together and `triggers.batch.group_by_window` makes
  its panes.

In the first two shapes a group whose values encode to more than the
in-memory limit leaves as a `GroupedValues`, streamed to the consumer.

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
from beam_spark_runner.worker.record_counting import RecordCountingCombineFn, record_count
from triggers import RETRACTING
from triggers.batch import group_by_window, one_end_of_window_pane
from triggers.panes import BATCH_ON_TIME
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
        # Grouped by key and window (see the module's docstring); not for
        # RETRACTING, whose output coder wraps the values.
        self.by_window = (
            not self.trivial_windowing
            and one_end_of_window_pane(self.windowing)
            and self.windowing.accumulation_mode != RETRACTING
        )
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
        if self.by_window:
            self._window_impl = pre.window_coder.get_impl()
            self._header_impl = coders.WindowedValueCoder(coders.BytesCoder(), post.window_coder).get_impl()
            self._window_bytes = {}  # window -> its encoding (map side)
            self._headers = {}  # window encoding -> output header (reduce side)

    def shuffle_records(self, block):
        stream = create_InputStream(block)
        decode = self.pre_impl.decode_from_stream
        encode_key = self.key_impl.encode_nested
        if self.trivial_windowing:
            encode_value = self.value_impl.encode_nested
            while stream.size() > 0:
                key, value = decode(stream, True).value
                yield encode_key(key), encode_value(value)
        elif self.by_window:
            encode_value, window_bytes = self.value_impl.encode_nested, self._encoded_window
            while stream.size() > 0:
                wkv = decode(stream, True)
                key, value = wkv.value
                key_bytes, value_bytes = encode_key(key), encode_value(value)
                for w in wkv.windows:
                    yield key_bytes + window_bytes(w), value_bytes
        else:
            encode_wv = self.windowed_value_impl.encode_nested
            while stream.size() > 0:
                wkv = decode(stream, True)
                key, value = wkv.value
                yield encode_key(key), encode_wv(wkv.with_value(value))

    def grouped_blocks(self, grouped, inline_bytes=DEFAULT_INLINE_BYTES):
        """grouped: iterable of (shuffle key, re-iterable of encoded values).

        Yields blocks of grouped elements; with default windowing, or one
        pane per window at its end, a group whose encoded values exceed
        `inline_bytes` instead yields a `GroupedValues` that streams them to
        the consumer (grouped_values.py). Under other windowing one key's
        values are decoded together."""
        if self.trivial_windowing:
            header = self.global_header
            yield from _byte_groups(((header, key, values) for key, values in grouped), inline_bytes)
        elif self.by_window:
            yield from _byte_groups(
                (self._split_key(key) + (values,) for key, values in grouped),
                inline_bytes,
            )
        else:
            out = create_OutputStream()
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

    def _encoded_window(self, w):
        encoded = self._window_bytes.get(w)
        if encoded is None:
            if len(self._window_bytes) >= _WINDOWS_CACHED:
                self._window_bytes.clear()
            encoded = self._window_bytes[w] = self._window_impl.encode_nested(w)
        return encoded

    def _split_key(self, shuffle_key):
        """(output header, key encoding) of a key-and-window shuffle key: the
        window's one pane (triggers.batch.one_end_of_window_pane)."""
        stream = create_InputStream(shuffle_key)
        self.key_impl.decode_from_stream(stream, True)
        split = len(shuffle_key) - stream.size()
        window_bytes = shuffle_key[split:]
        header = self._headers.get(window_bytes)
        if header is None:
            if len(self._headers) >= _WINDOWS_CACHED:
                self._headers.clear()
            w = self._window_impl.decode_nested(window_bytes)
            pane = windowed_value.WindowedValue(b"", w.max_timestamp(), (w,), BATCH_ON_TIME)
            header = self._headers[window_bytes] = self._header_impl.encode_nested(pane)[:-1]
        return header, shuffle_key[:split]


# Windows whose encodings (or output headers) a codec keeps at once.
_WINDOWS_CACHED = 4096


def _byte_groups(groups, inline_bytes):
    """Blocks of grouped elements assembled from bytes: `groups` yields
    (output header, key encoding, re-iterable of value encodings). A group
    whose values encode to more than `inline_bytes` leaves as a
    `GroupedValues` instead (streamed to the consumer)."""
    out = create_OutputStream()
    pack = struct.Struct(">i").pack
    for header, key, values in groups:
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
        # Streaming wraps a Python CombineFn so that each accumulator says
        # how many records it holds (translation/record_counting.py).
        self.counts_records = isinstance(self._fn, RecordCountingCombineFn)

    def __call__(self, values):
        merged = self._fn.merge_accumulators([self._to_accumulator(v) for v in values])
        return [self._to_runner(merged)]

    def record_count(self, value) -> int:
        """How many records the accumulator `value` (as the runner holds it)
        holds; only where `counts_records`."""
        return record_count(self._to_accumulator(value))


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


def decode_values(block, coder_impl):
    """The values of a block's windowed elements, decoded, in order (where
    neither the encodings nor the windows are needed)."""
    stream = create_InputStream(block)
    decode, size = coder_impl.decode_from_stream, stream.size
    values = []
    append = values.append
    while size():
        append(decode(stream, True).value)
    return values


def decode_elements(block, coder_impl):
    """Yields (decoded element, its own encoding) for each element of a block
    (the encoding is the block's bytes the element was decoded from: nested
    encodings are self-delimiting)."""
    stream = create_InputStream(block)
    decode, size = coder_impl.decode_from_stream, stream.size
    total = len(block)
    start = 0
    while start < total:
        element = decode(stream, True)
        end = total - size()
        yield element, block[start:end]
        start = end
