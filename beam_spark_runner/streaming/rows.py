"""The one row shape every operator of a streaming query reads and writes.

A row is a `QueryRow` (a named tuple in `FIELDS` order, Spark schema
`SCHEMA`); its `kind` says what it carries:

* DATA: `payload` holds encoded elements for `dest`: a block (runs of
  encoded elements) for a destination read without a user key, or, inside
  an operator, one element with its nested-encoded `key` and key-group `kg`
  for a keyed destination (what `unpacked` makes of KEYED rows); `seq`
  orders data within a batch: the index of the source event it stems from
  (operators handle each `seq` as its own bundle, in order);
* KEYED: the elements of one keyed destination, key-group and `seq`, each
  with its key (`keyed`; `unpacked` gives them back as DATA rows, in
  order). Between operators keyed data travels this way, many elements to a
  row: every row Spark hands a Python operator costs it a conversion per
  column (about 9 us a row in transformWithState), so one row per element
  cost more than the operators' own work per element;
* CONTROL: addressed to one keyed operator and key-group; `payload` is the
  JSON list of time steps `[[seq, input watermark, processing time], ...]`
  (microseconds) the operator applies in this batch: data rows up to a
  step's `seq` are processed before that step; in a batch of a draining
  pipeline, `{"steps": [...], "draining": true}` (see `Control`);
* REPORT: a keyed operator's end-of-batch hold for one key-group (JSON
  payload, see `Report`), sent to the driver;
* METRICS: serialized MonitoringInfos of one operator invocation (`payload`);
* STATUS: the batch's planned offset (JSON in `payload`), for the driver;
* FINALIZE: a bundle's finalization callbacks (pickled (stage name,
  pickled callbacks) in `payload`), which the driver runs once the batch
  is durable (streaming/checkpoint_coordinator.py);
* EVENT_TIMES: what one task of a Spark data source read: the newest event
  time per source partition (`event_times`), for the source's watermark
  (streaming/source_watermarks.py).

Operators consume the DATA, KEYED and CONTROL rows addressed to them and
pass every other row through unchanged, so the query is one chain and each
stateful operator appears exactly once in Spark's plan.

Rows live for one micro-batch (Spark's shuffle between operators): none is
kept in a checkpoint, so the layout has no format version.
"""

import json
import struct
import zlib
from itertools import accumulate
from typing import Iterable, List, NamedTuple, Optional, Sequence, Tuple

from beam_spark_runner.plans import Dest, DestKind
from beam_spark_runner.streaming.key_groups import labels as key_group_labels


class QueryRow(NamedTuple):
    """One row of the streaming query (see the module's docstring)."""

    kind: int
    dest: str
    kg: int
    key: Optional[bytes]
    payload: bytes
    seq: Optional[int]
    batch: Optional[int]


FIELDS = QueryRow._fields
SCHEMA = "kind int, dest string, kg int, key binary, payload binary, seq long, batch long"
SCHEMA_NAMES = tuple(field.split()[0] for field in SCHEMA.split(","))

DATA, CONTROL, REPORT, METRICS, STATUS, FINALIZE, KEYED, EVENT_TIMES = 0, 1, 2, 3, 4, 5, 6, 7
DATA_KINDS = (DATA, KEYED)

# Encoded bytes of elements (and keys) per KEYED row, at most (one element
# larger than this gets a row of its own): Spark moves a row as one value.
KEYED_ROW_BYTES = 1 << 20
# Encoded bytes of the elements of a DATA row a grouping writes, about (it
# cuts its output after the element that reaches this).
DATA_ROW_BYTES = 1 << 20
_U32 = struct.Struct(">I")

STATUS_DEST = "status"


def dest_text(dest: Dest) -> str:
    """A destination as a row's `dest` column holds it: "<kind>:<name>"."""
    return "%s:%s" % (dest.kind.value, dest.name)


def parse_dest(text: str) -> Dest:
    """The data destination a row's `dest` column names (`dest_text`'s inverse)."""
    kind, sep, name = text.partition(":")
    if not sep:
        raise ValueError("not a data destination: %r" % text)
    return Dest(DestKind(kind), name)


def control_dest(operator_name: str) -> str:
    return "control:" + operator_name


def report_dest(operator_name: str) -> str:
    return _REPORT + operator_name


def operator_of_report(dest: str) -> str:
    """The operator a REPORT row's `dest` names."""
    if not dest.startswith(_REPORT):
        raise ValueError("not a report destination: %r" % dest)
    return dest[len(_REPORT) :]


_REPORT = "report:"


def data(dest, payload, seq, kg=0, key=None) -> QueryRow:
    return QueryRow(DATA, dest, kg, key, payload, seq, None)


def keyed(dest, kg, seq, keys_and_elements: Sequence[bytes]) -> List[QueryRow]:
    """KEYED rows for `dest`, key-group `kg` and `seq`: `keys_and_elements`
    alternates each element's encoded key and its encoding. Each row holds
    consecutive elements up to `KEYED_ROW_BYTES`; its payload is the count
    n, then 2n lengths (key, element, key, ...), each a big-endian uint32,
    then the bytes they measure."""
    rows, start, size = [], 0, 0
    for i in range(0, len(keys_and_elements), 2):
        entry = len(keys_and_elements[i]) + len(keys_and_elements[i + 1])
        if size and size + entry > KEYED_ROW_BYTES:
            rows.append(_keyed_row(dest, kg, seq, keys_and_elements[start:i]))
            start, size = i, 0
        size += entry
    if start < len(keys_and_elements):
        rows.append(_keyed_row(dest, kg, seq, keys_and_elements[start:]))
    return rows


