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
client, its socket and message framing), used here and nowhere else. They
are those of the pinned pyspark (setup.py); if a PySpark release moves
them, `MapTable` falls back to the public one-call-at-a-time API (correct,
slower), and tests/integration/test_state_store_calls.py fails to say so.

Beam-free (Spark loads this module in its helper processes).
"""

import logging

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
        self._wire = _Wire.of(map_state, name)

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


class _Wire:
    """Pipelined MapState requests over PySpark's state socket."""

    @classmethod
    def of(cls, map_state, name):
        try:
            client = map_state._mapStateClient
            api = client._stateful_processor_api_client
            for needed in ("_serialize_to_bytes", "_deserialize_from_bytes", "_receive_proto_message", "sockfile"):
                getattr(api, needed)  # all there now, or fall back now (not mid-batch)
            return cls(api, client.user_key_schema, client.value_schema, name)
        except (AttributeError, ImportError) as e:
            _LOG.warning("PySpark's state API has changed (%s): state calls go one at a time", e)
            return None

    def __init__(self, api, key_schema, value_schema, name):
        import pyspark.sql.streaming.proto.StateMessage_pb2 as messages
        from pyspark.serializers import write_int

        self._api, self._messages, self._write_int = api, messages, write_int
        self._key_schema, self._value_schema, self._name = key_schema, value_schema, name

    def _request(self, call):
        m = self._messages
        return m.StateRequest(
            stateVariableRequest=m.StateVariableRequest(mapStateCall=m.MapStateCall(stateName=self._name, **call))
        ).SerializeToString()

    def _key(self, key):
        return self._api._serialize_to_bytes(self._key_schema, (key,))

    def _exchange(self, requests, what):
        """Sends `requests`, WINDOW at a time; returns their answers' values."""
        api, out, values = self._api, self._api.sockfile, []
        for start in range(0, len(requests), WINDOW):
            part = requests[start : start + WINDOW]
            for message in part:
                self._write_int(0, out)  # message version, as PySpark writes it
                self._write_int(len(message), out)
                out.write(message)
            out.flush()
            failure = None
            for _ in part:  # every answer is read, so the socket stays in step
                status, error, value = api._receive_proto_message()
                if status != 0 and not (what == "get" and status == 2):
                    failure = failure or error
                values.append(value)
            if failure:
                raise RuntimeError("Spark's state store refused a %s on %r: %s" % (what, self._name, failure))
        return values

    def get_many(self, keys):
        m = self._messages
        values = self._exchange([self._request({"getValue": m.GetValue(userKey=self._key(k))}) for k in keys], "get")
        return [self._api._deserialize_from_bytes(v) if len(v) else None for v in values]

    def put_many(self, items):
        m = self._messages
        serialize = self._api._serialize_to_bytes
        self._exchange(
            [
                self._request(
                    {"updateValue": m.UpdateValue(userKey=self._key(k), value=serialize(self._value_schema, (v,)))}
                )
                for k, v in items
            ],
            "put",
        )

    def remove_many(self, keys):
        m = self._messages
        self._exchange([self._request({"removeKey": m.RemoveKey(userKey=self._key(k))}) for k in keys], "remove")


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
