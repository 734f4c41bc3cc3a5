"""Per-key state of one key-group of a keyed streaming operator (GroupByKey,
stateful DoFn), laid out so that a micro-batch reads and writes only the
keys it touches: those with data, a due timer, a due trigger or an
expiring window. No Spark, no Beam: the operator hands in a `Store` (Spark's
state store through execution/state_store_calls.py, a dict in tests).

Layout (format version `FORMAT_VERSION`), three tables of the key-group:

* meta (one value): `KeyGroupMeta`'s fields: the watermark and processing
  time the key-group has seen, the operator's own key-group data, the time
  index's bucket summary, the holds of all keys (a count per hold time,
  so the key-group's hold is known without reading keys), and the *hot
  set*: the records of the most recently touched keys, up to `hot_bytes`.
* keys (map): encoded key -> `KeyRecord` of a key outside the hot set.
  Reading one costs a round trip to Spark's state store (PySpark's state
  API is one socket request per call), so the hot set keeps the keys a
  pipeline touches batch after batch in the meta value, read at once.
* due (map): (domain, bucket, chunk) -> [(time, key)]: the time index.
  A key whose record says it must run again at watermark (or processing
  time) t has an entry at t in bucket t >> BUCKET_BITS. A batch reads only
  the buckets whose earliest entry is due. Entries are not removed when a
  key's time moves (that would cost a read of the bucket): a stale entry
  is recognised when its bucket comes due, by the key's record, and
  dropped then.

What is guaranteed: `due(wm, pt)` returns every stored key whose record's
event-time wake is <= wm or processing-time wake is <= pt (and only
those); `hold()` is the minimum hold over all stored keys. A batch writes
to the store as it goes (taking due index entries) and at `commit`;
Spark's state store keeps a batch's writes only if its task finishes, so
a failed batch leaves the state as the previous batch committed it.

Format version 1 (before this module) kept the whole key-group in the
meta value as one pickled dict; `KeyedState.legacy` hands it to the
operator, which moves it into this layout (operators.py).
"""

import enum
import pickle
import struct
from typing import Dict, List, NamedTuple, Optional, Protocol, Tuple

from beam_spark_runner.streaming.timestamp_summary import TimestampSummary

FORMAT_VERSION = 2
RECORD_VERSION = 1


class IndexDomain(enum.IntEnum):
    """Which of a key-group's two time indexes a wake-up goes in. Its value
    is the first byte of the index's entries in the state store (`due`), so
    it never changes. (Not Beam's TimeDomain, whose values differ.)"""

    EVENT = 0
    PROCESSING = 1


BUCKET_BITS = 20  # about a second of micros per index bucket
CHUNK = 512  # index entries per stored chunk
HOT_BYTES = 4 << 20  # default hot-set budget per key-group (encoded records)

META, KEYS, DUE = "meta", "keys", "due"


class Store(Protocol):
    """Where a key-group's state lives: the meta value and the `KEYS` and
    `DUE` tables. The table calls take many keys at once: Spark's store
    answers them in one exchange (execution/state_store_calls.py)."""

    def get_meta(self) -> Optional[bytes]: ...

    def put_meta(self, value: Optional[bytes]) -> None: ...

    def get_many(self, table: str, keys: List[bytes]) -> List[Optional[bytes]]: ...

    def put_many(self, table: str, items: List[Tuple[bytes, bytes]]) -> None: ...

    def remove_many(self, table: str, keys: List[bytes]) -> None: ...


class DictStore:
    """A `Store` in memory: tests and the pure driver. `reads` counts the
    table keys read (what a Spark store pays for)."""

    def __init__(self):
        self.meta = None
        self.tables = {KEYS: {}, DUE: {}}
        self.reads = 0

    def get_meta(self):
        return self.meta

    def put_meta(self, value):
        self.meta = value

    def get_many(self, table, keys):
        self.reads += len(keys)
        return [self.tables[table].get(k) for k in keys]

    def put_many(self, table, items):
        self.tables[table].update(items)

    def remove_many(self, table, keys):
        for k in keys:
            self.tables[table].pop(k, None)


class Wake(NamedTuple):
    """When a key must run again without new data, and what it holds back
    (micros; None: never / nothing)."""

    event_time: Optional[int] = None  # the input watermark it must see
    processing_time: Optional[int] = None
    hold: Optional[int] = None  # the output watermark may not pass it
    event_hold: Optional[int] = None  # the part of `hold` not from processing-time timers

    def at(self, domain):
        return self.event_time if domain == IndexDomain.EVENT else self.processing_time


