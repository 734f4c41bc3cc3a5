"""Reading text files by byte ranges and writing through a Beam sink, as plain
functions (no Spark): the executor side of translation/native_io_overrides.py.

Text records follow Beam's `_TextSource` with default settings exactly:
records end at `\\n`, a `\\r` just before it belongs to the separator, a last
record without a newline is kept as is, and a record belongs to the byte
range in which it starts. Empty files have no records.
"""

import heapq
import os
import uuid

from apache_beam.coders import coders
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

READ_CHUNK_BYTES = 8 << 20
# Ranges are cut so every partition gets work, but none is smaller than this.
MIN_RANGE_BYTES = 1 << 20
UNBOUNDED = float("inf")


def _absolute(path):
    """A local path made absolute where it is matched (the driver): Spark's
    Python workers run in another working directory, so a relative pattern
    (`*.txt`) matched there found nothing."""
    return os.path.abspath(path) if FileSystems.get_scheme(path) is None else path


def plan_text_ranges(config, partitions):
    """[[(path, start, stop, compression)] per partition]: uncompressed files
    cut into ranges of about total/partitions bytes, compressed files whole,
    assigned largest first to the least loaded partition."""
    match = FileSystems.match([config.pattern])[0]
    ranges = []
    files = [(_absolute(m.path), m.size_in_bytes) for m in match.metadata_list if m.size_in_bytes > 0]
    total = sum(size for _, size in files)
    target = max(MIN_RANGE_BYTES, -(-total // max(1, partitions)))
    for path, size in sorted(files):
        compression = config.compression_type
        if compression == CompressionTypes.AUTO:
            compression = CompressionTypes.detect_compression_type(path)
        if compression != CompressionTypes.UNCOMPRESSED:
            ranges.append((size, (path, 0, UNBOUNDED, compression)))
            continue
        for start in range(0, size, target):
            stop = min(size, start + target)
            ranges.append((stop - start, (path, start, stop, compression)))
    load = [(0, p) for p in range(max(1, partitions))]
    assigned = [[] for _ in load]
    for size, text_range in sorted(ranges, key=lambda r: (-r[0], r[1][:2])):
        total_load, p = heapq.heappop(load)
        assigned[p].append(text_range)
        heapq.heappush(load, (total_load + size, p))
    return [a for a in assigned if a]


def read_text_ranges(config, ranges):
    """Yields the decoded records of each (path, start, stop, compression)."""
    utf8 = type(config.coder) is coders.StrUtf8Coder
    decode = config.coder.decode
    for path, start, stop, compression in ranges:
        for records in _record_runs(path, start, stop, compression, utf8):
            if utf8:
                yield from records
            else:
                for record in records:
                    yield decode(record)


def _record_runs(path, start, stop, compression, utf8):
    """Lists of records starting in [start, stop): str if `utf8` else bytes."""
    with FileSystems.open(path, compression_type=compression) as f:
        offset = 0  # file offset of buffer[0]
        buffer = b""
        if start > 0:
            # The record in progress at `start` belongs to the previous range:
            # skip to just after the first newline at or after start - 1.
            f.seek(start - 1)
            offset = start - 1
            while True:
                chunk = f.read(READ_CHUNK_BYTES)
                if not chunk:
                    return
                i = chunk.find(b"\n")
                if i >= 0:
                    offset += i + 1
                    buffer = chunk[i + 1 :]
                    break
                offset += len(chunk)
        while offset < stop:
            end = buffer.rfind(b"\n")
            if end < 0:
                chunk = f.read(READ_CHUNK_BYTES)
                if not chunk:
                    if buffer:  # a last record without a newline
                        yield [buffer.decode("utf-8") if utf8 else buffer]
                    return
                buffer += chunk
                continue
            # buffer[:end] holds whole records starting at `offset`; the next
            # record starts at offset + end + 1.
            complete, buffer = buffer[:end], buffer[end + 1 :]
            if offset + end + 1 >= stop:
                # Keep the records starting before `stop`: a record starts
                # after a newline, so cut at the first newline at or after
                # stop - 1.
                cut = complete.find(b"\n", stop - 1 - offset)
                yield _split_records(complete if cut < 0 else complete[:cut], utf8)
                return
            offset += end + 1
            yield _split_records(complete, utf8)


def _split_records(complete, utf8):
    """Records of newline-separated bytes (no trailing newline), with a
    `\\r` before each newline dropped; '\\n' never occurs inside a UTF-8
    multi-byte sequence, so decoding before splitting is exact."""
    if utf8:
        text = complete.decode("utf-8")
        records = text.split("\n")
        if "\r" in text:
            records = [r[:-1] if r.endswith("\r") else r for r in records]
        return records
    records = complete.split(b"\n")
    if b"\r" in complete:
        records = [r[:-1] if r.endswith(b"\r") else r for r in records]
    return records


def write_partition(sink, init_result, values):
    """Writes values through Beam's sink writers as `_WriteBundleDoFn` does
    for one bundle; returns the writers' results."""
    results = []
    writer = None
    for value in values:
        if writer is None:
            writer = sink.open_writer(init_result, str(uuid.uuid4()))
        writer.write(value)
        if writer.at_capacity():
            results.append(writer.close())
            writer = None
    if writer is not None:
        results.append(writer.close())
    return results


def finalize_write(sink, init_result, write_results):
    """Beam's bounded WriteImpl after the writers: pre-finalize, one empty
    shard if nothing was written (unless the sink skips empty output), then
    finalize; returns the final file names."""
    write_results = list(write_results)
    pre_finalize = sink.pre_finalize(init_result, write_results)
    if not write_results and not getattr(sink, "skip_if_empty", False):
        write_results.append(sink.open_writer(init_result, str(uuid.uuid4())).close())
    return list(sink.finalize_write(init_result, write_results, pre_finalize) or [])
