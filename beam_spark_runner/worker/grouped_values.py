"""One key's grouped values, streamed from Spark's shuffle to the DoFn.

A batch GroupByKey groups with PySpark's `ExternalGroupBy` (the reduce side
of `RDD.groupByKey`, see execution/batch_execution.py), which spills a key's
values to disk while grouping (`spark.python.worker.memory`) and hands them
on as a re-iterable that reads them back. A group whose encoded values fit in
`inline_bytes` is handed on as one encoded element, decoded in one piece by
the consumer as before; a larger group leaves the shuffle as a
`GroupedValues` object in place of a block, and its values stay in Spark's
hands until the DoFn iterates them:

- a plain-Python stage hands the DoFn a `LazyValues`, which decodes one value
  at a time on each iteration;
- the SDK harness receives the element with Beam's state-backed iterable
  encoding (a first page inline, then a token), and reads the rest page by
  page through the state API (`ValuePages`, served by the harness's state
  servicer), as Beam's own runners serve large groups.

Guarantees: the consumer sees the same values, in the same order, as with the
in-memory encoding; no more than one page (`PAGE_BYTES`) of a streamed
group's encoded values is held by the runner at a time. A `GroupedValues`
that has to leave its task (pickled by Spark, e.g. when a consumer reads a
union of inputs) becomes the in-memory encoding, so it must then fit in
memory, as every group did before.
"""

import itertools
import struct

from apache_beam.coders.coder_impl import FastPrimitivesCoderImpl, create_InputStream, create_OutputStream

# Groups whose encoded values exceed this are streamed (the runner's default
# for --grouped_values_in_memory_bytes).
DEFAULT_INLINE_BYTES = 8 << 20
# Encoded bytes per page of a streamed group: what the SDK harness decodes
# per state read, and what a state-backed element carries inline.
PAGE_BYTES = 64 << 10

_INT32 = struct.Struct(">i")
_UNKNOWN_LENGTH = _INT32.pack(-1)


def _var_int(n):
    out = create_OutputStream()
    out.write_var_int64(n)
    return out.get()


_STATE_TOKEN_FOLLOWS = _var_int(-1)


class GroupedValues:
    """One key's group as it left the shuffle: `header` (the encoded
    timestamp, windows and pane of the grouped element), `key` (the key's
    nested encoding), `values` (a re-iterable of nested value encodings,
    PySpark's grouped values, possibly spilled to disk) and `inline_bytes`
    (the runner's in-memory limit for a group: no more than this, or one
    page, of the values is sent inline with a state token)."""

    __slots__ = ("header", "key", "values", "inline_bytes")

    def __init__(self, header: bytes, key: bytes, values, inline_bytes=PAGE_BYTES):
        self.header = header
        self.key = key
        self.values = values
        self.inline_bytes = inline_bytes

    def encoded(self) -> bytes:
        """The in-memory encoding (an Iterable<V> of known length): what
        consumers read when the group is not streamed."""
        values = list(self.values)
        return self.header + self.key + _INT32.pack(len(values)) + b"".join(values)

    def __reduce__(self):
        # Leaving the task (Spark pickles it): the in-memory encoding.
        return bytes, (self.encoded(),)

    def __repr__(self):
        return "GroupedValues(%d values)" % len(self.values)

    def with_state_token(self, serve) -> bytes:
        """The element in Beam's state-backed iterable encoding: an unknown
        length (-1), the first values inline (at least one, then up to a
        page or `inline_bytes`), then a state token for the rest, which
        `serve(ValuePages)` registers and returns."""
        head, size, limit = [], 0, min(PAGE_BYTES, self.inline_bytes)
        for value in self.values:
            head.append(value)
            size += len(value)
            if size >= limit:
                break
        token = serve(ValuePages(self.values, skip=len(head)))
        out = [self.header, self.key, _UNKNOWN_LENGTH]
        if head:
            out += [_var_int(len(head)), b"".join(head)]
        out += [_STATE_TOKEN_FOLLOWS, _var_int(len(token)), token]
        return b"".join(out)


