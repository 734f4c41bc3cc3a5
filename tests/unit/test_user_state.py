"""The runner's own user state and timers of a stateful DoFn
(worker/user_state.py): the semantics Beam's SDK harness gives each state
kind and timer, one key's record through bytes, and records the harness
path wrote moving in."""

import math
import pickle

import pytest
from apache_beam import coders
from apache_beam.coders.coder_impl import create_OutputStream
from apache_beam.portability.api import beam_fn_api_pb2
from apache_beam.transforms import combiners, userstate
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.window import GlobalWindow, IntervalWindow
from apache_beam.utils.timestamp import Timestamp
from apache_beam.utils.windowed_value import PaneInfo, PaneInfoTiming

from beam_spark_runner.worker.user_state import (
    KEY_RECORD_VERSION,
    TimerFamily,
    UserStateTable,
    combine_fns_of,
    harness_state_of,
)

COUNT = userstate.ReadModifyWriteStateSpec("count", coders.VarIntCoder())
BAG = userstate.BagStateSpec("bag", coders.StrUtf8Coder())
SEEN = userstate.SetStateSpec("seen", coders.VarIntCoder())
TOTAL = userstate.CombiningValueStateSpec("total", combiners.MeanCombineFn())
EVENT = userstate.TimerSpec("event", TimeDomain.WATERMARK)
REAL = userstate.TimerSpec("real", TimeDomain.REAL_TIME)
SPECS = [COUNT, BAG, SEEN, TOTAL]
WINDOW_CODER = coders.coders.IntervalWindowCoder()
W1 = IntervalWindow(0, 10)
W2 = IntervalWindow(10, 20)
PANE = PaneInfo(True, True, PaneInfoTiming.ON_TIME, 0, 0)


def _timer_impl(spec):
    return coders.coders._TimerCoder(coders.StrUtf8Coder(), WINDOW_CODER).get_impl()


def _table():
    families = {spec.name: TimerFamily(("ParDo(Fn)", spec.name), spec, _timer_impl(spec)) for spec in (EVENT, REAL)}
    fns = combine_fns_of(SPECS)
    for fn in fns.values():
        fn.setup()
    return UserStateTable(SPECS, fns, coders.StrUtf8Coder(), WINDOW_CODER, families)


def _key(table, key):
    return table.encoded_key(key)


def test_each_state_kind_reads_what_the_harness_would():
    table = _table()
    count = table.get_state(COUNT, "k", W1)
    assert count.read() is None
    count.write(3)
    assert table.get_state(COUNT, "k", W1).read() == 3
    count.clear()
    assert count.read() is None

    bag = table.get_state(BAG, "k", W1)
    bag.add("a")
    read = bag.read()
    bag.add("b")  # adding after a read leaves the read alone
    assert list(read) == ["a"] and list(bag.read()) == ["a", "b"]
    bag.clear()
    assert list(bag.read()) == []

    seen = table.get_state(SEEN, "k", W1)
    for v in (1, 2, 1):
        seen.add(v)
    assert seen.read() == {1, 2}

    total = table.get_state(TOTAL, "k", W1)
    assert math.isnan(total.read())  # empty: the output of create_accumulator()
    for v in (1, 2, 6):
        total.add(v)
    assert total.read() == 3


def test_state_is_per_key_and_window():
    table = _table()
    table.get_state(COUNT, "k", W1).write(1)
    table.get_state(COUNT, "k", W2).write(2)
    table.get_state(COUNT, "j", W1).write(3)
    assert [table.get_state(COUNT, k, w).read() for k, w in (("k", W1), ("k", W2), ("j", W1))] == [1, 2, 3]
    assert table.keys[_key(table, "k")].windows() == {W1, W2}


