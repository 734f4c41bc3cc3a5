"""Spark's own data sources and writers as runner primitives: what
`beam_spark_runner.io.ReadFromSpark` and `WriteToSpark` expand to, and what
the runner runs for them (io/spark/batch_glue.py).

- `READ_SPARK_URN`: the rows of a Spark data source (`spark.read` with a
  format, options and a path, or a catalog table; `spark.readStream` in a
  streaming pipeline), each a Beam row of the source's schema
  (worker/spark_rows.py), in the global window, timestamped by
  `timestamp_column`, else at the minimum timestamp in batch and at the
  micro-batch's time in streaming, where the source's watermark follows
  its data (streaming/source_watermarks.py);
- `WRITE_SPARK_URN`: a schema'd PCollection's rows written with Spark's
  writer (`write.format(...).mode(...).options(...).partitionBy(...)`, to a
  path or with `saveAsTable`); its output is the one destination written.

The payloads are pickled configs (as the runner's other I/O primitives):
a Python client of the job service sends them as its SDK expands them.
"""

import dataclasses
from typing import Optional, Tuple

from apache_beam import pvalue
from beam_spark_runner.worker.beam_internals import pickler
from apache_beam.transforms import core, ptransform, window

from beam_spark_runner.plans import Dest, SparkSource
from beam_spark_runner.translation import runner_io

READ_SPARK_URN = "beam_spark_runner:transform:read_spark:v1"
WRITE_SPARK_URN = "beam_spark_runner:transform:write_spark:v1"
SPARK_IO_URNS = frozenset([READ_SPARK_URN, WRITE_SPARK_URN])


@dataclasses.dataclass(frozen=True)
class SparkReadConfig:
    """What a ReadFromSpark reads; `schema` is the Spark StructType (JSON
    form) its rows have, fixed when the pipeline was built."""

    format: Optional[str]
    path: Optional[str]
    table: Optional[str]
    options: Tuple[Tuple[str, str], ...]
    schema: dict
    timestamp_column: Optional[str] = None
    label: str = "ReadFromSpark"
    # The user gave the schema: the source reads with it (a JSON or CSV
    # source's rows take its types).
    schema_given: bool = False
    # Built for a streaming pipeline (spark.readStream), with its watermark
    # rule (micros) and the columns naming a row's source partition.
    streaming: bool = False
    out_of_orderness_us: int = 0
    idle_timeout_us: Optional[int] = None
    partition_columns: Tuple[str, ...] = ()
    # A numeric timestamp_column counts these ("s", "ms", "us") since the
    # epoch; None for a column of Spark type timestamp.
    timestamp_unit: Optional[str] = None

    def describe(self):
        return "table %s" % self.table if self.table else "%s at %s" % (self.format, self.path)


@dataclasses.dataclass(frozen=True)
class SparkWriteConfig:
    """Where a WriteToSpark writes; `schema` the Spark StructType (JSON form)
    of the rows it writes, `untyped` the fields whose type is
    spark_rows.UNTYPED there (Beam types them Any), which the write takes
    from the target or the data when it runs (execution/untyped_writes.py)."""

    format: Optional[str]
    path: Optional[str]
    table: Optional[str]
    mode: str
    options: Tuple[Tuple[str, str], ...]
    partition_by: Tuple[str, ...]
    schema: dict
    label: str = "WriteToSpark"
    untyped: Tuple[str, ...] = ()

    def describe(self):
        return "table %s" % self.table if self.table else "%s at %s" % (self.format or "parquet", self.path)


def encode_payload(config) -> bytes:
    return pickler.dumps(config)


def decode_payload(payload: bytes):
    return pickler.loads(payload)


class SparkRead(ptransform.PTransform):
    """The read primitive (its PCollection's rows have `element_type`)."""

    def __init__(self, config: SparkReadConfig, element_type, bounded=True):
        super().__init__()
        self.config = config
        self._element_type = element_type
        self._bounded = bounded

    def expand(self, pbegin):
        return pvalue.PCollection(pbegin.pipeline, element_type=self._element_type, is_bounded=self._bounded)

    def get_windowing(self, inputs):
        return core.Windowing(window.GlobalWindows())

    def to_runner_api_parameter(self, context):
        return READ_SPARK_URN, encode_payload(self.config)


class SparkWrite(runner_io.SinkPrimitive):
    """The write primitive; its output is the destination written. A
    subclass with another `urn` is another sink's primitive."""

    urn = WRITE_SPARK_URN

    def __init__(self, config):
        super().__init__(self.urn, encode_payload(config))
        self.config = config


def _label(payload):
    return decode_payload(payload).label


def _check_read(name, transform, pipeline, streaming):
    """A ReadFromSpark expanded for a batch pipeline reads with spark.read,
    one for a streaming pipeline with spark.readStream: the pipeline run
    must be the kind it was built for."""
    built_streaming = bool(getattr(decode_payload(transform.spec.payload), "streaming", False))
    if built_streaming != streaming:
        return [
            "%s: it was built for a %s pipeline and cannot run in a %s one: build the pipeline with the "
            "options it runs with (--streaming)"
            % (name, "streaming" if built_streaming else "batch", "streaming" if streaming else "batch")
        ]
    return []


def _streaming_source(plan):
    """A ReadFromSpark stage of a streaming pipeline: its rows enter the
    query at the destination its one output feeds."""
    config = decode_payload(plan.native.payload)
    (port,) = plan.outputs
    return SparkSource(
        plan.native.transform_id,
        config.label,
        plan.native.payload,
        Dest.written_to(port.buffer),
        port.coder_id,
        out_of_orderness_us=config.out_of_orderness_us,
        idle_timeout_us=config.idle_timeout_us,
        urn=plan.native.urn,
    )


runner_io.register(
    runner_io.RunnerIO(
        READ_SPARK_URN, runner_io.IORole.SOURCE, _label, check=_check_read, plan_streaming_source=_streaming_source
    )
)
runner_io.register(runner_io.RunnerIO(WRITE_SPARK_URN, runner_io.IORole.SINK, _label))
