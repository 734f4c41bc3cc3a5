"""User state and timers of a stateful DoFn, kept by the runner per key as
Python objects (the plain path's stateful ParDo, worker/stateful_step.py).

Beam's SDK harness reaches a key's state through state requests: a StateKey
proto per cell, a cache that weighs its entries, encoded values. Here a
cell is a Python object in a table keyed by the encoded user key, and a
timer is a `userstate.Timer` record in the same table, so a DoFn's state
read or write is a dict lookup. `UserStateTable` is the
`userstate.UserStateContext` Beam's `DoFnRunner` calls.

Guarantees (what the harness does, `bundle_processor.FnApiUserStateContext`
and `OutputTimer`):
- a ReadModifyWrite cell reads None until written and after `clear`; a bag
  or set reads what was added since the last `clear`, as a new list / set
  (adding while iterating a read is safe); a combining cell reads the
  CombineFn's output of what was added (`create_accumulator` when empty);
- state is per (key, window, state id); a timer is per (key, window,
  family, dynamic tag): setting it again replaces it, `clear` removes it;
- an event-time timer holds the output watermark at its fire time, a
  processing-time timer at the timestamp of the element (or timer) that set
  it;
- `encode_key` / `load_key` move one key's state and timers through bytes
  (`KEY_RECORD_VERSION`, the state spec's coders, the timer family's coder),
  for streaming's per-key state store; a record of another version is
  refused, naming both versions.
"""

import copy
import pickle
from typing import Dict, NamedTuple, Tuple

from apache_beam.coders.coder_impl import create_InputStream, create_OutputStream
from apache_beam.portability.api import beam_fn_api_pb2
from apache_beam.transforms import userstate
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.utils.timestamp import Timestamp

# Version of the record `encode_key` writes.
KEY_RECORD_VERSION = 1


class _Cell:
    """What every cell shares: nothing to commit (the table is the state)."""

    __slots__ = ()

    def commit(self):
        pass


class _ReadModifyWrite(_Cell, userstate.ReadModifyWriteRuntimeState):
    __slots__ = ("value",)

    def __init__(self):
        self.value = None

    def read(self):
        return self.value

    def write(self, value):
        self.value = value

    def clear(self):
        self.value = None

    def is_empty(self):
        return self.value is None

    def encoded(self, coder):
        return [coder.encode(self.value)]

    def load(self, coder, encoded):
        self.value = coder.decode(encoded[0])


class _Bag(_Cell, userstate.BagRuntimeState):
    __slots__ = ("values",)

    def __init__(self):
        self.values = []

    def read(self):
        return list(self.values)

    def add(self, value):
        self.values.append(value)

    def clear(self):
        self.values = []

    def is_empty(self):
        return not self.values

    def encoded(self, coder):
        return [coder.encode(v) for v in self.values]

    def load(self, coder, encoded):
        self.values = [coder.decode(e) for e in encoded]


class _Set(_Cell, userstate.SetRuntimeState):
    __slots__ = ("values",)

    def __init__(self):
        self.values = set()

    def read(self):
        return set(self.values)

    def add(self, value):
        self.values.add(value)

    def clear(self):
        self.values = set()

    def is_empty(self):
        return not self.values

    def encoded(self, coder):
        return [coder.encode(v) for v in self.values]

    def load(self, coder, encoded):
        self.values = {coder.decode(e) for e in encoded}


class _Combining(_Cell, userstate.CombiningValueRuntimeState):
    __slots__ = ("combine_fn", "accumulator")

    def __init__(self, combine_fn):
        self.combine_fn = combine_fn
        self.accumulator = None

    def read(self):
        fn = self.combine_fn
        return fn.extract_output(fn.create_accumulator() if self.accumulator is None else self.accumulator)

    def add(self, value):
        fn = self.combine_fn
        accumulator = fn.create_accumulator() if self.accumulator is None else self.accumulator
        self.accumulator = fn.add_input(accumulator, value)

    def clear(self):
        self.accumulator = None

    def is_empty(self):
        return self.accumulator is None

    def encoded(self, coder):
        return [coder.encode(self.accumulator)]

    def load(self, coder, encoded):
        self.accumulator = self.combine_fn.merge_accumulators([coder.decode(e) for e in encoded])


