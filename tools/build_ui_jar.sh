#!/bin/sh
# Rebuilds beam_spark_runner/jars/beam-spark-runner-ui.jar from java/ (the
# JVM helper that shows Beam metrics in the Spark UI; see
# java/beamsparkrunner/ui/MetricsPublisher.java). Needs a JDK 17 and the
# pinned pyspark installed in the Python given as $PYTHON (default: python3).
# The jar is committed so that pip installs need no JDK.
set -eu
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
SPARK_JARS=$("$PYTHON" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
BUILD=$(mktemp -d)
trap 'rm -rf "$BUILD"' EXIT
javac --release 17 -Xlint:all,-path -Werror -cp "$SPARK_JARS/*" -d "$BUILD" java/beamsparkrunner/ui/*.java
# Fixed timestamps: the same sources give the same jar bytes.
find "$BUILD" -exec touch -d 2026-01-01T00:00:00Z {} +
(cd "$BUILD" && rm -f ui.jar && find beamsparkrunner -name '*.class' | sort | \
  TZ=UTC zip -q -X -D ui.jar -@)
mkdir -p beam_spark_runner/jars
cp "$BUILD/ui.jar" beam_spark_runner/jars/beam-spark-runner-ui.jar
echo "built beam_spark_runner/jars/beam-spark-runner-ui.jar"