def _keyed_row(dest, kg, seq, parts):
    header = struct.pack(">%dI" % (len(parts) + 1), len(parts) // 2, *map(len, parts))
    return QueryRow(KEYED, dest, kg, None, header + b"".join(parts), seq, None)


def keyed_entries(payload: bytes):
    """The (key, element) pairs of a KEYED row's payload, in order."""
    (count,) = _U32.unpack_from(payload, 0)
    lengths = struct.unpack_from(">%dI" % (2 * count), payload, 4)
    ends = list(accumulate(lengths, initial=4 * (2 * count + 1)))
    return [(payload[ends[i] : ends[i + 1]], payload[ends[i + 1] : ends[i + 2]]) for i in range(0, 2 * count, 2)]


def unpacked(rows: Iterable[tuple]) -> List[QueryRow]:
    """`rows` as `QueryRow`s, each KEYED row replaced by one DATA row per
    element it holds (with its key), in order."""
    out = []
    for row in rows:
        if row[0] == KEYED:
            dest, kg, seq = row[1], row[2], row[5]
            out.extend(QueryRow(DATA, dest, kg, key, element, seq, None) for key, element in keyed_entries(row[4]))
        else:
            out.append(row if type(row) is QueryRow else QueryRow._make(row))
    return out


def element_count(rows: Iterable[tuple]) -> int:
    """The data rows among `rows`, a KEYED row counting the elements it
    holds (what operators report as rows in and out)."""
    count = 0
    for row in rows:
        if row[0] == DATA:
            count += 1
        elif row[0] == KEYED:
            count += _U32.unpack_from(row[4], 0)[0]
    return count


def control(operator_name, kg, batch, steps, draining=False) -> QueryRow:
    payload = {"steps": steps, "draining": True} if draining else steps
    return QueryRow(CONTROL, control_dest(operator_name), kg, None, json.dumps(payload).encode(), None, batch)


class Report(NamedTuple):
    """A keyed operator's end-of-batch report for one key-group: `hold`
    (micros; None: nothing held), `event_hold` (the part of it not due to
    processing-time timers), `wake` (the processing time the key-group
    next has work at; None: none), and when the operator is read at a
    watermark percentile below 1, `summary` and `event_summary`: the
    TimestampSummary JSON of all its holds (None: not summarized)."""

    hold: Optional[int]
    event_hold: Optional[int]
    wake: Optional[int] = None
    summary: Optional[str] = None
    event_summary: Optional[str] = None


def report(operator_name, kg, batch, hold, event_hold, wake=None, summary=None, event_summary=None) -> QueryRow:
    payload = Report(hold, event_hold, wake, summary, event_summary)._asdict()
    return QueryRow(REPORT, report_dest(operator_name), kg, None, json.dumps(payload).encode(), None, batch)


def parse_report(payload) -> Report:
    decoded = json.loads(payload)
    return Report(
        decoded["hold"],
        decoded["event_hold"],
        decoded.get("wake"),
        decoded.get("summary"),
        decoded.get("event_summary"),
    )


def metrics(operator_name, payload) -> QueryRow:
    return QueryRow(METRICS, operator_name, 0, None, payload, None, None)


def finalize(operator_name, payload) -> QueryRow:
    return QueryRow(FINALIZE, operator_name, 0, None, payload, None, None)


def event_times(source: str, newest_by_partition) -> QueryRow:
    """What a task of Spark source `source` read: {partition: newest event
    time, micros}."""
    payload = json.dumps({"source": source, "newest": newest_by_partition}, sort_keys=True).encode()
    return QueryRow(EVENT_TIMES, "event_times:" + source, 0, None, payload, None, None)


def parse_event_times(payload) -> Tuple[str, dict]:
    """(source, {partition: newest event time}) of an EVENT_TIMES row."""
    decoded = json.loads(payload)
    return decoded["source"], {p: int(t) for p, t in decoded["newest"].items()}


def status(batch, payload) -> QueryRow:
    return QueryRow(STATUS, STATUS_DEST, 0, None, payload, None, batch)


def key_group(encoded_key: bytes, key_groups: int) -> int:
    """The `kg` of a key: deterministic across processes (unlike hash() of
    bytes), and one key-group per Spark partition (see key_groups.py)."""
    return key_group_labels(key_groups)[zlib.crc32(encoded_key) % key_groups]


def input_partitions(rows, partitions):
    """The source's rows split into `partitions` lists. Keyed data rows (KEYED,
    and DATA with a key) stay
    in order with every other row of their key-group, in one partition: a
    keyed operator then sees one key's elements of a source event in the
    order the event lists them (TestStream.add_elements([...]) for one key),
    whatever order Spark's shuffle fetches partitions in. Other rows are
    dealt round-robin, to spread stateless work."""
    out = [[] for _ in range(partitions)]
    spread = 0
    for row in rows:
        if row.kind == KEYED or (row.kind == DATA and row.key is not None):
            out[row.kg % partitions].append(row)
        else:
            out[spread % partitions].append(row)
            spread += 1
    return out


class Control(NamedTuple):
    """What a CONTROL row tells a keyed operator: the batch's time steps
    [(seq, input watermark, processing time[, {side input dest: watermark}])],
    and whether the pipeline is draining (its sources read nothing more;
    splittable DoFns truncate their restrictions)."""

    steps: Tuple[tuple, ...]
    draining: bool = False


def parse_control(payload) -> Control:
    decoded = json.loads(payload)
    if isinstance(decoded, dict):
        return Control(tuple(tuple(step) for step in decoded["steps"]), bool(decoded.get("draining")))
    return Control(tuple(tuple(step) for step in decoded))
