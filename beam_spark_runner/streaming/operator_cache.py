"""The operator objects a Python worker keeps between micro-batches, for
the runs it ran last. Beam-free: the module that looks them up is
unpickled where importing Beam would cost seconds (execution/streaming_udfs.py)."""

# A Python worker keeps the operators of this many runs, the most recently
# used: a session (a job server's above all) runs query after query, and
# each run's operators hold parsed plans and, for a Java stage, a
# descriptor registered in the executor's JVM.
RUNS_KEPT = 4


class OperatorCache:
    """Operator objects by run and plan operator, for the `runs_kept` runs
    used last. An evicted run's operators are closed; if the run comes back
    they are built again, which is safe: an operator keeps nothing between
    micro-batches that is not in the key-group's store (a Python worker
    Spark starts anew builds them too)."""

    def __init__(self, runs_kept: int):
        self._runs_kept = runs_kept
        self._runs = {}  # run token -> {operator key: operator}; least recently used first

    def get(self, token, key, build):
        """The operator for `key` in run `token`, built by `build()` the first time."""
        run = self._runs[token] = self._runs.pop(token, {})  # now the most recently used
        if key not in run:
            run[key] = build()
            self._evict()
        return run[key]

    def runs(self):
        """The tokens of the runs kept, least recently used first."""
        return list(self._runs)

    def _evict(self):
        while len(self._runs) > self._runs_kept:
            for evicted in self._runs.pop(next(iter(self._runs))).values():
                evicted.close()
