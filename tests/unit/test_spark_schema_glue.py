"""What the runner sets when it reads a ReadFromSpark's schema at planning
(io/spark/schema_glue.py) is what Beam makes when the schema is known as
the pipeline is built: the same RowCoder, so stages read the rows alike."""

from apache_beam import coders
from apache_beam.runners import pipeline_context

from beam_spark_runner.io.spark.ddl import parse_ddl
from beam_spark_runner.io.spark.schema_glue import row_coder
from beam_spark_runner.worker import spark_rows


def test_the_row_coder_set_at_planning_is_the_one_beam_makes_for_the_row_type():
    schema = parse_ddl(
        "id bigint not null, name string, at timestamp, money decimal(10,2), tags array<string>, "
        "scores map<string, double>, inner struct<x: int not null, day: date>"
    )
    context = pipeline_context.PipelineContext()
    built = coders.registry.get_coder(spark_rows.row_type(schema)).to_runner_api(context)
    assert row_coder(schema) == built
    decoded = coders.Coder.from_runner_api(row_coder(schema), context)
    assert [f.name for f in decoded.schema.fields] == ["id", "name", "at", "money", "tags", "scores", "inner"]