class ValuePages:
    """The pages of a streamed group after its first `skip` values, for the
    harness's state servicer: `page(n)` is the concatenated encodings of the
    n-th page and whether more follow. Reading the pages in order reads the
    values once; asking for an earlier page (the DoFn iterates again) starts
    over from the first value."""

    _NOTHING = object()

    def __init__(self, values, skip=0):
        self._values = values
        self._skip = skip
        self._iterator = None
        self._next_page = 0
        # The first value of the next page, read to learn whether one follows.
        self._peeked = self._NOTHING

    def page(self, n):
        if self._iterator is None or n != self._next_page:
            self._iterator = itertools.islice(iter(self._values), self._skip, None)
            self._peeked = self._NOTHING
            self._next_page = 0
            for _ in range(n):
                self._read_page()
        return self._read_page()

    def _read_page(self):
        chunk, size = [], 0
        if self._peeked is not self._NOTHING:
            chunk.append(self._peeked)
            size = len(self._peeked)
        for value in self._iterator if size < PAGE_BYTES else ():
            chunk.append(value)
            size += len(value)
            if size >= PAGE_BYTES:
                break
        self._next_page += 1
        self._peeked = next(self._iterator, self._NOTHING) if size >= PAGE_BYTES else self._NOTHING
        return b"".join(chunk), self._peeked is not self._NOTHING


class LazyValues:
    """The values of a streamed group as a plain-Python DoFn sees them: an
    iterable that may be iterated more than once, decoding one value at a
    time from the shuffle's encodings (as Beam's state-backed iterables are
    iterables, not lists). `len()` is known without decoding."""

    __slots__ = ("_encodings", "_decode")

    def __init__(self, encodings, value_impl):
        self._encodings = encodings
        self._decode = value_impl.decode_nested

    def __iter__(self):
        decode = self._decode
        for encoded in self._encodings:
            yield decode(encoded)

    def __len__(self):
        return len(self._encodings)

    def __eq__(self, other):
        return list(self) == list(other)

    def __hash__(self):
        raise TypeError("unhashable type: 'LazyValues'")

    def __reduce__(self):
        return list, (list(self),)

    def __repr__(self):
        return "LazyValues(%d values)" % len(self)


# A DoFn may output the iterable itself: Beam's pickling coder then encodes
# it as an iterable, as it does Beam's own state-backed iterables.
FastPrimitivesCoderImpl.register_iterable_like_type(LazyValues)


def group_runs(grouped: GroupedValues, port_coder):
    """The runs (runs.py) of a plain-Python stage for one streamed group read
    through `port_coder` (the stage input's windowed KV<K, Iterable<V>>
    coder): one element whose value is (key, LazyValues)."""
    kv_coder = port_coder.wrapped_value_coder
    value_impl = kv_coder.value_coder().value_coder().get_impl()
    # The header, the key and an empty iterable decode as the element's
    # metadata and key.
    template = port_coder.get_impl().decode_from_stream(
        create_InputStream(grouped.header + grouped.key + _INT32.pack(0)), True
    )
    key = template.value[0]
    return [(template, [(key, LazyValues(grouped.values, value_impl))])]


def streams_groups(descriptor, transform_id) -> bool:
    """True if the data input `transform_id` of this ProcessBundleDescriptor
    reads windowed KV<K, Iterable<V>> with Beam's state-backed iterable (the
    planner gives GroupByKey outputs that coder: see
    translation/stage_plans.py), so the SDK harness can be sent a streamed
    group's state token."""
    from apache_beam.portability import common_urns
    from apache_beam.portability.api import beam_fn_api_pb2

    port = beam_fn_api_pb2.RemoteGrpcPort.FromString(descriptor.transforms[transform_id].spec.payload)
    coders = descriptor.coders
    path = (
        (common_urns.coders.WINDOWED_VALUE.urn, 0),
        (common_urns.coders.KV.urn, 1),
        (common_urns.coders.STATE_BACKED_ITERABLE.urn, None),
    )
    coder = coders.get(port.coder_id)
    for urn, component in path:
        if coder is None or coder.spec.urn != urn:
            return False
        if component is not None:
            coder = coders.get(coder.component_coder_ids[component])
    return True
