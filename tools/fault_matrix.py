#!/usr/bin/env python
"""Restart storms: the driver of tests/faults/killed_driver_pipeline.py is
SIGKILLed again and again, at seeded moments, each restart from a fresh
process in a new working directory with only the checkpoint URI; then a
last run finishes and the output is checked (every element once, counts
kept in state 1..n per key, and every line Beam's WriteToText and
fileio.WriteToFiles published once, nothing left staged). The CI subset
(tests/faults/) kills once.

    .venv/bin/python tools/fault_matrix.py --seeds 20 --kills 20
    .venv/bin/python tools/fault_matrix.py --seeds 3 --kills 5 --markdown /tmp/faults.md

Each seed draws its kill delays (0-2 s after the output last grew). The
last line is the headline: `fault_matrix exact=<n>/<seeds> PASS|MISS`.
"""

import argparse
import os
import random
import shutil
import sys
import tempfile

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

from tests.faults.driver_cycles import run_with_kills  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--kills", type=int, default=20, help="driver kills per seed before the last run")
    parser.add_argument("--ticks", type=int, default=None, help="elements (default: enough to outlast the kills)")
    parser.add_argument("--markdown", default=None, help="also write the table to this file")
    args = parser.parse_args(argv)
    # A cycle (start, first output, kill) takes ~20-60 s on a 2-core
    # machine (measured: 57 s a cycle while other runs shared it); ticks
    # come every 0.5 s: enough for every kill to find work.
    ticks = args.ticks or max(40, 120 * (args.kills + 1))
    rows = [
        "| seed | kills | files at each kill | final files | seconds | result |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    exact = 0
    for seed in range(args.seeds):
        rng = random.Random(seed)
        delays = [round(rng.uniform(0.0, 2.0), 2) for _ in range(args.kills)]
        workdir = tempfile.mkdtemp(prefix="fault-matrix-%d-" % seed)
        try:
            outcome = run_with_kills(workdir, delays, ticks=ticks)
            result = "exact" if outcome.exact else "; ".join(outcome.problems)
            exact += outcome.exact
            row = "| %d | %d | %s | %d/%d | %.0f | %s |" % (
                seed,
                len(outcome.files_at_kills),
                " ".join(map(str, outcome.files_at_kills)),
                outcome.final_files,
                ticks,
                outcome.seconds,
                result,
            )
        except RuntimeError as e:
            row = "| %d | %d | | | | run failed: %s |" % (seed, len(delays), str(e).splitlines()[0][:200])
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        rows.append(row)
        print(row, flush=True)
    table = "\n".join(rows)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table + "\n")
    print(table)
    print("fault_matrix exact=%d/%d %s" % (exact, args.seeds, "PASS" if exact == args.seeds else "MISS"))
    return 0 if exact == args.seeds else 1


if __name__ == "__main__":
    sys.exit(main())
