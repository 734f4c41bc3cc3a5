"""The external systems the runner reads and writes, without Spark: their
clients, type mappings and exactly-once protocols (SQL databases:
`sql_dialects.py`, `database_sink.py`, `database_reads.py`). The user's
transforms are in `beam_spark_runner.io`; the Spark glue that runs them in
`beam_spark_runner.execution`."""
