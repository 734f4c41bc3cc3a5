#!/bin/sh
# Rebuilds beam_spark_runner/jars/beam-spark-runner-xlang.jar from
# java/xlang/: the expansions the runner's own Java expansion services add
# to Beam's (java/xlang/beamsparkrunner/xlang: SqlTransform's URN). It is
# compiled against the Beam Java jars the runner pins
# (beam_spark_runner/cross_language/java_sdk.py), resolved into the jar cache
# by the Python given as $PYTHON (default: python3; Maven needed once).
# $OUT names another jar to write instead (a test compares it with the
# committed one). The jar is committed so that pip installs need no JDK.
set -eu
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
OUT=${OUT:-beam_spark_runner/jars/beam-spark-runner-xlang.jar}
CLASSPATH=$("$PYTHON" -c 'import os
from beam_spark_runner.cross_language.expansion_services import compile_classpath
print(os.pathsep.join(compile_classpath()))')
BUILD=$(mktemp -d)
trap 'rm -rf "$BUILD"' EXIT
javac --release 17 -Xlint:all,-path,-processing,-classfile -Werror -cp "$CLASSPATH" -d "$BUILD" \
  $(find java/xlang -name '*.java' | sort)
cp -r java/xlang/META-INF "$BUILD/"
# Fixed timestamps: the same sources give the same jar bytes.
find "$BUILD" -exec touch -d 2026-01-01T00:00:00Z {} +
(cd "$BUILD" && find META-INF beamsparkrunner -type f | sort | TZ=UTC zip -q -X -D xlang.jar -@)
mkdir -p "$(dirname "$OUT")"
cp "$BUILD/xlang.jar" "$OUT"
echo "built $OUT"