# State spec types the runner keeps; others (OrderedListState) need the harness.
SUPPORTED_STATE_SPECS = (
    userstate.ReadModifyWriteStateSpec,
    userstate.BagStateSpec,
    userstate.SetStateSpec,
    userstate.CombiningValueStateSpec,
)


class TimerFamily(NamedTuple):
    """A timer family of the stateful ParDo."""

    key: Tuple[str, str]  # (transform id, family id), as the harness path names it
    spec: userstate.TimerSpec
    coder_impl: object  # the family's timer coder impl (key and window inside)


class KeyState:
    """One key's cells {(state id, window): cell} and pending timers
    {(family id, dynamic tag, window): Timer}."""

    __slots__ = ("cells", "timers")

    def __init__(self):
        self.cells = {}
        self.timers = {}

    def is_empty(self):
        return not self.timers and all(cell.is_empty() for cell in self.cells.values())

    def windows(self):
        """Windows holding state that is not empty."""
        return {window for (_, window), cell in self.cells.items() if not cell.is_empty()}


class _Timer(userstate.BaseTimer):
    """What a DoFn's TimerParam is: sets and clears timers of one key,
    window and family in the table."""

    __slots__ = ("_key_state", "_key", "_window", "_input_timestamp", "_pane", "_family")

    def __init__(self, key_state, key, window, input_timestamp, pane, family):
        self._key_state = key_state
        self._key = key
        self._window = window
        self._input_timestamp = input_timestamp
        self._pane = pane
        self._family = family

    def set(self, ts, dynamic_timer_tag=""):
        ts = Timestamp.of(ts)
        spec = self._family.spec
        hold = ts if TimeDomain.is_event_time(spec.time_domain) else self._input_timestamp
        self._key_state.timers[(spec.name, dynamic_timer_tag, self._window)] = userstate.Timer(
            user_key=self._key,
            dynamic_timer_tag=dynamic_timer_tag,
            windows=(self._window,),
            clear_bit=False,
            fire_timestamp=ts,
            hold_timestamp=hold,
            paneinfo=self._pane,
        )

    def clear(self, dynamic_timer_tag=""):
        self._key_state.timers.pop((self._family.spec.name, dynamic_timer_tag, self._window), None)


