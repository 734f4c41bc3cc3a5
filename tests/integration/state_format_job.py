"""The streaming pipeline of the state-format restore test
(tests/integration/test_state_format_restore.py).

PeriodicImpulse ticks every second from `START` (a fixed time: the
checkpoint under tests/data was written by a run that started just before
it and was stopped after about fifteen ticks, by the runner of commit 08edf3a,
whose keyed operators kept one pickled blob per key-group: state format 1).
Ticks go to three keys, through a GroupByKey in the global window that
fires an accumulating pane per element, and a stateful DoFn that counts
per key. Both write one file per output, named by what it saw, so a
re-run rewrites the same files; the final pane and final count of a key
cover all its ticks only if the state the first run left was restored.
A count's file holds the tick it counted: `count_K_N` holds key K's N-th
tick exactly when no count was lost or redone.

    python -m tests.integration.state_format_job CHECKPOINT OUT TICKS_BEFORE_STOP

runs the pipeline and cancels it once the stateful DoFn has counted
TICKS_BEFORE_STOP ticks (how the checkpoint was made).
"""

import os
import sys
import time

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import trigger, userstate, window

START = 1795714076
TICKS = 60
KEYS = 3


def ticks_of(key, ticks=TICKS):
    return [i for i in range(ticks) if i % KEYS == key]


class _Write(beam.DoFn):
    """One file per output: `name` -> content."""

    def __init__(self, directory):
        self.directory = directory

    def process(self, named):
        name, content = named
        path = os.path.join(self.directory, name)
        with open(path + ".tmp", "w") as f:
            f.write(content)
        os.replace(path + ".tmp", path)


class _Count(beam.DoFn):
    COUNT = userstate.ReadModifyWriteStateSpec("count", beam.coders.VarIntCoder())

    def process(self, kv, count=beam.DoFn.StateParam(COUNT)):
        n = (count.read() or 0) + 1
        count.write(n)
        yield "count_%d_%d" % (kv[0], n), str(kv[1])


def _index_from(start):
    """The tick's index. For START, exactly the lambda the checkpoint under
    tests/data was written with: Beam infers the PCollection's coder from
    it, and the restored state is encoded with that coder."""
    if start == START:
        return lambda t: int(t) - START
    return lambda t: int(t) - start


def tick_file(directory, index):
    """Makes tick `index` of a pipeline reading `directory` (`tick_dir`)."""
    path = os.path.join(directory, "tick-%03d" % index)
    with open(path + ".tmp", "w") as f:
        f.write(str(index))
    os.replace(path + ".tmp", path)


def _tick_of(metadata):
    return int(os.path.basename(metadata.path).split("-")[1])


def pipeline(checkpoint, out, runner=None, start=START, ticks=TICKS, extra_args=(), tick_dir=None):
    """`start`, `ticks`: the first tick's time and how many; `extra_args`:
    more pipeline options (e.g. --sdk_harness_only). With `tick_dir` the
    ticks are not the wall clock's but files `tick_file` makes there, matched
    as they appear: a test decides which ticks a run sees, whatever the
    machine's speed."""
    from apache_beam.io import fileio
    from apache_beam.transforms.periodicsequence import PeriodicImpulse

    from beam_spark_runner import SparkRunner

    p = beam.Pipeline(
        runner=runner or SparkRunner(),
        options=PipelineOptions(
            ["--streaming", "--checkpoint_dir=%s" % checkpoint, "--parallelism=2"] + list(extra_args)
        ),
    )
    if tick_dir is None:
        ticks = (
            p
            | PeriodicImpulse(start_timestamp=start, stop_timestamp=start + ticks, fire_interval=1)
            | "Index" >> beam.Map(_index_from(start))
        )
    else:
        ticks = (
            p
            | fileio.MatchContinuously(os.path.join(tick_dir, "tick-*[0-9]"), interval=0.5)
            | "Index" >> beam.Map(_tick_of)
        )
    keyed = ticks | "Key" >> beam.Map(lambda i: (i % KEYS, i))
    _ = (
        keyed
        | beam.WindowInto(
            window.GlobalWindows(),
            trigger=trigger.Repeatedly(trigger.AfterCount(1)),
            accumulation_mode=trigger.AccumulationMode.ACCUMULATING,
        )
        | beam.GroupByKey()
        | "Pane" >> beam.Map(lambda kv: ("pane_%d_%d" % (kv[0], len(kv[1])), ",".join(map(str, sorted(kv[1])))))
        | "WritePanes" >> beam.ParDo(_Write(out))
    )
    _ = keyed | beam.ParDo(_Count()) | "WriteCounts" >> beam.ParDo(_Write(out))
    return p


def main(checkpoint, out, stop_after):
    os.makedirs(out, exist_ok=True)
    run_until(pipeline(checkpoint, out), out, stop_after)


def run_until(p, out, stop_after):
    """Runs `p` and cancels it once `stop_after` counts were written."""
    result = p.run()
    deadline = time.time() + 300
    while time.time() < deadline:
        counts = [n for n in os.listdir(out) if n.startswith("count_")]
        if len(counts) >= stop_after:
            break
        time.sleep(0.2)
    time.sleep(3)  # a couple more batches commit what was written
    result.cancel()
    state = result.wait_until_finish()
    print(state, sorted(os.listdir(out)))
    return state


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
