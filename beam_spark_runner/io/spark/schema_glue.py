"""The schemas of ReadFromSpark and WriteToSpark, completed with the session
a pipeline runs on, before the runner plans it (registered with
execution/runner_io_glue.py's `register_plan_resolution`).

A ReadFromSpark built without a `schema` leaves its rows untyped (Any) in
the pipeline: building a pipeline never needs Spark. Here Spark reads the
source's schema (a streaming file source's from the files there now, which
the stream then reads with), the read's columns are checked
(`timestamp_column`, `partition_columns`), and the read's output
PCollection gets the Beam RowCoder of that schema, so every stage after it
sees Beam rows of the source's columns. A read whose schema was given is
checked: Spark must read the source with exactly that schema. A
WriteToSpark of such a read's rows takes its schema.

Each problem is an UnsupportedPipelineError naming the transform, raised
before any Spark job runs.
"""

from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_runner_api_pb2

from beam_spark_runner.errors import UnsupportedPipelineError
from beam_spark_runner.execution import runner_io_glue
from beam_spark_runner.io.spark import planning
from beam_spark_runner.io.spark.planning import READ_SPARK_URN, WRITE_SPARK_URN, decode_payload, encode_payload
from beam_spark_runner.worker import spark_rows


def spark_reader(spark, config, streaming):
    """The DataFrame (or streaming DataFrame) of `config`'s source."""
    reader = spark.readStream if streaming else spark.read
    if config.format:
        reader = reader.format(config.format)
    if config.options:
        reader = reader.options(**dict(config.options))
    if config.schema_given and not config.table:
        from pyspark.sql.types import StructType

        reader = reader.schema(StructType.fromJson(config.schema))
    if config.table:
        return reader.table(config.table)
    return reader.load(config.path) if config.path is not None else reader.load()


def source_schema(spark, config, streaming=False):
    """The Spark schema (JSON form) `config`'s source has now; raises
    UnsupportedPipelineError, naming the transform and Spark's reason, when
    Spark cannot read it (a missing path or table, an unknown format, a
    format that cannot be read this way)."""
    try:
        frame = spark_reader(spark, config, streaming)
        return frame.schema.jsonValue()
    except Exception as e:  # noqa: BLE001 -- Spark's analysis errors come in several classes
        raise UnsupportedPipelineError(
            "%s (%s): Spark cannot read it %s: %s"
            % (config.label, config.describe(), "as a stream" if streaming else "in batch", first_line(e))
        ) from None


def first_line(error):
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]


def _simple(schema_json):
    from pyspark.sql.types import StructType

    return StructType.fromJson(schema_json).simpleString()


def row_coder(schema) -> beam_runner_api_pb2.Coder:
    """The Beam RowCoder (proto) of rows of the Spark schema `schema`: the
    one Beam makes for spark_rows.row_type(schema) when a pipeline is built."""
    return beam_runner_api_pb2.Coder(
        spec=beam_runner_api_pb2.FunctionSpec(
            urn=common_urns.coders.ROW.urn, payload=spark_rows.beam_schema(schema).SerializeToString()
        )
    )


def resolve_read(spark, transform_id, pipeline_proto):
    transform = pipeline_proto.components.transforms[transform_id]
    config = decode_payload(transform.spec.payload)
    if config.schema is not None:
        found = source_schema(spark, config, streaming=config.streaming)
        if found != config.schema:
            raise UnsupportedPipelineError(
                "%s (%s): Spark reads it with the schema %s, not the one given (%s): %s"
                % (
                    config.label,
                    config.describe(),
                    _simple(found),
                    _simple(config.schema),
                    "a table's schema is the table's; leave schema out"
                    if config.table
                    else "give the schema Spark reads (a directory's partition columns come last), or leave schema out",
                )
            )
        return
    if config.streaming and config.table is None and config.format in planning.FILE_FORMATS:
        # Spark's file stream needs a schema: the one the files have now.
        config = planning.with_schema(config, source_schema(spark, config), given=True)
    schema = source_schema(spark, config, streaming=config.streaming)
    try:
        spark_rows.row_type(schema)
    except spark_rows.UnmappableType as e:
        raise UnsupportedPipelineError("%s: %s" % (config.label, e)) from None
    problems = planning.column_problems(config, schema)
    if problems:
        raise UnsupportedPipelineError(problems[0])
    config = planning.with_schema(config, schema, given=config.schema_given)
    transform.spec.payload = encode_payload(config)
    (output,) = transform.outputs.values()
    coders = pipeline_proto.components.coders
    coder_id = "%s_rows" % transform_id
    while coder_id in coders:
        coder_id += "_"
    coders[coder_id].CopyFrom(row_coder(schema))
    pipeline_proto.components.pcollections[output].coder_id = coder_id


def resolve_write(spark, transform_id, pipeline_proto):
    transform = pipeline_proto.components.transforms[transform_id]
    config = decode_payload(transform.spec.payload)
    if config.schema is not None:
        return
    (input_id,) = transform.inputs.values()
    source = _producer(pipeline_proto, input_id)
    schema = decode_payload(source.spec.payload).schema if source is not None else None
    if schema is None:  # only a ReadFromSpark's rows are written before their schema is known
        raise UnsupportedPipelineError(
            "%s: its input's schema is not known (it is not a ReadFromSpark's output)" % config.label
        )
    problems = planning.partition_by_problems(config.label, config.partition_by, schema)
    if problems:
        raise UnsupportedPipelineError(problems[0])
    transform.spec.payload = encode_payload(planning.with_schema(config, schema))


def _producer(pipeline_proto, pcollection_id):
    """The ReadFromSpark primitive giving the PCollection, or None."""
    for transform in pipeline_proto.components.transforms.values():
        if transform.spec.urn == READ_SPARK_URN and pcollection_id in transform.outputs.values():
            return transform
    return None


runner_io_glue.register_plan_resolution(READ_SPARK_URN, resolve_read)
runner_io_glue.register_plan_resolution(WRITE_SPARK_URN, resolve_write)
