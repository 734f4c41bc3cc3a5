"""streaming/keyed_state.py: per-key entries, the time index, holds and the
hot set, against an in-memory store that counts what a batch reads."""

import pickle

import pytest

from beam_spark_runner.streaming import keyed_state as ks
from beam_spark_runner.streaming.keyed_state import DictStore, KeyedState, Wake

MIN = -(1 << 62)
SECOND = 1_000_000


def batch(store, **kwargs):
    return KeyedState(store, MIN, MIN, **kwargs)


def key(i):
    return b"key-%07d" % i


def test_saved_keys_come_back_with_their_payload_and_count():
    store = DictStore()
    state = batch(store)
    state.save(key(1), b"one", Wake(hold=5))
    state.save(key(2), b"two")
    state.wm = 7
    state.commit()
    again = batch(store)
    assert (again.load(key(1)), again.load(key(2)), again.load(key(3))) == (b"one", b"two", None)
    assert again.key_count == 2 and again.wm == 7 and again.hold() == 5
    again.save(key(1), None)
    again.commit()
    assert batch(store).key_count == 1 and batch(store).hold() is None


def test_due_finds_keys_by_event_and_processing_time_and_takes_them_from_the_index():
    store = DictStore()
    state = batch(store)
    state.save(key(1), b"a", Wake(event_time=10 * SECOND))
    state.save(key(2), b"b", Wake(processing_time=20 * SECOND))
    state.save(key(3), b"c", Wake(event_time=100 * SECOND))
    state.commit()
    state = batch(store)
    assert state.due(5 * SECOND, 5 * SECOND) == []
    assert state.due(10 * SECOND, 20 * SECOND) == [key(1), key(2)]
    assert state.next_processing_time() is None
    state.commit()  # neither saved again: no longer indexed
    assert batch(store).due(50 * SECOND, 50 * SECOND) == []
    assert batch(store).due(100 * SECOND, 0) == [key(3)]


def test_a_key_taken_from_the_index_and_saved_with_the_same_wake_is_indexed_again():
    store = DictStore()
    state = batch(store)
    state.save(key(1), b"a", Wake(event_time=10))
    state.commit()
    state = batch(store)
    assert state.due(10, MIN) == [key(1)]
    state.save(key(1), b"a", Wake(event_time=10))  # e.g. a trigger that did not fire
    state.commit()
    assert batch(store).due(10, MIN) == [key(1)]


def test_a_key_whose_wake_moved_is_found_at_the_new_time_only():
    store = DictStore()
    state = batch(store)
    state.save(key(1), b"a", Wake(event_time=10 * SECOND))
    state.commit()
    state = batch(store)
    state.save(key(1), b"a", Wake(event_time=30 * SECOND))  # the stale entry at 10 s stays
    state.commit()
    assert batch(store).due(20 * SECOND, MIN) == []
    assert batch(store).due(30 * SECOND, MIN) == [key(1)]
    state = batch(store)
    state.save(key(1), None)
    state.commit()  # no key left: the index goes too
    assert store.tables[ks.DUE] == {} and store.meta is None  # nothing left, not even a watermark


def test_a_batch_reads_only_the_keys_it_touches_however_many_are_stored():
    store = DictStore()
    state = batch(store, hot_bytes=0)  # every key leaves the hot set
    for i in range(20_000):
        state.save(key(i), b"x", Wake(event_time=(1000 + i % 7) * SECOND))
    state.save(key(99_999), b"y", Wake(event_time=10 * SECOND))
    state.commit()
    assert len(store.tables[ks.KEYS]) == 20_001
    store.reads = 0
    state = batch(store, hot_bytes=0)
    state.prefetch([key(1), key(2), key(3)])
    assert state.due(10 * SECOND, MIN) == [key(99_999)]
    for k in (key(1), key(2), key(3)):
        state.save(k, b"z", state.wake_of(k))
    state.commit()
    # 3 data keys, the due key and the one index chunk that came due (and
    # the last chunk of each bucket the 3 saves did not move: none).
    assert store.reads <= 5
    assert batch(store).load(key(2)) == b"z" and batch(store).key_count == 20_001


def test_the_hot_set_keeps_recent_keys_in_meta_and_sends_the_rest_to_the_keys_table():
    store = DictStore()
    record_size = len(ks.KeyRecord(Wake(), b"v" * 100).encode())
    state = batch(store, hot_bytes=3 * record_size)
    for i in range(5):
        state.save(key(i), b"v" * 100)
    state.commit()
    assert sorted(store.tables[ks.KEYS]) == [key(0), key(1)]  # the least recently touched
    state = batch(store, hot_bytes=3 * record_size)
    assert state.load(key(0)) == b"v" * 100  # from the keys table
    state.save(key(0), None)
    state.commit()
    assert key(0) not in store.tables[ks.KEYS]  # a dropped key's cold copy goes
    assert batch(store).key_count == 4


def test_new_keys_cost_no_reads_while_nothing_left_the_hot_set():
    store = DictStore()
    state = batch(store)
    state.prefetch([key(i) for i in range(1000)])
    assert store.reads == 0


def test_holds_are_the_minimum_over_keys_and_follow_their_changes():
    store = DictStore()
    state = batch(store)
    state.save(key(1), b"a", Wake(hold=50, event_hold=60))
    state.save(key(2), b"b", Wake(hold=30, event_hold=None))
    state.commit()
    state = batch(store)
    assert (state.hold(), state.event_hold()) == (30, 60)
    state.save(key(2), b"b", Wake(hold=70))
    state.commit()
    assert batch(store).hold() == 50


def test_meta_of_another_format_version_is_refused_by_name():
    store = DictStore()
    store.meta = pickle.dumps({"v": 99})
    with pytest.raises(ValueError, match="format 99 is not 2"):
        batch(store)


def test_format_1_blobs_are_handed_to_the_operator():
    store = DictStore()
    legacy = {"wm": 5, "pt": 6, "keys": {}, "wake": {}}
    store.meta = pickle.dumps(legacy)
    assert batch(store).legacy == legacy