NO_WAKE = Wake()


class KeyRecord(NamedTuple):
    """One key's stored state: its wake-up and the operator's payload."""

    wake: Wake
    payload: bytes

    def encode(self) -> bytes:
        return pickle.dumps((RECORD_VERSION, tuple(self.wake), self.payload), protocol=pickle.HIGHEST_PROTOCOL)

    @classmethod
    def decode(cls, data: bytes) -> "KeyRecord":
        version, wake, payload = pickle.loads(data)
        if version != RECORD_VERSION:
            raise ValueError(
                "key record format %r is not %r (written by another runner version)" % (version, RECORD_VERSION)
            )
        return cls(Wake(*wake), payload)


class _Bucket(NamedTuple):
    chunks: int  # stored chunks 0..chunks-1
    earliest: int  # micros of its earliest entry
    last_len: int  # entries in the last chunk


class KeyGroupMeta(NamedTuple):
    """The meta value, as stored (a dict of plain data under FORMAT_VERSION)."""

    wm: int
    pt: int
    extra: object  # the operator's key-group data (picklable)
    buckets: Tuple[Dict[int, tuple], Dict[int, tuple]]  # per domain: bucket -> _Bucket fields
    holds: Dict[int, int]  # hold time -> keys holding there
    event_holds: Dict[int, int]
    hot: Dict[bytes, Tuple[bytes, int, bool]]  # key -> (record, batch last touched, cold copy exists)
    keys: int  # stored keys
    cold: int  # keys with a copy in the keys table
    batch: int  # batches committed

    def encode(self) -> bytes:
        fields = self._asdict()
        fields["v"] = FORMAT_VERSION
        return pickle.dumps(fields, protocol=pickle.HIGHEST_PROTOCOL)

    @classmethod
    def fresh(cls, wm, pt):
        return cls(wm, pt, None, ({}, {}), {}, {}, {}, 0, 0, 0)


def _due_key(domain, bucket, chunk):
    return struct.pack(">bqi", domain, bucket, chunk)


def _count(counts, time, delta):
    if time is None:
        return
    n = counts.get(time, 0) + delta
    if n:
        counts[time] = n
    else:
        counts.pop(time, None)


