"""`ReadFromSpark` and `WriteToSpark`, Spark's own data sources and
writers: the user's transforms (`transforms.py`), their primitives and
submission checks (`planning.py`), their Spark glue in batch
(`batch_glue.py`) and in a streaming query (`streaming_glue.py`: the
source's rows as query rows, the sink's staging by Spark's writer);
docs/io.md."""
