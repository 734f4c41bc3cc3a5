"""A keyed operator's key-group state (streaming/keyed_state.Store) in
Spark's state store, through PySpark's transformWithState state API.

PySpark's MapState makes one socket request per call and waits for its
answer: about 0.1 ms of the JVM's work, but 0.5-1.7 ms of waiting for the
two processes to hand the socket back and forth on a busy 2-core machine
(2,000 `updateValue` calls took 3.4 s; the same 2,000 requests written
before their answers were read took 0.15 s). A batch that touches thousands
of keys would spend seconds waiting, so `MapTable` writes its requests in
windows of `WINDOW` and then reads their answers.

That needs PySpark's private pieces of the state API (the MapState's
client, its socket and message framing): execution/spark_internals.py's
`MapStateWire`. If a PySpark release moves them, `MapTable` falls back to
the public one-call-at-a-time API (correct, slower), and
tests/unit/test_private_apis.py fails naming them.

Beam-free (Spark loads this module in its helper processes).
"""

import logging

from beam_spark_runner.execution.spark_internals import MapStateWire
from beam_spark_runner.streaming import state_blobs

_LOG = logging.getLogger(__name__)
WINDOW = 64  # requests in flight: their answers fit the socket's buffers

KEY_SCHEMA = "k binary"
VALUE_SCHEMA = "v binary"


class MapTable:
    """One MapState of binary keys to binary values, with calls on many
    keys at once."""

    def __init__(self, map_state, name):
        self._state = map_state
        self._name = name
        self._wire = MapStateWire.of(map_state, name, WINDOW)

    def get_many(self, keys):
        if self._wire is None:
            return [_first(self._state.getValue((k,))) for k in keys]
        return [None if v is None else bytes(v[0]) for v in self._wire.get_many(keys)]

    def put_many(self, items):
        if self._wire is None:
            for k, v in items:
                self._state.updateValue((k,), (v,))
        else:
            self._wire.put_many(items)

    def remove_many(self, keys):
        if self._wire is None:
            for k in keys:
                self._state.removeKey((k,))
        else:
            self._wire.remove_many(keys)


def _first(row):
    return None if row is None else bytes(row[0])


class SparkKeyGroupStore:
    """keyed_state.Store over a key-group's state variables: the meta value
    in the ValueState the key-group blob always lived in ("beam", stored
    compressed by state_blobs) and the "keys" and "due" MapStates."""

    def __init__(self, meta_state, tables):
        self._meta = meta_state
        self._tables = tables  # {"keys": MapTable, "due": MapTable}

    def get_meta(self):
        saved = self._meta.get() if self._meta.exists() else None
        return state_blobs.unpack(saved[0]) if saved else None

    def put_meta(self, value):
        if value is None:
            self._meta.clear()
        else:
            self._meta.update((state_blobs.pack(value),))

    def get_many(self, table, keys):
        return self._tables[table].get_many(list(keys)) if keys else []

    def put_many(self, table, items):
        if items:
            self._tables[table].put_many(list(items))

    def remove_many(self, table, keys):
        if keys:
            self._tables[table].remove_many(list(keys))