class KeyedState:
    """One key-group's state for one batch: read lazily from `store`,
    written back by `commit`. Keys are bytes (the operator's encoding).
    `wm`, `pt` and `extra` are the operator's to read and set."""

    def __init__(self, store: Store, initial_wm: int, initial_pt: int, hot_bytes: int = HOT_BYTES):
        self._store = store
        self._hot_bytes = hot_bytes
        self._initial = (initial_wm, initial_pt)
        raw = store.get_meta()
        self.legacy = None
        decoded = pickle.loads(raw) if raw is not None else None
        if decoded is None:
            meta = KeyGroupMeta.fresh(initial_wm, initial_pt)
        elif not (isinstance(decoded, dict) and "v" in decoded):
            self.legacy = decoded  # format 1: the operator moves it in (operators.py)
            meta = KeyGroupMeta.fresh(initial_wm, initial_pt)
        elif decoded["v"] == FORMAT_VERSION:
            del decoded["v"]
            meta = KeyGroupMeta(**decoded)
        else:
            raise ValueError(
                "key-group state format %r is not %r (written by another runner version)"
                % (decoded["v"], FORMAT_VERSION)
            )
        self.wm, self.pt, self.extra = meta.wm, meta.pt, meta.extra
        self._buckets = tuple({b: _Bucket(*v) for b, v in d.items()} for d in meta.buckets)
        self._holds, self._event_holds = dict(meta.holds), dict(meta.event_holds)
        self._hot = dict(meta.hot)
        self._keys, self._cold_keys = meta.keys, meta.cold
        self._batch = meta.batch + 1
        self._loaded: Dict[bytes, Optional[KeyRecord]] = {}  # records read this batch (None: absent)
        self._cold: Dict[bytes, bool] = {}  # key -> a copy is in the keys table
        self._indexed: Dict[bytes, List[Optional[int]]] = {}  # key -> time of its live index entry per domain
        self._saved: Dict[bytes, Optional[KeyRecord]] = {}
        self._appends = ({}, {})  # per domain: bucket -> [(time, key)] not yet stored

    # -- reading --

    def prefetch(self, keys) -> None:
        """Reads the records of `keys` at once (one exchange with the store
        for those outside the hot set)."""
        missing = []
        for key in keys:
            if key in self._saved or key in self._loaded:
                continue
            hot = self._hot.get(key)
            if hot is not None:
                self._loaded_as(key, KeyRecord.decode(hot[0]), hot[2])
            elif not self._cold_keys:
                self._loaded_as(key, None, False)  # nothing is outside the hot set
            else:
                missing.append(key)
        if missing:
            missing = sorted(set(missing))
            for key, data in zip(missing, self._store.get_many(KEYS, missing)):
                self._loaded_as(key, None if data is None else KeyRecord.decode(data), data is not None)

    def _loaded_as(self, key, record, cold):
        self._loaded[key] = record
        self._cold[key] = cold
        if record is not None:
            self._indexed[key] = [record.wake.event_time, record.wake.processing_time]

    def load(self, key: bytes) -> Optional[bytes]:
        """The key's payload (None: no state)."""
        record = self._record(key)
        return None if record is None else record.payload

    def wake_of(self, key: bytes) -> Wake:
        record = self._record(key)
        return NO_WAKE if record is None else record.wake

    def _record(self, key):
        if key in self._saved:
            return self._saved[key]
        if key not in self._loaded:
            self.prefetch((key,))
        return self._loaded[key]

    def due(self, wm: int, pt: int) -> List[bytes]:
        """The stored keys due at input watermark `wm` or processing time
        `pt`, in key order. Their index entries are taken: a key saved
        later in the batch is indexed again at its wake then."""
        candidates = set()
        for domain, limit in ((IndexDomain.EVENT, wm), (IndexDomain.PROCESSING, pt)):
            taken = []
            due_buckets = sorted(b for b, summary in self._buckets[domain].items() if summary.earliest <= limit)
            if due_buckets:
                taken.extend(self._take_due(domain, due_buckets, limit))
            for bucket, entries in self._appends[domain].items():
                if any(t <= limit for t, _ in entries):
                    taken.extend(k for t, k in entries if t <= limit)
                    self._appends[domain][bucket] = [(t, k) for t, k in entries if t > limit]
            self.prefetch(taken)
            for key in taken:
                indexed = self._indexed.get(key)
                if indexed is not None:
                    indexed[domain] = None
            candidates.update(taken)
        due = []
        for key in sorted(candidates):
            wake = self.wake_of(key)
            if (wake.event_time is not None and wake.event_time <= wm) or (
                wake.processing_time is not None and wake.processing_time <= pt
            ):
                due.append(key)
        return due

    def _take_due(self, domain, buckets, limit):
        """Keys of the entries due at `limit` in `buckets` (taken out of
        the index; the rest of each bucket is written back)."""
        summaries = [(b, self._buckets[domain].pop(b)) for b in buckets]
        names = [_due_key(domain, b, c) for b, summary in summaries for c in range(summary.chunks)]
        chunks = iter(self._store.get_many(DUE, names))
        self._store.remove_many(DUE, names)
        taken = []
        for bucket, summary in summaries:
            entries = []
            for _ in range(summary.chunks):
                data = next(chunks)
                if data is not None:
                    entries.extend(pickle.loads(data))
            taken.extend(k for t, k in entries if t <= limit)
            rest = [(t, k) for t, k in entries if t > limit]
            if rest:
                self._write_bucket(domain, bucket, rest, _Bucket(0, min(t for t, _ in rest), 0))
        return taken

    # -- time and holds of the whole key-group --

    def hold(self) -> Optional[int]:
        """The earliest hold of any stored key (None: none holds)."""
        return min(self._holds, default=None)

    def event_hold(self) -> Optional[int]:
        return min(self._event_holds, default=None)

    def hold_summary(self) -> TimestampSummary:
        """The holds of all stored keys, one unit of weight per key."""
        return TimestampSummary.of(self._holds, [self._holds[t] for t in self._holds])

    def event_hold_summary(self) -> TimestampSummary:
        return TimestampSummary.of(self._event_holds, [self._event_holds[t] for t in self._event_holds])

    def next_processing_time(self) -> Optional[int]:
        """The earliest processing-time wake-up the index holds (a stale
        entry may make it early, never late)."""
        times = [s.earliest for s in self._buckets[IndexDomain.PROCESSING].values()]
        times.extend(t for entries in self._appends[IndexDomain.PROCESSING].values() for t, _ in entries)
        return min(times, default=None)

    def is_empty(self) -> bool:
        return self._keys == 0 and self.extra is None

    @property
    def key_count(self) -> int:
        return self._keys

    # -- writing --

    def save(self, key: bytes, payload: Optional[bytes], wake: Wake = NO_WAKE) -> None:
        """Sets the key's state (None: drops it) and its wake-up."""
        old = self._record(key)
        if old is not None:
            _count(self._holds, old.wake.hold, -1)
            _count(self._event_holds, old.wake.event_hold, -1)
            self._keys -= 1
        if payload is None:
            self._saved[key] = None
            self._indexed[key] = [None, None]
            return
        self._saved[key] = KeyRecord(wake, payload)
        self._keys += 1
        _count(self._holds, wake.hold, 1)
        _count(self._event_holds, wake.event_hold, 1)
        indexed = self._indexed.setdefault(key, [None, None])
        for domain in (IndexDomain.EVENT, IndexDomain.PROCESSING):
            time = wake.at(domain)
            if time is not None and indexed[domain] != time:
                self._appends[domain].setdefault(time >> BUCKET_BITS, []).append((time, key))
                indexed[domain] = time

    def commit(self) -> None:
        """Writes the batch's changes: saved keys, index entries, meta."""
        removed = []
        for key, record in self._saved.items():
            cold = self._cold.get(key, False)
            if record is None:
                self._hot.pop(key, None)
                if cold:
                    removed.append(key)
                    self._cold_keys -= 1
            else:
                self._hot[key] = (record.encode(), self._batch, cold)
        for key in self._loaded:
            if key not in self._saved and key in self._hot:
                data, _, cold = self._hot[key]
                self._hot[key] = (data, self._batch, cold)  # touched: stays hot
        if removed:
            self._store.remove_many(KEYS, sorted(removed))
        self._evict()
        if self._keys == 0:
            self._drop_index()  # every entry left is stale
        for domain in (IndexDomain.EVENT, IndexDomain.PROCESSING):
            for bucket, entries in sorted(self._appends[domain].items()):
                if entries:
                    self._append_bucket(domain, bucket, entries)
        meta = KeyGroupMeta(
            self.wm,
            self.pt,
            self.extra,
            tuple({b: tuple(s) for b, s in d.items()} for d in self._buckets),
            self._holds,
            self._event_holds,
            self._hot,
            self._keys,
            self._cold_keys,
            self._batch,
        )
        fresh = self.is_empty() and (self.wm, self.pt) == self._initial
        self._store.put_meta(None if fresh else meta.encode())

    def _evict(self):
        """Moves the least recently touched keys out of the hot set until
        it fits `hot_bytes` (written to the keys table at once)."""
        size = sum(len(v[0]) for v in self._hot.values())
        if size <= self._hot_bytes:
            return
        out = []
        for key in sorted(self._hot, key=lambda k: (self._hot[k][1], k)):
            if size <= self._hot_bytes:
                break
            data, _, cold = self._hot.pop(key)
            out.append((key, data))
            self._cold_keys += not cold
            size -= len(data)
        self._store.put_many(KEYS, out)

    def _drop_index(self):
        for domain in (IndexDomain.EVENT, IndexDomain.PROCESSING):
            names = [_due_key(domain, b, c) for b, s in self._buckets[domain].items() for c in range(s.chunks)]
            if names:
                self._store.remove_many(DUE, names)
            self._buckets[domain].clear()
            self._appends[domain].clear()

    def _append_bucket(self, domain, bucket, entries):
        summary = self._buckets[domain].get(bucket)
        if summary is None:
            summary = _Bucket(0, min(t for t, _ in entries), 0)
        else:
            summary = summary._replace(earliest=min(summary.earliest, min(t for t, _ in entries)))
            if summary.last_len < CHUNK:
                last = summary.chunks - 1
                (data,) = self._store.get_many(DUE, [_due_key(domain, bucket, last)])
                entries = (pickle.loads(data) if data is not None else []) + entries
                summary = summary._replace(chunks=last, last_len=0)
        self._write_bucket(domain, bucket, entries, summary)

    def _write_bucket(self, domain, bucket, entries, summary):
        """Stores `entries` (not empty) as chunks from `summary.chunks` on."""
        chunks, items = summary.chunks, []
        for start in range(0, len(entries), CHUNK):
            part = entries[start : start + CHUNK]
            items.append((_due_key(domain, bucket, chunks), pickle.dumps(part, protocol=pickle.HIGHEST_PROTOCOL)))
            chunks += 1
        self._store.put_many(DUE, items)
        self._buckets[domain][bucket] = _Bucket(chunks, summary.earliest, len(part))
