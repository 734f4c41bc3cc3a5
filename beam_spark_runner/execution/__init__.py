"""Spark glue: turns an ExecutionPlan into Spark operations. The only
package besides `session` that imports pyspark."""
