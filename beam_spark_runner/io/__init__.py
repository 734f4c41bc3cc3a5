"""Beam transforms that reach the user's data through this runner:
Spark's own data sources and writers (`ReadFromSpark`, `WriteToSpark`;
docs/io.md)."""

from beam_spark_runner.io.spark import ReadFromSpark, WriteToSpark

__all__ = ["ReadFromSpark", "WriteToSpark"]
