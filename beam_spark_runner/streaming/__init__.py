"""Streaming execution (issue #5). Engine-agnostic pieces first: nothing in
this package imports pyspark except modules named `spark_*`."""
