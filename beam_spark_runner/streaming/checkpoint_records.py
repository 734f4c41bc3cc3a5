"""The records of the checkpoint coordinator (streaming/checkpoint_coordinator.py):
typed, versioned, stored as JSON under the checkpoint's `beam/` directory.
No Spark, no Beam.

    beam/pending/<epoch>.json      PendingRecord: what a batch releases once
                                   it is durable (written before Spark's
                                   commit log entry for the batch)
    beam/checkpoints/<epoch>.json  CompletedCheckpoint: the batch is durable
                                   (written after Spark's commit log entry)
"""

import base64
import dataclasses
import json
from typing import Tuple

FORMAT_VERSION = 1
PENDING_DIR = "beam/pending"
COMPLETED_DIR = "beam/checkpoints"


class CheckpointRecordError(ValueError):
    """A record in the checkpoint cannot be read; the message names it."""


def record_name(epoch):
    return "%d.json" % epoch


def epochs_in(names):
    """Epochs of the record files among `names`, ascending (temporary and
    foreign files ignored)."""
    found = []
    for name in names:
        stem, dot, ext = name.partition(".")
        if ext == "json" and stem.isdigit():
            found.append(int(stem))
    return sorted(found)


@dataclasses.dataclass(frozen=True)
class SideEffects:
    """What a batch releases once durable: bundle finalization callbacks,
    each a pickled (stage name, pickled callbacks) pair, opaque here."""

    finalizers: Tuple[bytes, ...] = ()

    def __bool__(self):
        return bool(self.finalizers)

    def plus(self, other: "SideEffects") -> "SideEffects":
        return SideEffects(self.finalizers + other.finalizers)

    def to_json(self):
        return {"finalizers": [base64.b64encode(f).decode() for f in self.finalizers]}

    @classmethod
    def from_json(cls, d):
        return cls(tuple(base64.b64decode(f) for f in d["finalizers"]))


@dataclasses.dataclass(frozen=True)
class PendingRecord:
    epoch: int
    done: bool  # the pipeline finished with this batch
    side_effects: SideEffects
    format_version: int = FORMAT_VERSION

    def to_bytes(self) -> bytes:
        return _dump(
            {"epoch": self.epoch, "done": self.done, "side_effects": self.side_effects.to_json()}, self.format_version
        )

    @classmethod
    def from_bytes(cls, data, where) -> "PendingRecord":
        d = _load(data, where)
        try:
            return cls(int(d["epoch"]), bool(d["done"]), SideEffects.from_json(d["side_effects"]))
        except (KeyError, TypeError, ValueError) as e:
            raise CheckpointRecordError("%s is damaged (%s: %s)" % (where, type(e).__name__, e)) from e


@dataclasses.dataclass(frozen=True)
class CompletedCheckpoint:
    epoch: int
    done: bool
    completed_at_ms: int  # the coordinator's clock
    format_version: int = FORMAT_VERSION

    def to_bytes(self) -> bytes:
        return _dump(
            {"epoch": self.epoch, "done": self.done, "completed_at_ms": self.completed_at_ms}, self.format_version
        )

    @classmethod
    def from_bytes(cls, data, where) -> "CompletedCheckpoint":
        d = _load(data, where)
        try:
            return cls(int(d["epoch"]), bool(d["done"]), int(d["completed_at_ms"]))
        except (KeyError, TypeError, ValueError) as e:
            raise CheckpointRecordError("%s is damaged (%s: %s)" % (where, type(e).__name__, e)) from e


def _dump(fields, version):
    return json.dumps(dict(fields, format_version=version), sort_keys=True).encode()


def _load(data, where):
    try:
        d = json.loads(data.decode())
    except (UnicodeDecodeError, ValueError) as e:
        raise CheckpointRecordError("%s is damaged (not JSON: %s)" % (where, e)) from e
    if not isinstance(d, dict) or d.get("format_version") != FORMAT_VERSION:
        version = d.get("format_version") if isinstance(d, dict) else None
        raise CheckpointRecordError(
            "%s has format version %r; this runner reads version %d" % (where, version, FORMAT_VERSION)
        )
    return d
