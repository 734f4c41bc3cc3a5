"""Runs: elements that share timestamp, windows and pane, kept as plain values.

Within a bundle, consecutive elements nearly always share their windowing
metadata (one source, one window). A run is `(template, values)`: a
WindowedValue holding the shared metadata (its own value unused) and the
list of element values. Stages built of simple callables then work on plain
value lists, as hand-written PySpark does, instead of one WindowedValue
object per element per step.

`RunCodec` reads and writes the same bytes as Beam's WindowedValueCoder: an
element is `header + value` where the header (timestamp, windows, pane)
does not depend on the value, so a run's header is encoded once and compared
byte-wise while decoding.
"""

from apache_beam.coders import coders
from apache_beam.coders.coder_impl import create_InputStream, create_OutputStream
from apache_beam.transforms import window
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

from beam_spark_runner.worker.grouped_values import GroupedValues, group_runs


# The metadata of a globally windowed element at the minimum timestamp (what
# reads and impulses produce).
GLOBAL_TEMPLATE = WindowedValue(None, MIN_TIMESTAMP, (window.GlobalWindow(),))


class DecodedBlock:
    """Runs handed from one step of a Spark task to the next as Python
    objects, where both ends run in the same worker and nothing else reads
    them (no encoding at all). Picklable, should Spark move it anyway."""

    __slots__ = ("runs",)

    def __init__(self, runs):
        self.runs = runs

    def __reduce__(self):
        return DecodedBlock, (self.runs,)


def windowed_values(runs):
    """The runs as a list of WindowedValues."""
    return [template.with_value(v) for template, values in runs for v in values]


def chunks(runs, size):
    """The runs cut into lists of runs holding at most `size` values each.
    `size` may be a callable, read before each chunk (the consumer may
    change its chunk size as it learns how much each value produces)."""
    next_size = size if callable(size) else (lambda: size)
    chunk, held, limit = [], 0, next_size()
    for template, values in runs:
        start = 0
        while start < len(values):
            take = min(limit - held, len(values) - start)
            part = values if (start == 0 and take == len(values)) else values[start : start + take]
            chunk.append((template, part))
            held += take
            start += take
            if held >= limit:
                yield chunk
                chunk, held, limit = [], 0, next_size()
    if chunk:
        yield chunk


def same_metadata(a, b):
    """Do two templates share timestamp, windows and pane?"""
    return a is b or (
        a.timestamp_micros == b.timestamp_micros and a.windows == b.windows and a.pane_info == b.pane_info
    )


def count(runs):
    return sum(len(values) for _, values in runs)


class RunCodec:
    """Blocks written with one (windowed) data-channel coder <-> runs."""

    def __init__(self, coder):
        self.coder = coder
        self._impl = coder.get_impl()
        # Exactly WindowedValueCoder: subclasses (ParamWindowedValueCoder)
        # encode differently; they take the element-by-element path.
        self._split = type(coder) is coders.WindowedValueCoder
        if self._split:
            value_impl = coder.wrapped_value_coder.get_impl()
            self._value_decode = value_impl.decode_from_stream
            self._value_encode = value_impl.encode_to_stream
            # The header with an empty bytes value encodes as header + b"\x00".
            self._header_with_empty = (
                coders.WindowedValueCoder(coders.BytesCoder(), coder.window_coder).get_impl().encode_nested
            )

    def _header(self, template):
        return self._header_with_empty(template.with_value(b""))[:-1]

    def decode(self, block):
        """The runs of a block of nested-encoded windowed values, or of a
        group streamed from the shuffle (grouped_values.py)."""
        if isinstance(block, GroupedValues):
            return group_runs(block, self.coder)
        stream = create_InputStream(block)
        decode = self._impl.decode_from_stream
        runs = []
        if not self._split:
            while stream.size() > 0:
                wv = decode(stream, True)
                runs.append((wv, [wv.value]))
            return runs
        value_decode = self._value_decode
        size_left, skip, startswith = stream.size, stream.read, block.startswith
        total = len(block)
        header, size, append = b"", 0, None
        remaining = size_left()
        while remaining:
            if size and startswith(header, total - remaining):
                skip(size)
                append(value_decode(stream, True))
            else:
                wv = decode(stream, True)
                values = [wv.value]
                runs.append((wv, values))
                append = values.append
                if size_left():  # the header only serves to compare what follows
                    header = self._header(wv)
                    size = len(header)
            remaining = size_left()
        return runs

    def encode(self, runs):
        """One block holding every element of `runs`."""
        stream = create_OutputStream()
        if not self._split:
            encode = self._impl.encode_to_stream
            for template, values in runs:
                for v in values:
                    encode(template.with_value(v), stream, True)
            return stream.get()
        value_encode, write = self._value_encode, stream.write
        for template, values in runs:
            header = self._header(template)
            for v in values:
                write(header)
                value_encode(v, stream, True)
        return stream.get()
