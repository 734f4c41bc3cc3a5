"""`WriteToDatabase` and `ReadFromDatabase` (PostgreSQL, MariaDB / MySQL):
the user's transforms (`transforms.py`), the write primitive and its
submission check (`planning.py`), its Spark glue in batch and streaming
(`spark_glue.py`), the exactly-once protocol with its staging table and
marker rows (`sink_protocol.py`), SQL dialects (`sql_dialects.py`),
PostgreSQL COPY text blocks (`postgresql_copy.py`) and partitioned reads
(`reads.py`); docs/io.md."""
