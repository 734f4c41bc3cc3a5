"""Idle costs nothing: a streaming run with no input and
nothing due runs no micro-batches, and uses a small share of one core
meanwhile (all its processes: the driver, the Spark JVM, its Python
workers, from /proc; benchmarks/idle.py's target is 5%); a
processing-time timer still fires on time.

benchmarks/idle.py runs in a fresh process (the suite's shared session
carries what a thousand tests left in its JVM: measured there, the same
run used 7.9%): one PeriodicImpulse tick sets a processing-time timer
IDLE_S seconds ahead, and nothing else happens until it fires. The window
starts SETTLE_S after the last batch (the JVM's JIT compilers are still
busy with the first batches' code: 2.9% of a core in the first 12 s, 1.8%
in the next ones, measured per thread; with another test running beside
it on a busy 2-core machine, a window starting 5 s after the last batch
measured 6.3%) and lasts until the timer is due. Before the
planner idled, the query ran empty batches back to back and used one to
two cores."""

import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
IDLE_S = 60
SETTLE_S = 15


def test_an_idle_run_uses_almost_no_cpu_and_a_processing_time_timer_fires_on_time():
    run = subprocess.run(
        [sys.executable, os.path.join(ROOT, "benchmarks", "idle.py"), "--soon=0", "--late=%d" % IDLE_S]
        + ["--trigger_interval=0 seconds", "--settle=%d" % SETTLE_S],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = run.stdout.strip().splitlines()
    assert run.returncode == 0 and lines, run.stdout[-2000:] + run.stderr[-3000:]
    print("\n".join(lines))
    measured = json.loads(next(line for line in lines if line.startswith("measured: "))[len("measured: ") :])
    assert measured["window_s"] >= 10, "the first batches took too long: %.1f s of idle measured" % measured["window_s"]
    assert measured["batches_in_window"] == 0, "micro-batches ran while nothing was due"
    # Idle: a small share of one core, where back-to-back empty batches use
    # one to two cores. The 5% target is the benchmark's headline, measured on
    # a quiet machine; beside the suite's other tests on a loaded 2-core
    # machine the same run measured 6.4%, so the verdict here leaves room.
    assert measured["cpu_share"] < 0.2, "an idle run used %.1f%% of one core" % (100 * measured["cpu_share"])
    # On time: at or after its time, within a batch's start-up of it.
    assert 0 <= measured["late_by_s"]["late"] < 5, measured
    # The batch the timer woke counts its duration from when it was planned,
    # not from the batch before the idle wait.
    assert measured["woken_batch_ms"] is not None and measured["woken_batch_ms"] < measured["window_s"] * 1000
    assert re.fullmatch(r"idle_cpu ratio=\S+ target<=0\.05 (PASS|MISS)", lines[-1]), lines[-1]
