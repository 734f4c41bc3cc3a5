"""Kill-and-restart cycles of the driver of tests/faults/killed_driver_pipeline.py,
shared by the CI test (one kill) and `tools/fault_matrix.py` (seeded restart
storms).

Each cycle starts the pipeline in a fresh process, in its own process group
and a new working directory, with the checkpoint given as a `file://` URI;
waits until the output grew by at least one file (or the scheduled delay
passed); SIGKILLs the group (the driver and its Spark JVM). The last run
goes to the end. The check: every (key, seq) has its file, each key's
counts (taken from state) are 1..n exactly once, the files Beam's
`WriteToText` and `fileio.WriteToFiles` published hold every (key, seq)
once, with no staged file left, and the DoFn that requires stable input
saw one draw per (key, seq), however often it ran.
"""

import dataclasses
import glob
import os
import signal
import time
from typing import List, Tuple

from tests.faults import drivers, killed_driver_pipeline as pipeline
from tests.faults.injection import sequence_problems

SCRIPT = pipeline.__file__
STARTED_TIMEOUT_S = 900  # a hung run, not a slow one: for a run's first batch (the ticks' start, its first output)


@dataclasses.dataclass(frozen=True)
class Outcome:
    problems: Tuple[str, ...]
    files_at_kills: Tuple[int, ...]  # output files when each kill came
    final_files: int
    seconds: float

    @property
    def exact(self):
        return not self.problems


# A kill_delays entry: the run's DoFn that requires stable input kills its
# driver's process group itself, right after recording a draw, once
# SELF_KILL_AFTER_DRAWS are recorded: a kill inside the stage's micro-batch,
# after the DoFn ran and before the batch committed, whose replay shows
# whether the DoFn's input was stable.
SELF_KILL = "self"


def _start(out, checkpoint, start_file, ticks, cwd, flags=(), env=None):
    sinks = os.path.join(os.path.dirname(out), "sinks")
    argv = [SCRIPT, str(out), checkpoint, "auto:" + start_file, "+%s" % (ticks * pipeline.INTERVAL), sinks, *flags]
    return drivers.start(argv, cwd, env=env)


def _killed_by_itself(proc, marker, cycle):
    """Waits for a run started with SELF_KILL to kill itself."""
    try:
        proc.wait(timeout=STARTED_TIMEOUT_S)
    finally:
        drivers.kill(proc)
    if proc.returncode != -signal.SIGKILL or not os.path.exists(marker):
        raise RuntimeError(
            "run %d was to be killed by its stable-input DoFn (rc %s, marker %s): %s"
            % (cycle, proc.returncode, os.path.exists(marker), drivers.log_tail(proc))
        )


def _read_start(path, proc):
    deadline = time.time() + STARTED_TIMEOUT_S
    while not os.path.exists(path):
        if proc.poll() is not None or time.time() > deadline:
            raise RuntimeError("the first run picked no start (rc %s)" % proc.poll())
        time.sleep(0.1)
    with open(path) as f:
        return float(f.read())


def outputs(out):
    """(key, seq, count) of every output file."""
    found = []
    for name in os.listdir(out):
        if name.endswith(".txt"):
            key, seq = name[:-4].split("-")
            with open(os.path.join(out, name)) as f:
                found.append((key, int(seq), int(f.read())))
    return found


