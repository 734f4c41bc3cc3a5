"""The one row shape every operator of a streaming query reads and writes.

A row is a tuple in `FIELDS` order (Spark schema `SCHEMA`):

* DATA: `payload` holds encoded elements for `dest` (a block, or one element
  with its nested-encoded `key` and key-group `kg` when `dest` is keyed);
  `seq` orders data within a batch: the index of the source event it stems
  from (operators handle each `seq` as its own bundle, in order);
* CONTROL: addressed to one keyed operator and key-group; `payload` is the
  JSON list of time steps `[[seq, input watermark, processing time], ...]`
  (microseconds) the operator applies in this batch: data rows up to a
  step's `seq` are processed before that step; in a batch of a draining
  pipeline, `{"steps": [...], "draining": true}` (see `Control`);
* REPORT: a keyed operator's end-of-batch hold for one key-group (JSON
  payload `{"hold": micros or null}`), sent to the driver;
* METRICS: serialized MonitoringInfos of one operator invocation (`payload`);
* STATUS: the batch's planned offset (JSON in `payload`), for the driver;
* FINALIZE: a bundle's finalization callbacks (pickled (stage name,
  pickled callbacks) in `payload`), which the driver runs once the batch
  is durable (streaming/checkpoint_coordinator.py).

Operators consume the DATA and CONTROL rows addressed to them and pass every
other row through unchanged, so the query is one chain and each stateful
operator appears exactly once in Spark's plan.
"""

import json
import zlib
from typing import NamedTuple, Tuple

from beam_spark_runner.streaming.key_groups import labels as key_group_labels

FIELDS = ("kind", "dest", "kg", "key", "payload", "seq", "batch")
SCHEMA = "kind int, dest string, kg int, key binary, payload binary, seq long, batch long"

DATA, CONTROL, REPORT, METRICS, STATUS, FINALIZE = 0, 1, 2, 3, 4, 5

STATUS_DEST = "status"


def control_dest(operator_name: str) -> str:
    return "control:" + operator_name


def report_dest(operator_name: str) -> str:
    return "report:" + operator_name


def data(dest, payload, seq, kg=0, key=None):
    return (DATA, dest, kg, key, payload, seq, None)


def control(operator_name, kg, batch, steps, draining=False):
    payload = {"steps": steps, "draining": True} if draining else steps
    return (CONTROL, control_dest(operator_name), kg, None, json.dumps(payload).encode(), None, batch)


def report(operator_name, kg, batch, hold, event_hold, wake=None):
    """`event_hold`: the part of `hold` not due to processing-time timers;
    `wake`: the processing time the key-group next has work at (None: none)."""
    payload = {"hold": hold, "event_hold": event_hold, "wake": wake}
    return (REPORT, report_dest(operator_name), kg, None, json.dumps(payload).encode(), None, batch)


def metrics(operator_name, payload):
    return (METRICS, operator_name, 0, None, payload, None, None)


def finalize(operator_name, payload):
    return (FINALIZE, operator_name, 0, None, payload, None, None)


def status(batch, payload):
    return (STATUS, STATUS_DEST, 0, None, payload, None, batch)


def key_group(encoded_key: bytes, key_groups: int) -> int:
    """The `kg` of a key: deterministic across processes (unlike hash() of
    bytes), and one key-group per Spark partition (see key_groups.py)."""
    return key_group_labels(key_groups)[zlib.crc32(encoded_key) % key_groups]


def input_partitions(rows, partitions):
    """The source's rows split into `partitions` lists. Keyed DATA rows stay
    in order with every other row of their key-group, in one partition: a
    keyed operator then sees one key's elements of a source event in the
    order the event lists them (TestStream.add_elements([...]) for one key),
    whatever order Spark's shuffle fetches partitions in. Other rows are
    dealt round-robin, to spread stateless work."""
    out = [[] for _ in range(partitions)]
    spread = 0
    for row in rows:
        if row[0] == DATA and row[3] is not None:
            out[row[2] % partitions].append(row)
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
