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
import typing
from typing import List, Optional, Tuple

from apache_beam import pvalue
from beam_spark_runner.worker.beam_internals import pickler
from apache_beam.transforms import core, ptransform, window

from beam_spark_runner.plans import Dest, SparkSource
from beam_spark_runner.translation import runner_io
from beam_spark_runner.worker import spark_rows

READ_SPARK_URN = "beam_spark_runner:transform:read_spark:v1"
WRITE_SPARK_URN = "beam_spark_runner:transform:write_spark:v1"
SPARK_IO_URNS = frozenset([READ_SPARK_URN, WRITE_SPARK_URN])
# Spark's file sources: they read with a given schema made nullable, and
# their stream needs one (the files' schema when none is given).
FILE_FORMATS = ("parquet", "orc", "json", "csv", "text", "avro")


@dataclasses.dataclass(frozen=True)
class SparkReadConfig:
    """What a ReadFromSpark reads; `schema` is the Spark StructType (JSON
    form) its rows have: known when the pipeline is built if the user gave
    it, else None until the runner plans, when Spark reads it from the
    source with the session the pipeline runs on (io/spark/schema_glue.py)."""

    format: Optional[str]
    path: Optional[str]
    table: Optional[str]
    options: Tuple[Tuple[str, str], ...]
    schema: Optional[dict]
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
    of the rows it writes (None when its input is a ReadFromSpark's whose
    schema the runner reads when it plans: then that one), `untyped` the fields whose type is
    spark_rows.UNTYPED there (Beam types them Any), which the write takes
    from the target or the data when it runs (execution/untyped_writes.py)."""

    format: Optional[str]
    path: Optional[str]
    table: Optional[str]
    mode: str
    options: Tuple[Tuple[str, str], ...]
    partition_by: Tuple[str, ...]
    schema: Optional[dict]
    label: str = "WriteToSpark"
    untyped: Tuple[str, ...] = ()

    def describe(self):
        return "table %s" % self.table if self.table else "%s at %s" % (self.format or "parquet", self.path)


def with_schema(config, schema: dict, given: Optional[bool] = None):
    """`config` (a read's or a write's) with its schema now known; for a
    read, `given` says whether its source reads with that schema."""
    if given is None:
        return dataclasses.replace(config, schema=schema)
    return dataclasses.replace(config, schema=schema, schema_given=given)


def column_problems(config: SparkReadConfig, schema: dict) -> List[str]:
    """What is wrong with the read's `timestamp_column` and
    `partition_columns` given the source's `schema`, each a message naming
    the transform: checked when the pipeline is built if the schema is known
    then, else when the runner plans."""
    types = {f["name"]: f["type"] for f in schema["fields"]}
    label = config.label
    missing = [c for c in config.partition_columns if c not in types]
    if missing:
        return [
            "%s: partition_columns names columns the source does not have: %s (it has %s)"
            % (label, ", ".join(missing), ", ".join(types))
        ]
    column, unit = config.timestamp_column, config.timestamp_unit
    if column is None:
        return []
    found = types.get(column)
    if found == "timestamp" and unit is not None:
        return [
            "%s: timestamp_unit=%r is for a numeric timestamp_column; %r is of Spark type timestamp "
            "(leave timestamp_unit out)" % (label, unit, column)
        ]
    if spark_rows.is_numeric(found) and unit is None:
        return [
            "%s: timestamp_column %r is numeric (%s): give timestamp_unit='s', 'ms' or 'us' to say what it "
            "counts since the epoch" % (label, column, found)
        ]
    if found != "timestamp" and not spark_rows.is_numeric(found):
        return [
            "%s: timestamp_column %r must be a column of Spark type timestamp, or numeric with a "
            "timestamp_unit; the source has %s" % (label, column, ", ".join("%s %s" % (n, t) for n, t in types.items()))
        ]
    return []


def partition_by_problems(label: str, partition_by, schema: dict) -> List[str]:
    """A WriteToSpark's `partition_by` columns its rows do not have."""
    missing = [c for c in partition_by if c not in {f["name"] for f in schema["fields"]}]
    if missing:
        return ["%s: partition_by names columns it does not have: %s" % (label, missing)]
    return []


def schema_read_when_planned(pcoll) -> Optional[str]:
    """The label of the ReadFromSpark that gives `pcoll` if its schema is
    read when the runner plans (no `schema` was given), else None."""
    producer = getattr(pcoll, "producer", None)
    transform = getattr(producer, "transform", None)
    if isinstance(transform, SparkRead) and transform.config.schema is None:
        return transform.config.label
    return None


def untyped_rows_hint(element_type) -> str:
    """What to add to a write's "no schema" refusal: rows typed Any may be a
    ReadFromSpark's whose schema is read only when the runner plans."""
    if element_type is typing.Any:
        return "; rows read by a ReadFromSpark without schema= are typed only when the runner plans: give it schema="
    return ""


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
