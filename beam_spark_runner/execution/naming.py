"""Spark UI names: Spark jobs and stages carry the Beam transform names.

Spark names a stage after the call site recorded when its RDD is created in
the JVM. PySpark creates the JVM RDD lazily, so we set the call-site local
properties and force creation while they are set.
"""
import contextlib


@contextlib.contextmanager
def spark_call_site(sc, name):
    sc.setLocalProperty("callSite.short", name)
    sc.setLocalProperty("callSite.long", name)
    try:
        yield
    finally:
        sc.setLocalProperty("callSite.short", None)
        sc.setLocalProperty("callSite.long", None)
