"""Spark UI names: Spark jobs and stages carry the Beam transform names.

Spark names a stage after the call site current when the stage's last RDD
was created in the JVM. PySpark computes that call site itself (the first
Python frame outside pyspark, which would be this runner's code) and creates
JVM RDDs lazily. There is no public API to name a stage, so this module, and
only this module, uses two PySpark internals: it marks PySpark's call-site
tracker busy (so PySpark does not overwrite ours) and forces JVM RDD
creation while our call site is set.
"""

import contextlib

from pyspark.traceback_utils import SCCallSiteSync


@contextlib.contextmanager
def spark_call_site(sc, name):
    """Within the block, RDDs created (and actions run) carry `name`."""
    sc._jsc.setCallSite(name)
    SCCallSiteSync._spark_stack_depth += 1
    try:
        yield
    finally:
        SCCallSiteSync._spark_stack_depth -= 1
        sc._jsc.setCallSite(None)


def name_rdd(rdd, name):
    """Names `rdd` in the UI; call inside `spark_call_site`."""
    rdd.setName(name)
    rdd._jrdd  # noqa: B018 -- create the JVM RDD now, under our call site
    return rdd
