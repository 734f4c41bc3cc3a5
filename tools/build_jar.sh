#!/bin/sh
# Rebuilds beam_spark_runner/jars/beam-spark-runner.jar from java/: the JVM
# helpers of the runner (java/beamsparkrunner/ui: Beam metrics and
# watermarks in the Spark UI; java/beamsparkrunner/fs: the local file
# system without a process per permission change). Needs a JDK 17 and the
# pinned pyspark installed in the Python given as $PYTHON (default: python3);
# $OUT names another jar to write instead (a test compares it with the
# committed one). The jar is committed so that pip installs need no JDK.
set -eu
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
OUT=${OUT:-beam_spark_runner/jars/beam-spark-runner.jar}
SPARK_JARS=$("$PYTHON" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
BUILD=$(mktemp -d)
trap 'rm -rf "$BUILD"' EXIT
javac --release 17 -Xlint:all,-path -Werror -cp "$SPARK_JARS/*" -d "$BUILD" $(find java/beamsparkrunner -name '*.java' | sort)
# Fixed timestamps: the same sources give the same jar bytes.
find "$BUILD" -exec touch -d 2026-01-01T00:00:00Z {} +
(cd "$BUILD" && rm -f runner.jar && find beamsparkrunner -name '*.class' | sort | \
  TZ=UTC zip -q -X -D runner.jar -@)
mkdir -p "$(dirname "$OUT")"
cp "$BUILD/runner.jar" "$OUT"
echo "built $OUT"
