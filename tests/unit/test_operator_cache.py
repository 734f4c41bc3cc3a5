"""A Python worker's streaming operators are kept for the runs it used
last, and an evicted run's operators are closed (streaming/operator_cache.py)."""

from beam_spark_runner.streaming.operator_cache import OperatorCache


class _Operator:
    def __init__(self, name):
        self.name = name
        self.closed = False

    def close(self):
        self.closed = True


def test_the_least_recently_used_run_is_evicted_and_its_operators_closed():
    cache = OperatorCache(runs_kept=2)
    a1 = cache.get("a", "op1", lambda: _Operator("a1"))
    a2 = cache.get("a", "op2", lambda: _Operator("a2"))
    b1 = cache.get("b", "op1", lambda: _Operator("b1"))
    # Run "a" ran again after "b": "b" is now the least recently used.
    assert cache.get("a", "op1", lambda: _Operator("again")) is a1
    c1 = cache.get("c", "op1", lambda: _Operator("c1"))
    assert cache.runs() == ["a", "c"]
    assert b1.closed and not a1.closed and not a2.closed and not c1.closed


def test_an_evicted_run_that_comes_back_gets_new_operators():
    cache = OperatorCache(runs_kept=1)
    first = cache.get("a", "op", lambda: _Operator("first"))
    cache.get("b", "op", lambda: _Operator("b"))
    assert first.closed
    again = cache.get("a", "op", lambda: _Operator("again"))
    assert again is not first and again.name == "again" and not again.closed


def test_a_run_looked_up_again_builds_nothing():
    built = []

    def build():
        built.append(1)
        return _Operator("x")

    cache = OperatorCache(runs_kept=4)
    for _ in range(3):
        cache.get("a", "op", build)
    assert built == [1]
