"""File reads and writes that Spark performs itself instead of Beam's SDF and
WriteImpl expansions (batch, Python SDK pipelines only).

`ReadFromText` expands to a splittable DoFn whose per-line bookkeeping
(offset trackers, timestamp observation) costs ~3x Spark's own line reader,
and a bounded `WriteImpl` expands to seven Spark jobs (a side input per
phase). Both are replaced before translation by runner primitives with their
own URNs; `execution/batch_native_io.py` runs them with the same semantics:

- `READ_TEXT_URN`: the lines of every file the pattern matches, split on
  `\\n` with a preceding `\\r` dropped, decoded with the source's coder, in the
  global window at the minimum timestamp; uncompressed files are split into
  byte ranges (a line belongs to the range where it starts), compressed ones
  are read whole. Only `ReadFromText` with default record handling is
  replaced (no custom delimiter, escape character, header skipping, or
  kept newlines); anything else keeps Beam's expansion.
- `WRITE_FILES_URN`: Beam's `WriteImpl` protocol on the sink, unchanged:
  `initialize_write` on the driver, one writer per Spark partition (a new one
  when the writer is at capacity), `pre_finalize` and `finalize_write` on the
  driver, one empty shard when nothing was written unless the sink skips
  empty output; the output is the PCollection of final file names. Only
  bounded writes with a runner-chosen shard count (`num_shards=0`) are
  replaced.

The replacements are plain PTransform overrides (Beam's public
`PTransformOverride`), so the user's pipeline code does not change. Payloads
are pickled configs: these URNs never leave the runner process.
"""

import dataclasses
from typing import Any

import apache_beam as beam
from apache_beam import pvalue
from apache_beam.coders import coders
from beam_spark_runner.worker.beam_internals import pickler
from apache_beam.io import iobase, textio
from apache_beam.pipeline import PTransformOverride
from apache_beam.testing.test_stream import TestStream
from apache_beam.transforms import core, window

from beam_spark_runner.translation import runner_io
from beam_spark_runner.worker.beam_internals import MISSING, read_from_text_source, text_source_fields

READ_TEXT_URN = "beam_spark_runner:transform:read_text:v1"
WRITE_FILES_URN = "beam_spark_runner:transform:write_files:v1"
NATIVE_IO_URNS = frozenset([READ_TEXT_URN, WRITE_FILES_URN])
# Batch only: Beam's own expansions run in a streaming pipeline.
runner_io.register(runner_io.RunnerIO(READ_TEXT_URN, runner_io.IORole.SOURCE, streaming=False))
runner_io.register(runner_io.RunnerIO(WRITE_FILES_URN, runner_io.IORole.SINK, streaming=False))


@dataclasses.dataclass(frozen=True)
class TextReadConfig:
    """What a replaced ReadFromText reads."""

    pattern: str
    compression_type: str
    coder: Any


@dataclasses.dataclass(frozen=True)
class WriteFilesConfig:
    """A bounded WriteImpl's sink (any `iobase.Sink`)."""

    sink: Any


def encode_payload(config) -> bytes:
    return pickler.dumps(config)


def decode_payload(payload: bytes):
    return pickler.loads(payload)


class _NativeReadText(beam.PTransform):
    def __init__(self, config: TextReadConfig, element_type):
        super().__init__()
        self.config = config
        self._element_type = element_type

    def expand(self, pbegin):
        return pvalue.PCollection(pbegin.pipeline, element_type=self._element_type, is_bounded=True)

    def get_windowing(self, inputs):
        return core.Windowing(window.GlobalWindows())

    def to_runner_api_parameter(self, context):
        return READ_TEXT_URN, encode_payload(self.config)


class _NativeWriteFiles(beam.PTransform):
    def __init__(self, config: WriteFilesConfig):
        super().__init__()
        self.config = config

    def expand(self, pcoll):
        return pvalue.PCollection(pcoll.pipeline, element_type=str, is_bounded=True)

    def get_windowing(self, inputs):
        return core.Windowing(window.GlobalWindows())

    def to_runner_api_parameter(self, context):
        return WRITE_FILES_URN, encode_payload(self.config)


def text_read_config(transform):
    """The TextReadConfig of a ReadFromText Spark can read itself, else None.

    Beam exposes a ReadFromText's settings only through its private source
    object (read through worker/beam_internals.py)."""
    if type(transform) is not textio.ReadFromText:
        return None
    return text_source_config(read_from_text_source(transform))


def text_source_config(source):
    """The TextReadConfig of a `_TextSource` with default record handling,
    else None: any setting that is missing or not at its default keeps
    Beam's own expansion."""
    fields = text_source_fields(source)
    if fields is None:
        return None
    defaults = {
        "_delimiter": None,
        "_escapechar": None,
        "_skip_header_lines": 0,
        "_strip_trailing_newlines": True,
        "_header_matcher": None,
        "_header_processor": None,
    }
    if any(fields[name] is MISSING or fields[name] != value for name, value in defaults.items()):
        return None
    pattern, coder, compression = fields["_pattern"], fields["_coder"], fields["_compression_type"]
    if pattern is MISSING or not isinstance(coder, coders.Coder) or compression in (None, MISSING):
        return None
    try:
        pattern = pattern.get()
    except Exception:  # a RuntimeValueProvider not available: keep Beam's expansion
        return None
    return TextReadConfig(pattern, compression, coder)


class _ReadTextOverride(PTransformOverride):
    def matches(self, applied_ptransform):
        return text_read_config(applied_ptransform.transform) is not None

    def get_replacement_transform_for_applied_ptransform(self, applied_ptransform):
        transform = applied_ptransform.transform
        config = text_read_config(transform)
        element_type = read_from_text_source(transform).output_type_hint()
        return _NativeReadText(config, element_type)


class _WriteFilesOverride(PTransformOverride):
    def matches(self, applied_ptransform):
        transform = applied_ptransform.transform
        if type(transform) is not iobase.WriteImpl:
            return False
        if getattr(transform.sink, "num_shards", 0) != 0:
            return False  # Beam's fixed-shard expansion (round-robin keys + GBK)
        inputs = list(applied_ptransform.main_inputs.values())
        return len(inputs) == 1 and inputs[0].is_bounded

    def get_replacement_transform_for_applied_ptransform(self, applied_ptransform):
        return _NativeWriteFiles(WriteFilesConfig(applied_ptransform.transform.sink))


def apply_native_io(pipeline):
    """Replaces eligible reads and writes of a batch `beam.Pipeline` in place.

    Not for pipelines with a TestStream (they run on Structured Streaming)."""
    if _has_test_stream(pipeline):
        return
    pipeline.replace_all([_ReadTextOverride(), _WriteFilesOverride()])


def _has_test_stream(pipeline):
    found = []

    class _Visitor(beam.pipeline.PipelineVisitor):
        def visit_transform(self, applied):
            if isinstance(applied.transform, TestStream):
                found.append(applied)

    pipeline.visit(_Visitor())
    return bool(found)
