"""A sink's rows of a streaming micro-batch, as the query hands them over:
Arrow batches of (kind, payload) DATA and KEYED rows, decoded to values.
Shared by the database sink's staging, the Spark writers' staging and the
typing of `Any` fields (execution/untyped_writes.py)."""

from beam_spark_runner.streaming import rows as R
from beam_spark_runner.worker import grouping


def query_values(batch, impl):
    """The values of an Arrow batch of a sink's DATA and KEYED query rows
    (kind, payload), decoded with the element coder `impl`."""
    for kind, payload in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()):
        if kind == R.KEYED:
            # A keyed reader beside the sink: its elements, each with its key.
            payload = b"".join(element for _, element in R.keyed_entries(payload))
        yield from grouping.decode_values(payload, impl)
