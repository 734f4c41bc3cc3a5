"""The runner's state servicer serves a map state's keys (Java's MapState
and SetState read them with MultimapKeysUserState), besides each map key's
values (MultimapUserState)."""

from apache_beam.portability.api import beam_fn_api_pb2

from beam_spark_runner.worker.beam_internals import new_state_servicer


def _value_key(map_key, key=b"k1"):
    state_key = beam_fn_api_pb2.StateKey()
    user = state_key.multimap_user_state
    user.transform_id, user.user_state_id, user.window, user.key, user.map_key = "t", "m", b"w", key, map_key
    return state_key


def _keys_key(key=b"k1"):
    state_key = beam_fn_api_pb2.StateKey()
    keys = state_key.multimap_keys_user_state
    keys.transform_id, keys.user_state_id, keys.window, keys.key = "t", "m", b"w", key
    return state_key


def _get(servicer, state_key):
    data, token = servicer.get_raw(state_key)
    out = [data]
    while token:
        data, token = servicer.get_raw(state_key, token)
        out.append(data)
    return b"".join(out)


def test_a_map_states_keys_are_those_put_in_put_order_less_those_removed():
    servicer = new_state_servicer()
    servicer.append_raw(_value_key(b"a"), b"1")
    servicer.append_raw(_value_key(b"b"), b"2")
    servicer.append_raw(_value_key(b"c"), b"3")
    servicer.append_raw(_value_key(b"a"), b"4")
    servicer.append_raw(_value_key(b"z", key=b"k2"), b"9")  # another key's map
    assert _get(servicer, _keys_key()) == b"abc"
    servicer.clear(_value_key(b"b"))
    assert _get(servicer, _keys_key()) == b"ac"
    assert _get(servicer, _value_key(b"a")) == b"14"
    assert _get(servicer, _keys_key(b"k2")) == b"z"


def test_clearing_a_map_state_removes_every_key_and_its_values_and_no_other_map():
    servicer = new_state_servicer()
    servicer.append_raw(_value_key(b"a"), b"1")
    servicer.append_raw(_value_key(b"b"), b"2")
    servicer.append_raw(_value_key(b"z", key=b"k2"), b"9")
    servicer.clear(_keys_key())
    assert _get(servicer, _keys_key()) == b""
    assert _get(servicer, _value_key(b"a")) == b""
    assert _get(servicer, _value_key(b"b")) == b""
    assert _get(servicer, _value_key(b"z", key=b"k2")) == b"9"
    servicer.append_raw(_value_key(b"b"), b"5")
    assert _get(servicer, _keys_key()) == b"b"
