"""A GroupByKey of one key whose values do not fit in a Python worker's
memory, run in its own process (the worker memory limit is a property of
the SparkSession): `python -m tests.integration.large_group_job VALUES
LIMIT MODE...` prints one JSON line per mode with what the group summed to,
or the error that ended the run.

Modes: `plain` and `harness` (the consuming stage on each execution path,
the group streamed from Spark's shuffle), `in_memory` (the group handed on
as one encoded element, as before streaming: the control that shows the
limit is tight enough); `plain_windowed` and `harness_windowed`: the same
values in one fixed window (grouped by key and window, each window's
values streamed)."""

import json
import sys
import tempfile

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import window

SHARDS = 8
WIDTH = 90  # characters per value


def values_of(shard, per_shard):
    base = shard * per_shard
    for i in range(per_shard):
        yield "hot", "%0*d" % (WIDTH, base + i)


def windowed_values_of(shard, per_shard):
    """The same values, all timestamped inside one minute."""
    for kv in values_of(shard, per_shard):
        yield window.TimestampedValue(kv, 30)


def count_and_sum(kv):
    key, values = kv
    n = total = 0
    for v in values:
        n += 1
        total += int(v)
    return json.dumps([key, n, total])


MODES = {
    "plain": [],
    "harness": ["--sdk_harness_only"],
    "in_memory": ["--grouped_values_in_memory_bytes=%d" % (1 << 40)],
    "plain_windowed": [],
    "harness_windowed": ["--sdk_harness_only"],
}


def run(values, limit, mode, out_dir):
    options = PipelineOptions(
        [
            "--runner=beam_spark_runner.SparkRunner",
            "--spark_master=local[2]",
            "--spark_conf=spark.executor.pyspark.memory=%s" % limit,
            # PySpark's grouping spills above this (its default is 512m).
            "--spark_conf=spark.python.worker.memory=64m",
            # One malloc arena: the limit is on address space, and each
            # thread's own arena reserves 64 MB of it whether used or not.
            "--spark_conf=spark.executorEnv.MALLOC_ARENA_MAX=1",
            "--progress_bar=off",
            # One producing element per SDK-harness bundle: the harness holds
            # a bundle's outputs until it ends (8 x 125,000 values at once
            # ran the producer, not the GroupByKey, out of memory).
            "--bundle_size_bytes=1",
        ]
        + MODES[mode]
    )
    path = "%s/%s.txt" % (out_dir, mode)
    windowed = mode.endswith("_windowed")
    with beam.Pipeline(options=options) as p:
        shards = p | beam.Create(range(SHARDS)) | beam.Reshuffle()
        if windowed:
            kvs = shards | beam.FlatMap(windowed_values_of, values // SHARDS) | beam.WindowInto(window.FixedWindows(60))
        else:
            kvs = shards | beam.FlatMap(values_of, values // SHARDS)
        _ = kvs | beam.GroupByKey() | beam.Map(count_and_sum) | beam.io.WriteToText(path, shard_name_template="")
    with open(path) as f:
        return json.loads(f.read())


def main(argv):
    values, limit, modes = int(argv[0]), argv[1], argv[2:]
    with tempfile.TemporaryDirectory() as out_dir:
        for mode in modes:
            try:
                key, n, total = run(values, limit, mode, out_dir)
                print(json.dumps({"mode": mode, "key": key, "count": n, "sum": total}), flush=True)
            except Exception as e:  # noqa: BLE001 -- the control run is meant to fail
                print(json.dumps({"mode": mode, "error": "%s: %s" % (type(e).__name__, str(e)[-2000:])}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
