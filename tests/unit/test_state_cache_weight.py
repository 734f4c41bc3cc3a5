"""The SDK harness's state cache weighs entries without walking every
loaded module (worker/beam_internals.weigh_cached_state)."""

import sys

import objsize.traverse
from apache_beam.runners.worker import statecache

from beam_spark_runner.worker import beam_internals


def test_the_state_cache_weighs_with_the_runners_weigher():
    assert statecache.get_deep_size is beam_internals.weigh_cached_state


def test_weighing_does_not_walk_the_globals_of_every_module(monkeypatch):
    """objsize's default walks sys.modules on every call (about 1 ms each
    here, three calls per key of a stateful DoFn)."""

    def walked(*_):
        raise AssertionError("weighing a state cache entry walked every module's globals")

    monkeypatch.setattr(objsize.traverse, "_iter_modules_globals", walked)
    values = [("key-%d" % i, i * 1000) for i in range(100)]
    weight = beam_internals.weigh_cached_state(values)
    # A deep size: the list, its tuples, their strings and ints.
    assert weight >= sys.getsizeof(values) + sum(sys.getsizeof(t) + sys.getsizeof(t[0]) for t in values)


def test_shared_objects_are_not_weighed_with_an_entry():
    """Beam's filter still stops at classes, modules and functions."""

    class Holder:
        pass

    holder = Holder()
    holder.module, holder.function = sys, test_shared_objects_are_not_weighed_with_an_entry
    alone = Holder()
    assert beam_internals.weigh_cached_state(holder) - beam_internals.weigh_cached_state(alone) < 1000