class UserStateTable(userstate.UserStateContext):
    """The state and timers of the keys a stateful ParDo holds, keyed by
    the nested encoding of the user key (as rows and Beam's state keys
    encode it)."""

    def __init__(self, state_specs, combine_fns, key_coder, window_coder, families: Dict[str, TimerFamily]):
        """`combine_fns`: {state id: CombineFn} of the combining specs
        (`combine_fns_of`)."""
        self._specs = {spec.name: spec for spec in state_specs}
        self._combine_fns = combine_fns
        self._key_impl = key_coder.get_impl()
        self._window_coder = window_coder
        self._families = families
        self.keys = {}  # encoded key -> KeyState
        self._window_bytes = {}  # window -> its encoding (most keys share a few windows)
        self._current = (None, None)  # (key object, encoded key) last encoded

    def encoded_key(self, key):
        current, encoded = self._current
        if key is not current:
            encoded = self._key_impl.encode_nested(key)
            self._current = (key, encoded)
        return encoded

    def key_state(self, encoded_key):
        state = self.keys.get(encoded_key)
        if state is None:
            state = self.keys[encoded_key] = KeyState()
        return state

    # -- userstate.UserStateContext --

    def get_state(self, state_spec, key, window):
        state = self.key_state(self.encoded_key(key))
        cell = state.cells.get((state_spec.name, window))
        if cell is None:
            cell = state.cells[(state_spec.name, window)] = self._new_cell(state_spec.name)
        return cell

    def get_timer(self, timer_spec, key, window, timestamp, pane):
        family = self._families[timer_spec.name]
        return _Timer(self.key_state(self.encoded_key(key)), key, window, timestamp, pane, family)

    def commit(self):
        pass

    def reset(self):
        pass

    # -- the runner's side --

    def _new_cell(self, name):
        spec = self._specs[name]
        if isinstance(spec, userstate.ReadModifyWriteStateSpec):
            return _ReadModifyWrite()
        if isinstance(spec, userstate.BagStateSpec):
            return _Bag()
        if isinstance(spec, userstate.SetStateSpec):
            return _Set()
        return _Combining(self._combine_fns[name])

    def take_due(self, is_due=None):
        """Removes and returns the pending timers `is_due(family key, timer)`
        accepts (default: all) as [(family, timer)], in fire order."""
        fired = []
        for state in self.keys.values():
            if not state.timers:
                continue
            for identity, timer in list(state.timers.items()):
                family = self._families[identity[0]]
                if is_due is None or is_due(family.key, timer):
                    del state.timers[identity]
                    fired.append((family, timer))
        fired.sort(key=lambda f: (f[1].fire_timestamp, f[1].hold_timestamp))
        return fired

    def has_timers(self):
        return any(state.timers for state in self.keys.values())

    def drop_expired(self, expired):
        """Drops the cells of windows `expired(window)` accepts and the
        timers all of whose windows it accepts."""
        for state in self.keys.values():
            for identity in [i for i in state.cells if expired(i[1])]:
                del state.cells[identity]
            for identity in [i for i, t in state.timers.items() if all(expired(w) for w in t.windows)]:
                del state.timers[identity]

    def timers_by_family(self, state):
        """A KeyState's pending timers as {family key: [Timer]}."""
        out = {}
        for (family_id, _, _), timer in state.timers.items():
            out.setdefault(self._families[family_id].key, []).append(timer)
        return out

    def encode_key(self, encoded_key):
        """The record of one key's state and timers (None when it holds
        nothing), and forgets the key."""
        state = self.keys.pop(encoded_key, None)
        if state is None or state.is_empty():
            return None
        return self.encode_state(state)

    def encode_state(self, state):
        """The record of a KeyState holding something."""
        cells = {
            (name, self._encoded_window(window)): cell.encoded(self._specs[name].coder)
            for (name, window), cell in state.cells.items()
            if not cell.is_empty()
        }
        timers = {}
        for (family_id, _, _), timer in state.timers.items():
            timers.setdefault(family_id, []).append(self._families[family_id].coder_impl.encode_nested(timer))
        return pickle.dumps((KEY_RECORD_VERSION, cells, timers), protocol=pickle.HIGHEST_PROTOCOL)

    def _spec_named(self, name):
        return _declared(self._specs, name, "state id")

    def _family_named(self, family_id):
        return _declared(self._families, family_id, "timer family")

    def _encoded_window(self, window):
        encoded = self._window_bytes.get(window)
        if encoded is None:
            if len(self._window_bytes) > 4096:  # windows come and go: keep the cache small
                self._window_bytes.clear()
            encoded = self._window_bytes[window] = self._window_coder.encode(window)
        return encoded

    def load_key(self, encoded_key, record):
        """Adds a key's state and timers from an `encode_key` record, or
        from the record the SDK-harness path writes for a key (its state
        entries and timers: `load_harness_state`)."""
        record = pickle.loads(record)
        if len(record) == 2:
            (entries, _), timers = record
            self.load_harness_state(entries, timers)
            return
        _, cells, timers = _checked(record)
        state = self.key_state(encoded_key)
        window_coder = self._window_coder
        for (name, window), encoded in cells.items():
            spec = self._spec_named(name)
            cell = self._new_cell(name)
            cell.load(spec.coder, encoded)
            state.cells[(name, window_coder.decode(window))] = cell
        for family_id, encoded in timers.items():
            family = self._family_named(family_id)
            for data in encoded:
                timer = family.coder_impl.decode_nested(data)
                state.timers[(family_id, timer.dynamic_timer_tag, timer.windows[0])] = timer

    def load_harness_state(self, entries, timers):
        """Adds state and timers as Beam's SDK harness keeps them (what the
        harness path checkpoints): `entries` {serialized StateKey: [chunks
        of nested-encoded values]} of bag user state (ReadModifyWrite,
        bag, set and combining state are all bags there), `timers` {(transform
        id, family id): [encoded Timer]}. Returns the encoded keys added."""
        added = set()
        window_coder = self._window_coder
        for state_key, chunks in entries.items():
            parsed = beam_fn_api_pb2.StateKey.FromString(state_key)
            if parsed.WhichOneof("type") != "bag_user_state":
                raise ValueError(
                    "A stateful DoFn's checkpointed state holds %s state, which the runner's own "
                    "stateful DoFn path does not keep" % parsed.WhichOneof("type")
                )
            bag = parsed.bag_user_state
            spec = self._spec_named(bag.user_state_id)
            impl = spec.coder.get_impl()
            values = []
            for chunk in chunks:
                stream = create_InputStream(chunk)
                while stream.size() > 0:
                    values.append(impl.decode_from_stream(stream, True))
            cell = self._new_cell(spec.name)
            if isinstance(cell, _ReadModifyWrite):
                cell.value = values[0] if values else None
            elif isinstance(cell, _Bag):
                cell.values = values
            elif isinstance(cell, _Set):
                cell.values = set(values)
            elif values:
                cell.accumulator = cell.combine_fn.merge_accumulators(values)
            self.key_state(bag.key).cells[(spec.name, window_coder.decode(bag.window))] = cell
            added.add(bag.key)
        for (_, family_id), encoded in timers.items():
            family = self._family_named(family_id)
            for data in encoded:
                timer = family.coder_impl.decode_nested(data)
                key = self._key_impl.encode_nested(timer.user_key)
                self.key_state(key).timers[(family_id, timer.dynamic_timer_tag, timer.windows[0])] = timer
                added.add(key)
        return added


