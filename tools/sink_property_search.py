#!/usr/bin/env python
"""Searches the file sinks' differential property over many seeds: each seed
is a generated case (tests/conformance/sink_cases.py: a random stream, WindowFn,
trigger, accumulation mode, lateness and sink) run on SparkRunner, whose
produced panes must equal the pure driver's and whose published records must
equal what it produced. The CI share (tests/conformance/
test_file_sink_properties.py) runs a fixed few seeds.

    .venv/bin/python tools/sink_property_search.py --seeds 200
    .venv/bin/python tools/sink_property_search.py --first 1000 --seeds 50 --mode batch --sink avro
    .venv/bin/python tools/sink_property_search.py --only 17 --mode streaming

Every failing seed is printed with its case and the differences; the last
line is the headline `sink_property_search passed=<n>/<cases> PASS|MISS`.
"""

import argparse
import os
import shutil
import sys
import tempfile
import time
import traceback

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

from tests.conformance import sink_cases  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=100, help="how many seeds, from --first")
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--only", type=int, action="append", default=[], help="run just this seed (repeatable)")
    parser.add_argument("--mode", choices=("streaming", "batch", "both"), default="both")
    parser.add_argument("--sink", choices=sink_cases.SINKS, default=None, help="force every case's sink")
    args = parser.parse_args(argv)
    seeds = args.only or range(args.first, args.first + args.seeds)
    modes = ("streaming", "batch") if args.mode == "both" else (args.mode,)
    passed = failed = 0
    for seed in seeds:
        case = sink_cases.generate(seed, args.sink)
        for mode in modes:
            directory = tempfile.mkdtemp(prefix="sink-case-%d-" % seed)
            started = time.monotonic()
            try:
                sink_cases.check(case, directory, streaming=mode == "streaming")
            except AssertionError as e:
                failed += 1
                print("FAIL %s seed %d (%.1f s)\n%s" % (mode, seed, time.monotonic() - started, e), flush=True)
                continue
            except Exception:
                failed += 1
                print(
                    "ERROR %s seed %d: %s\n%s" % (mode, seed, case.describe(), traceback.format_exc(limit=-3)),
                    flush=True,
                )
                continue
            finally:
                shutil.rmtree(directory, ignore_errors=True)
            passed += 1
            print("ok %s seed %d %s (%.1f s)" % (mode, seed, case.sink, time.monotonic() - started), flush=True)
    total = passed + failed
    print("sink_property_search passed=%d/%d %s" % (passed, total, "PASS" if failed == 0 else "MISS"))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
