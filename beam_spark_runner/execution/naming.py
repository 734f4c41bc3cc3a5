"""Spark UI names: Spark jobs and stages carry the Beam transform names.

Spark names a stage after the call site current when the stage's last RDD
was created in the JVM. There is no public API to name a stage: the call
site is set through PySpark's internals (execution/spark_internals.py), and
JVM RDDs are created while it is set.
"""

from beam_spark_runner.execution.spark_internals import call_site, create_java_rdd


def spark_call_site(sc, name):
    """Within the block, RDDs created (and actions run) carry `name`."""
    return call_site(sc, name)


def name_rdd(rdd, name):
    """Names `rdd` in the UI; call inside `spark_call_site`."""
    rdd.setName(name)
    create_java_rdd(rdd)  # under our call site
    return rdd
