"""A long streaming run keeps a bounded checkpoint: Spark's offset and
commit logs, the runner's own records and the state store's files level
off at what the retention settings keep, instead of growing with every
micro-batch; and the driver's metrics stay one value per metric."""

import os
import time

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.runner import PipelineState
from apache_beam.transforms import userstate
from apache_beam.transforms.periodicsequence import PeriodicImpulse

from beam_spark_runner import SparkRunner

# Spark keeps this many batches' log entries by the runner's default.
RETAINED = 20
BATCHES = 80  # four times what Spark retains: growth would show


class _CountPerKey(beam.DoFn):
    COUNT = userstate.ReadModifyWriteStateSpec("count", beam.coders.VarIntCoder())

    def process(self, kv, count=beam.DoFn.StateParam(COUNT)):
        count.write((count.read() or 0) + 1)
        yield kv[0]


def _files(directory):
    return sorted(
        os.path.relpath(os.path.join(root, name), directory) for root, _, names in os.walk(directory) for name in names
    )


def _in(files, prefix):
    return [f for f in files if f.startswith(prefix)]


def _changelogs_per_partition(files):
    counts = {}
    for f in _in(files, "spark/state/"):
        if f.endswith(".changelog"):
            counts[os.path.dirname(f)] = counts.get(os.path.dirname(f), 0) + 1
    return counts


def _last_batch(result):
    records = result.streaming_progress()
    return records[-1].batch if records else -1


def test_a_run_of_many_micro_batches_keeps_a_bounded_checkpoint(tmp_path, spark_session):
    checkpoint = tmp_path / "checkpoint"
    p = beam.Pipeline(
        runner=SparkRunner(),
        options=PipelineOptions(["--streaming", "--trigger_interval=0 seconds", "--checkpoint_dir=%s" % checkpoint]),
    )
    start = time.time()
    _ = (
        p
        | PeriodicImpulse(start_timestamp=start, stop_timestamp=start + 3600, fire_interval=0.05)
        | beam.Map(lambda t: ("k%d" % (int(t * 20) % 4), 1))
        | beam.ParDo(_CountPerKey())
    )
    result = p.run()
    metric_sizes = []
    # Per state-store partition: the most changelog files seen, and whether
    # a later look found fewer (a maintenance pass deleted old ones).
    most, shrank = {}, {}
    try:
        deadline = time.time() + 900
        while _last_batch(result) < BATCHES or not (shrank and all(shrank.values())):
            assert result.state == PipelineState.RUNNING, result.state
            assert time.time() < deadline, "%d micro-batches in 900 s; changelogs shrank: %s" % (
                _last_batch(result),
                shrank,
            )
            time.sleep(0.5)
            metric_sizes.append(len(list(result.monitoring_infos())))
            for partition, count in _changelogs_per_partition(_files(checkpoint)).items():
                if count < most.get(partition, 0):
                    shrank[partition] = True
                shrank.setdefault(partition, False)
                most[partition] = max(most.get(partition, 0), count)
        files = _files(checkpoint)
        batches = _last_batch(result)
    finally:
        result.cancel()
    # Spark purges its logs as each batch commits: the retained entries, not one per batch.
    for log in ("spark/offsets/", "spark/commits/"):
        entries = [f for f in _in(files, log) if not f.endswith(".crc") and os.path.basename(f).isdigit()]
        assert len(entries) <= RETAINED + 2, (log, batches, len(entries))
    # The runner's own records: the last few batches'.
    assert len(_in(files, "beam/holds/")) <= 3, _in(files, "beam/holds/")
    assert len(_in(files, "beam/checkpoints/")) <= 4, _in(files, "beam/checkpoints/")
    # The state store's changelog files stop growing: in every partition a
    # maintenance pass deleted the ones past retention (the loop above ran
    # until each partition had fewer than it once had), however fast the
    # batches came; a store that kept one per batch forever never shrinks.
    assert most and all(shrank.values()), (batches, most, shrank)
    assert set(_changelogs_per_partition(files)) == set(most)
    # One value per metric on the driver, however many batches ran (a few
    # may first appear late, e.g. a counter of an event that had not happened).
    assert metric_sizes[-1] <= metric_sizes[len(metric_sizes) // 2] + 5, metric_sizes