def test_timers_replace_clear_hold_and_fire_in_order():
    table = _table()
    input_ts = Timestamp(5)
    event = table.get_timer(EVENT, "k", W1, input_ts, PANE)
    event.set(8)
    event.set(7)  # replaces the first
    event.set(9, dynamic_timer_tag="other")
    table.get_timer(EVENT, "j", W1, input_ts, PANE).set(6)
    real = table.get_timer(REAL, "k", W1, input_ts, PANE)
    real.set(100)
    event.clear(dynamic_timer_tag="other")

    fired = table.take_due(lambda family, timer: family == ("ParDo(Fn)", EVENT.name))
    assert [(t.user_key, t.fire_timestamp) for _, t in fired] == [("j", Timestamp(6)), ("k", Timestamp(7))]
    # An event-time timer holds at its fire time, a processing-time one at
    # the timestamp of what set it.
    assert fired[1][1].hold_timestamp == Timestamp(7)
    remaining = table.take_due()
    assert [(f.spec.name, t.fire_timestamp, t.hold_timestamp) for f, t in remaining] == [
        (REAL.name, Timestamp(100), input_ts)
    ]
    assert not table.has_timers()


def test_a_key_record_round_trips_and_an_empty_key_has_none():
    table = _table()
    table.get_state(COUNT, "k", W1).write(4)
    table.get_state(BAG, "k", W2).add("x")
    table.get_state(SEEN, "k", W1).add(9)
    table.get_state(TOTAL, "k", W1).add(2)
    table.get_timer(EVENT, "k", W1, Timestamp(1), PANE).set(12)
    table.get_state(COUNT, "empty", W1)  # read, never written
    key = _key(table, "k")
    record = table.encode_key(key)
    assert key not in table.keys
    assert table.encode_key(_key(table, "empty")) is None

    other = _table()
    other.load_key(key, record)
    assert other.get_state(COUNT, "k", W1).read() == 4
    assert list(other.get_state(BAG, "k", W2).read()) == ["x"]
    assert other.get_state(SEEN, "k", W1).read() == {9}
    assert other.get_state(TOTAL, "k", W1).read() == 2
    [(family, timer)] = other.take_due()
    assert (family.spec.name, timer.user_key, timer.fire_timestamp, timer.windows) == (
        EVENT.name,
        "k",
        Timestamp(12),
        (W1,),
    )


def test_a_record_of_another_version_is_refused_naming_both():
    table = _table()
    record = pickle.dumps((KEY_RECORD_VERSION + 1, {}, {}))
    with pytest.raises(ValueError, match="format version %d; this runner reads version %d" % (2, 1)):
        table.load_key(b"k", record)


def test_a_state_id_the_dofn_no_longer_declares_is_named():
    table = _table()
    record = pickle.dumps((KEY_RECORD_VERSION, {("gone", WINDOW_CODER.encode(W1)): [b"x"]}, {}))
    with pytest.raises(ValueError, match="'gone'"):
        table.load_key(b"k", record)


def _harness_entry(state_id, key, window, coder, values):
    state_key = beam_fn_api_pb2.StateKey(
        bag_user_state=beam_fn_api_pb2.StateKey.BagUserState(
            transform_id="ParDo(Fn)",
            user_state_id=state_id,
            window=WINDOW_CODER.encode(window),
            key=coders.StrUtf8Coder().get_impl().encode_nested(key),
        )
    )
    out = create_OutputStream()
    for v in values:
        coder.get_impl().encode_to_stream(v, out, True)
    return state_key.SerializeToString(), [out.get()]


def test_state_the_harness_path_wrote_moves_in():
    """A checkpoint of a run on the SDK-harness path holds each state kind
    as a bag of encoded values; its timers are encoded Timers."""
    entries = dict(
        [
            _harness_entry(COUNT.name, "k", W1, COUNT.coder, [5]),
            _harness_entry(BAG.name, "k", W1, BAG.coder, ["a", "b"]),
            _harness_entry(SEEN.name, "j", W2, SEEN.coder, [1, 2]),
            _harness_entry(TOTAL.name, "k", W1, TOTAL.coder, [(4, 2), (2, 1)]),  # mean accumulators
        ]
    )
    timer = userstate.Timer(
        user_key="j",
        dynamic_timer_tag="",
        windows=(W2,),
        clear_bit=False,
        fire_timestamp=Timestamp(15),
        hold_timestamp=Timestamp(15),
        paneinfo=PANE,
    )
    timers = {("ParDo(Fn)", EVENT.name): [_timer_impl(EVENT).encode_nested(timer)]}
    table = _table()
    added = table.load_harness_state(entries, timers)
    assert added == {_key(table, "k"), _key(table, "j")}
    assert table.get_state(COUNT, "k", W1).read() == 5
    assert list(table.get_state(BAG, "k", W1).read()) == ["a", "b"]
    assert table.get_state(SEEN, "j", W2).read() == {1, 2}
    assert table.get_state(TOTAL, "k", W1).read() == 2  # (4 + 2) / (2 + 1)
    assert [t.fire_timestamp for _, t in table.take_due()] == [Timestamp(15)]

    # The harness path's per-key record: ((entries, ordered), timers).
    one = _table()
    one.load_key(b"ignored", pickle.dumps(((dict([_harness_entry(COUNT.name, "k", W1, COUNT.coder, [7])]), {}), {})))
    assert one.get_state(COUNT, "k", W1).read() == 7


