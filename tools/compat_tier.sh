#!/usr/bin/env bash
# The compatibility tier: the runner on supported PySpark and Beam releases
# other than the default test environment's, each in a virtualenv of its own
# under .venv-tiers/ (the releases: tools/compat/<tier>.txt); the services
# must be up (tools/services.sh up). `tools/compat_tier.sh` runs every tier,
# `tools/compat_tier.sh pyspark-4.1` one.
#
# README's test command runs the tiers beside the main suite:
# `tools/compat_tier.sh start [TIER...]` returns at once, and in the background builds
# each tier's virtualenv (pip downloads: the main suite leaves the network
# and disk idle) and runs the tiers one after another, each in one pytest
# process (log: .venv-tiers/run.log); `tools/compat_tier.sh wait`, after
# the main suite, waits for them, prints their log and exits with their
# status. On 2 cores the main suite's last files run in one process, so the
# tiers mostly use a core it leaves idle. A virtualenv is built again only
# when its releases, setup.py or the supported ranges changed (and after a
# build that failed, whose error the log then shows); a tier's lock keeps
# two builds of it apart.
#
#   pyspark-4.0-beam-2.71  the lowest PySpark and Beam: the unit tests, batch
#                          pipelines, Spark I/O, the runner's jar (streaming is
#                          refused on PySpark 4.0: a unit test shows it)
#   pyspark-4.1            the lowest PySpark that streams: the shims' unit tests,
#                          streaming pipelines with state and timers, the
#                          exactly-once file sinks, a run resumed from its
#                          checkpoint (Spark's offset log before 4.2), Spark
#                          I/O in streaming, the Spark UI's Beam tab
#   pyspark-4.2            the shims' unit tests; Spark's own Kafka connector (from
#                          Maven Central) reading the real broker in streaming
#                          under driver kills
set -euo pipefail
SELF="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
cd "$(dirname "$0")/.."

# The unit tests of what differs between releases (the lowest tier runs
# every unit test).
SHIM_TESTS="tests/unit/test_versions.py tests/unit/test_private_apis.py tests/unit/test_spark_rows.py \
tests/unit/test_runner_session_conf.py tests/unit/test_rerun_determinism.py"

# Streaming with state and event-time timers across batches, and a run
# stopped and resumed from its checkpoint.
STREAMING_TESTS="tests/integration/test_streaming.py::test_stateful_dofn_state_and_event_time_timers_span_batches \
tests/integration/test_streaming.py::test_checkpoint_dir_resumes_a_stopped_run_without_losing_output"

# The exactly-once file sinks: windowed shards, WriteToFiles' records once,
# and a worker killed inside the sink's write.
FILE_SINK_TESTS="tests/integration/test_streaming_file_sinks.py::test_write_to_text_publishes_beam_windowed_shards \
tests/integration/test_streaming_file_sinks.py::test_write_to_files_publishes_each_record_once_with_file_results \
tests/integration/test_streaming_file_sinks.py::test_a_worker_killed_inside_the_sink_write_publishes_each_record_once"

# Spark I/O in streaming: a file source into a Parquet sink, and the rate source.
SPARK_IO_STREAMING_TESTS="tests/integration/test_spark_io_streaming.py::test_a_growing_json_directory_is_windowed_counted_and_written_as_parquet \
tests/integration/test_spark_io_streaming.py::test_the_rate_source_drives_a_windowed_count"

# The Spark UI's Beam tab, whose page frame differs before Spark 4.2.
BEAM_TAB_TESTS="tests/integration/test_streaming_progress.py::test_the_spark_ui_beam_tab_shows_each_steps_watermarks_percentile_and_late_records \
tests/integration/test_streaming_progress.py::test_the_beam_tab_renders_in_a_headless_browser"

declare -A TESTS=(
  [pyspark-4.0-beam-2.71]="tests/unit tests/integration/test_batch_runner.py tests/integration/test_spark_io.py tests/integration/test_local_file_system.py"
  [pyspark-4.1]="$SHIM_TESTS $STREAMING_TESTS $FILE_SINK_TESTS $SPARK_IO_STREAMING_TESTS $BEAM_TAB_TESTS"
  [pyspark-4.2]="$SHIM_TESTS tests/faults/test_spark_io_faults.py::test_a_driver_killed_while_kafka_messages_arrive_counts_each_once"
)
ORDER=(pyspark-4.0-beam-2.71 pyspark-4.1 pyspark-4.2)

check_tier() {
  if [[ -z "${TESTS[$1]:-}" ]]; then
    echo "compat_tier.sh: no tier named $1 (tiers: ${ORDER[*]})" >&2
    exit 2
  fi
}

# Builds the tier's virtualenv unless it holds the current releases; holds
# the tier's lock meanwhile.
prepare_tier() {
  local tier=$1 venv=.venv-tiers/$1 lock want
  mkdir -p .venv-tiers
  exec {lock}>".venv-tiers/$tier.lock"
  flock "$lock"
  want=$(cat "tools/compat/$tier.txt" setup.py beam_spark_runner/versions.py | sha256sum | cut -d' ' -f1)
  if [[ "$(cat "$venv/.tier-ready" 2>/dev/null)" != "$want" ]]; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q -e '.[test]' -c "tools/compat/$tier.txt"
    echo "$want" >"$venv/.tier-ready"
  fi
  exec {lock}>&-
}

# A tier's pytest processes: 2 when it runs alone, 1 beside the main suite.
WORKERS=${BEAM_SPARK_TIER_WORKERS:-2}

run_tier() {
  local tier=$1 started=$SECONDS
  check_tier "$tier"
  prepare_tier "$tier"
  local dist=(-n "$WORKERS" --dist loadfile)
  [[ "$WORKERS" == 1 ]] && dist=()
  # A tier starts few subprocess drivers: writing their class archive
  # (tests/driver_class_archive.py) would cost more than it saves.
  # shellcheck disable=SC2086  # the tier's test paths are words
  BEAM_SPARK_TEST_DRIVER_ARCHIVE=off ".venv-tiers/$tier/bin/python" -m pytest ${TESTS[$tier]} -q -p no:cacheprovider "${dist[@]}" --require-services
  echo "compat tier $tier passed in $((SECONDS - started)) s"
}

case "${1:-}" in
  start)
    mkdir -p .venv-tiers
    rm -f .venv-tiers/run.status
    : >.venv-tiers/run.log
    # `wait` waits for the status file, written when the run ended.
    BEAM_SPARK_TIER_WORKERS=1 nohup bash -c '"$0" "$@" >.venv-tiers/run.log 2>&1; echo $? >.venv-tiers/run.status' \
      "$SELF" "${@:2}" >/dev/null 2>&1 &
    exit 0
    ;;
  wait)
    if [[ ! -e .venv-tiers/run.log ]]; then
      echo "compat_tier.sh wait: no tier run was started (tools/compat_tier.sh start)" >&2
      exit 2
    fi
    until [[ -s .venv-tiers/run.status ]]; do sleep 2; done
    cat .venv-tiers/run.log
    status=$(cat .venv-tiers/run.status)
    [[ "$status" == 0 ]] || echo "compat tier run failed (exit status $status): .venv-tiers/run.log" >&2
    exit "$status"
    ;;
  prepare)
    for tier in "${ORDER[@]}"; do
      prepare_tier "$tier"
    done
    exit 0
    ;;
esac

for tier in "${@:-${ORDER[@]}}"; do
  run_tier "$tier"
done
