"""Database writes as a runner primitive: what
`beam_spark_runner.io.WriteToDatabase` expands to, and what the runner runs
for it (execution/batch_database_io.py in batch; the query's foreachBatch
end, execution/streaming_spark_io.py, in streaming).

`WRITE_DATABASE_URN`: a schema'd PCollection's rows committed into a
database table exactly once (connectors/database_sink.py); its output is
the table written. The payload is the pickled
`connectors.database_sink.DatabaseWriteConfig`, as for the runner's other
I/O primitives: a Python client of the job service sends it as its SDK
expands it; another runner refuses the unknown URN.
"""

from beam_spark_runner.connectors.database_sink import DatabaseWriteConfig
from beam_spark_runner.translation.spark_io import SparkWrite, decode_payload

WRITE_DATABASE_URN = "beam_spark_runner:transform:write_database:v1"
DATABASE_IO_URNS = frozenset([WRITE_DATABASE_URN])

__all__ = ["WRITE_DATABASE_URN", "DATABASE_IO_URNS", "DatabaseWrite", "DatabaseWriteConfig", "decode_payload"]


class DatabaseWrite(SparkWrite):
    """The write primitive (its config a DatabaseWriteConfig); its output is
    the table written."""

    urn = WRITE_DATABASE_URN