def test_expired_windows_lose_state_and_timers():
    table = _table()
    table.get_state(COUNT, "k", W1).write(1)
    table.get_state(COUNT, "k", W2).write(2)
    table.get_timer(EVENT, "k", W1, Timestamp(1), PANE).set(9)
    table.get_timer(EVENT, "k", W2, Timestamp(11), PANE).set(19)
    table.drop_expired(lambda window: window == W1)
    state = table.keys[_key(table, "k")]
    assert state.windows() == {W2}
    assert [t.windows for t in state.timers.values()] == [(W2,)]


def test_the_global_window_is_a_window_like_any_other():
    table = UserStateTable([COUNT], {}, coders.StrUtf8Coder(), coders.coders.GlobalWindowCoder(), {})
    table.get_state(COUNT, "k", GlobalWindow()).write(1)
    record = table.encode_key(table.encoded_key("k"))
    other = UserStateTable([COUNT], {}, coders.StrUtf8Coder(), coders.coders.GlobalWindowCoder(), {})
    other.load_key(other.encoded_key("k"), record)
    assert other.get_state(COUNT, "k", GlobalWindow()).read() == 1


def test_a_record_of_the_runners_path_moves_into_the_harness_and_back():
    """harness_state_of writes what the harness path keeps for a key (each
    kind a bag of nested encodings under its StateKey, timers per
    (transform, family)); reading that back gives the same state."""
    table = _table()
    table.get_state(COUNT, "k", W1).write(4)
    table.get_state(BAG, "k", W2).add("x")
    table.get_state(BAG, "k", W2).add("y")
    table.get_state(SEEN, "k", W1).add(9)
    table.get_state(TOTAL, "k", W1).add(2)
    table.get_timer(EVENT, "k", W1, Timestamp(1), PANE).set(12)
    key = _key(table, "k")
    record = pickle.loads(table.encode_key(key))
    coders_by_id = {spec.name: spec.coder for spec in SPECS}
    (entries, ordered), timers = harness_state_of(record, key, "ParDo(Fn)", coders_by_id)
    assert ordered == {}
    parsed = {beam_fn_api_pb2.StateKey.FromString(k).bag_user_state.user_state_id for k in entries}
    assert parsed == {COUNT.name, BAG.name, SEEN.name, TOTAL.name}
    assert list(timers) == [("ParDo(Fn)", EVENT.name)]
    # The harness's own encoding of the bag: nested values, concatenated.
    (bag_key,) = [k for k in entries if beam_fn_api_pb2.StateKey.FromString(k).bag_user_state.user_state_id == BAG.name]
    assert entries[bag_key] == [_harness_entry(BAG.name, "k", W2, BAG.coder, ["x", "y"])[1][0]]

    back = _table()
    back.load_harness_state(entries, timers)
    assert back.get_state(COUNT, "k", W1).read() == 4
    assert list(back.get_state(BAG, "k", W2).read()) == ["x", "y"]
    assert back.get_state(SEEN, "k", W1).read() == {9}
    assert back.get_state(TOTAL, "k", W1).read() == 2
    assert [t.fire_timestamp for _, t in back.take_due()] == [Timestamp(12)]
