"""Executor-side code: runs fused Beam stages inside Spark's Python workers.

Nothing in this package imports pyspark: it takes bytes in and gives bytes
out, so it is unit-tested without a SparkSession and reused by the batch and
streaming executors alike.
"""
