"""Spark's own Kafka connector (spark-sql-kafka-0-10) for the installed
PySpark, from Maven Central by pinned version through the runner's jar
cache (beam_spark_runner/maven_jars.py), for `ReadFromSpark(format="kafka")`.

Maven Central serves the connector here for Spark 4.0, 4.1 and 4.2, not
4.3: `connector_version()` is None on a Spark without one, and a test that
needs it says so naming the Spark version (the compatibility tier runs it
on PySpark 4.2)."""

from beam_spark_runner import maven_jars, versions

# Spark minor version -> the connector release served for it.
CONNECTORS = {(4, 0): "4.0.0", (4, 1): "4.1.1", (4, 2): "4.2.0"}

# Dependencies the pyspark wheel already carries (its jars/ directory):
# a second copy on the class path would clash with Spark's own.
_IN_PYSPARK = (
    ("org.apache.hadoop", "hadoop-client-api"),
    ("org.apache.hadoop", "hadoop-client-runtime"),
    ("org.scala-lang", "scala-library"),
    ("org.scala-lang.modules", "scala-parallel-collections_2.13"),
    ("org.slf4j", "slf4j-api"),
    ("org.lz4", "lz4-java"),
    ("at.yawk.lz4", "lz4-java"),
    ("org.xerial.snappy", "snappy-java"),
    ("com.google.code.findbugs", "jsr305"),
    ("org.apache.spark", "spark-tags_2.13"),
)


def connector_version():
    """The connector release for the installed PySpark, or None."""
    return CONNECTORS.get(versions.pyspark_release()[:2])


def connector_jars():
    """The connector's jars and its dependencies not in the pyspark wheel
    (paths), resolved once into the jar cache."""
    version = connector_version()
    if version is None:
        raise maven_jars.MissingJars(
            "no spark-sql-kafka-0-10 for Spark %s is served by Maven Central here"
            % versions.installed_version(versions.PYSPARK)
        )
    artifact = maven_jars.MavenArtifact(
        "org.apache.spark", "spark-sql-kafka-0-10_2.13", version, exclusions=_IN_PYSPARK
    )
    return maven_jars.resolve(maven_jars.JarSet("spark-sql-kafka-%s" % version, (artifact,)))
