"""Database writes as a runner primitive: what
`beam_spark_runner.io.WriteToDatabase` expands to, and what the runner runs
for it (io/database/spark_glue.py: a batch stage, and the staging of a
streaming query's micro-batches, which execution/query_sinks.py calls).

`WRITE_DATABASE_URN`: a schema'd PCollection's rows committed into a
database table exactly once (io/database/sink_protocol.py); its output is
the table written. The payload is the pickled
`io/database/sink_protocol.DatabaseWriteConfig`, as for the runner's other
I/O primitives: a Python client of the job service sends it as its SDK
expands it; another runner refuses the unknown URN.
"""

from beam_spark_runner.io.database.sink_protocol import DatabaseWriteConfig
from beam_spark_runner.translation import runner_io
from beam_spark_runner.io.spark.planning import SparkWrite, decode_payload
from triggers.driver import RETRACTING

WRITE_DATABASE_URN = "beam_spark_runner:transform:write_database:v1"
DATABASE_IO_URNS = frozenset([WRITE_DATABASE_URN])

__all__ = ["WRITE_DATABASE_URN", "DATABASE_IO_URNS", "DatabaseWrite", "DatabaseWriteConfig", "decode_payload"]


class DatabaseWrite(SparkWrite):
    """The write primitive (its config a DatabaseWriteConfig); its output is
    the table written."""

    urn = WRITE_DATABASE_URN


def _check_write(name, transform, pipeline, streaming):
    """RETRACTING panes need key columns: without them a retraction has no
    row to delete."""
    config = decode_payload(transform.spec.payload)
    strategies = runner_io.input_windowing_strategies(transform, pipeline)
    if not config.key_columns and any(s.accumulation_mode == RETRACTING for s in strategies):
        return [
            "%s: its input has RETRACTING panes; give key_columns so a retraction deletes the row it "
            "retracts, or use DISCARDING or ACCUMULATING panes" % name
        ]
    return []


runner_io.register(
    runner_io.RunnerIO(
        WRITE_DATABASE_URN, runner_io.IORole.SINK, lambda payload: decode_payload(payload).label, check=_check_write
    )
)
