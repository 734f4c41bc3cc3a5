"""Faults injected into user code, each at most once per marker file (the
marker survives the crashed worker, so the retried task goes through), and
the check that a pipeline's output holds every (key, sequence number)
exactly once, naming the key and the gap or duplicate when it does not."""

import collections
import os

from apache_beam.testing.util import BeamAssertException

CRASH, RAISE = "crash", "raise"


def inject_once(marker, how):
    """Kills the Python worker (CRASH: `os._exit`, mid-bundle) or raises
    (RAISE: a transient user-code error) the first time it is called for
    `marker`; does nothing afterwards."""
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    os.close(fd)
    if how == CRASH:
        os._exit(17)
    raise RuntimeError("injected transient failure (%s)" % marker)


def fired(marker):
    return os.path.exists(marker)


def sequence_problems(pairs, keys, count):
    """What is wrong with `pairs` ((key, seq) ...) against every key in
    `keys` holding 0..count-1 once: one line per key with a gap or a
    duplicate, [] when exact."""
    seen = collections.defaultdict(collections.Counter)
    for key, seq in pairs:
        seen[key][seq] += 1
    problems = []
    for key in sorted(set(keys) | set(seen)):
        counts = seen.get(key, collections.Counter())
        missing = [s for s in range(count) if counts[s] == 0] if key in keys else []
        doubled = sorted(s for s, n in counts.items() if n > 1)
        foreign = sorted(s for s in counts if not 0 <= s < count) if key in keys else sorted(counts)
        if missing:
            problems.append("key %r lost sequence numbers %s" % (key, missing))
        if doubled:
            problems.append("key %r has duplicates of %s" % (key, doubled))
        if foreign:
            problems.append("key %r has unexpected sequence numbers %s" % (key, foreign))
    return problems


def exactly_once(keys, count):
    """An `assert_that` matcher: every (key, seq) for seq < count once."""

    def match(actual):
        problems = sequence_problems(actual, keys, count)
        if problems:
            raise BeamAssertException("; ".join(problems))

    return match