def combine_fns_of(state_specs):
    """{state id: CombineFn} for the combining specs, each a copy (as the
    harness copies the spec's); the step sets them up and tears them down."""
    return {
        spec.name: copy.deepcopy(spec.combine_fn)
        for spec in state_specs
        if isinstance(spec, userstate.CombiningValueStateSpec)
    }


def _checked(record):
    """A key record (version, cells, timers), refused if of another version."""
    if record[0] != KEY_RECORD_VERSION:
        raise ValueError(
            "A stateful DoFn's key record has format version %r; this runner reads version %d"
            % (record[0], KEY_RECORD_VERSION)
        )
    return record


def _declared(declared, name, what):
    """`declared[name]`, or an error naming what the checkpoint holds and
    what the DoFn declares now."""
    found = declared.get(name)
    if found is None:
        raise ValueError(
            "A stateful DoFn's checkpoint holds a %s %r its DoFn no longer declares (it declares %s)"
            % (what, name, sorted(declared))
        )
    return found


def harness_state_of(record, encoded_key, transform_id, state_coders):
    """One key's `UserStateTable.encode_key` record (unpickled) as the SDK
    harness path keeps a key: ((state entries, {}), {(transform id, family
    id): [encoded Timer]}), for a checkpoint of the runner's path resumed
    with every stateful DoFn in the harness. `state_coders`: {state id:
    coder} of the ParDo's state specs (the coders the record's values
    were written with; the harness keeps each state kind as a bag of
    nested encodings)."""
    _, cells, timers = _checked(record)
    entries = {}
    for (name, window), encoded in cells.items():
        coder = _declared(state_coders, name, "state id")
        impl, out = coder.get_impl(), create_OutputStream()
        for data in encoded:
            impl.encode_to_stream(coder.decode(data), out, True)
        state_key = beam_fn_api_pb2.StateKey(
            bag_user_state=beam_fn_api_pb2.StateKey.BagUserState(
                transform_id=transform_id, user_state_id=name, window=window, key=encoded_key
            )
        )
        entries[state_key.SerializeToString()] = [out.get()]
    return (entries, {}), {(transform_id, family_id): list(encoded) for family_id, encoded in timers.items()}


def state_coders_of(payload, coders):
    """{state id: coder} of a ParDoPayload's state specs, the coder each
    kind's values are encoded with; `coders`: the pipeline context's coders."""
    out = {}
    for name, spec in payload.state_specs.items():
        kind = spec.WhichOneof("spec")
        field = getattr(spec, kind)
        coder_id = {
            "read_modify_write_spec": "coder_id",
            "bag_spec": "element_coder_id",
            "set_spec": "element_coder_id",
            "combining_spec": "accumulator_coder_id",
            "ordered_list_spec": "element_coder_id",
        }.get(kind)
        if coder_id is not None:
            out[name] = coders[getattr(field, coder_id)]
    return out