def problems_of(out, ticks):
    found = outputs(out)
    keys = ["k%d" % i for i in range(pipeline.KEYS)]
    problems = sequence_problems([(k, s) for k, s, _ in found], keys, ticks // pipeline.KEYS)
    per_key = {}
    for key, _, n in found:
        per_key.setdefault(key, []).append(n)
    for key, counts in sorted(per_key.items()):
        if sorted(counts) != list(range(1, len(counts) + 1)):
            problems.append("key %s: counts kept in state were doubled or lost: %s" % (key, sorted(counts)))
    sinks = os.path.join(os.path.dirname(out), "sinks")
    for sink in ("text", "files"):
        published = published_lines(os.path.join(sinks, sink))
        problems.extend("%s sink: %s" % (sink, p) for p in sequence_problems(published, keys, ticks // pipeline.KEYS))
    staged = glob.glob(os.path.join(sinks, "text", "beam-temp-*")) + glob.glob(
        os.path.join(sinks, "files", ".temp-beam-spark-*", "*")
    )
    if staged:
        problems.append("staged files left: %s" % staged)
    problems.extend(draw_problems(os.path.join(sinks, "draws"), keys, ticks // pipeline.KEYS))
    return problems


def draw_problems(directory, keys, per_key):
    """What is wrong with the draws the stable-input DoFn recorded: a tick
    missing, or recorded with two different draws (its input was not
    stable across a replay)."""
    draws = {}
    for name in os.listdir(directory) if os.path.isdir(directory) else []:
        if name.endswith(".txt"):
            key, seq, _ = name[:-4].split("-")
            with open(os.path.join(directory, name)) as f:
                draws.setdefault((key, int(seq)), set()).add(f.read())
    problems = [
        "stable input: tick %s-%d seen with different draws %s" % (k, s, sorted(d))
        for (k, s), d in sorted(draws.items())
        if len(d) > 1
    ]
    missing = [(k, s) for k in keys for s in range(per_key) if (k, s) not in draws]
    if missing:
        problems.append("stable input: ticks never processed: %s" % missing)
    return problems


def published_rows(directory):
    """(key, seq) of every row of the Parquet files WriteToSpark published in
    `directory` (its staging directory is not published output)."""
    import pyarrow.parquet as pq

    found = []
    for path in sorted(glob.glob(os.path.join(directory, "part-*"))):
        table = pq.read_table(path)
        found.extend(zip(table.column("key").to_pylist(), table.column("seq").to_pylist()))
    return found


def published_lines(directory):
    """(key, seq) of every line in the files a sink published in `directory`."""
    found = []
    for path in glob.glob(os.path.join(directory, "*")):
        if os.path.isfile(path):
            with open(path) as f:
                for line in f.read().splitlines():
                    key, seq = line.split(",")
                    found.append((key, int(seq)))
    return found


def run_with_kills(workdir, kill_delays: List[float], ticks=40, timeout_s=600, flags=()):
    """Runs the pipeline, killing its driver once per entry of
    `kill_delays` (seconds after the run's output last grew, or SELF_KILL),
    then lets a
    last run finish; a run that finishes before its kill ends the storm
    early (`files_at_kills` then has fewer entries). Raises if a run fails
    on its own. `flags`: further pipeline options of every run."""
    began = time.monotonic()
    out = os.path.join(workdir, "out")
    os.makedirs(out)
    checkpoint = "file://%s" % os.path.join(workdir, "checkpoint")
    # The first run's first batch picks the ticks' start.
    start_file = os.path.join(workdir, "start")
    start = None
    at_kills = []
    for cycle, delay in enumerate(kill_delays):
        cwd = os.path.join(workdir, "run%d" % cycle)
        before = len(os.listdir(out))
        marker = os.path.join(workdir, "self-kill-%d" % cycle)
        env = {pipeline.SELF_KILL_ENV: marker} if delay == SELF_KILL else None
        proc = _start(out, checkpoint, start_file, ticks, cwd, flags, env)
        if start is None:
            start = _read_start(start_file, proc)
        if delay == SELF_KILL:
            _killed_by_itself(proc, marker, cycle)
            at_kills.append(len(outputs(out)))
            continue
        deadline = time.time() + STARTED_TIMEOUT_S
        while len(os.listdir(out)) <= before and time.time() < deadline and proc.poll() is None:
            time.sleep(0.1)
        time.sleep(delay)
        if proc.poll() is not None:
            if proc.returncode != 0:
                raise RuntimeError("run %d failed (rc %s): %s" % (cycle, proc.returncode, drivers.log_tail(proc)))
            break  # the pipeline finished before this kill: the storm ends here
        drivers.kill(proc)
        at_kills.append(len(outputs(out)))
    else:
        cwd = os.path.join(workdir, "run-last")
        proc = _start(out, checkpoint, start_file, ticks, cwd, flags)
        if start is None:
            start = _read_start(start_file, proc)
        # The last run goes on until the ticks end, however long the storm took.
        ticks_left_s = max(0.0, start + ticks * pipeline.INTERVAL - time.time())
        try:
            proc.wait(timeout=timeout_s + ticks_left_s)
        finally:
            drivers.kill(proc)  # the Spark JVM of a driver that died or hung
        if proc.returncode != 0:
            raise RuntimeError("the last run failed (rc %s): %s" % (proc.returncode, drivers.log_tail(proc)))
    return Outcome(tuple(problems_of(out, ticks)), tuple(at_kills), len(outputs(out)), time.monotonic() - began)
