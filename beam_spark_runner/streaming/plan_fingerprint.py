"""What a streaming checkpoint's state belongs to, and the check that a
restarted pipeline still matches it (as Flink records operator UIDs).

Spark keeps each `transformWithState` operator's state by its position in
the query, and the runner's offsets and hold reports name keyed operators
by plan name; the key-group count decides which key-group (and so which
state) a Beam key lands in. A restart whose plan differs in any of these
would run old state under other operators. So the checkpoint records a
`PlanFingerprint` when a run first starts, and a later run with the same
checkpoint must have the same one, or it is refused with the operators that
differ named.

What is recorded, per keyed operator in query order: its name, kind, the
row destinations it reads (what its waiting elements are addressed to),
the ids of the state it keeps (user state and timer families of the stage's
stateful DoFns; a GroupByKey's WindowFn, accumulation mode and lifted
combine, which decide the shape of its panes' state) and, since format
version 2, the coders its state is written with (`coders`: its input's
elements and keys, side inputs, user state cells and timers; for a
GroupByKey, its input as its producers encode it): a coder Beam infers differently (a changed
type hint, a lambda's signature) would read the old state's bytes wrongly,
deep inside a micro-batch. Stateless operators hold nothing between
micro-batches, so they may change freely, as may the code inside any DoFn.

A coder is described by its structure, not its bytes: URNs and component
coders, a pickled Python coder by its class, a Java-serialized coder by its
class (streaming/java_serialized.py), a row coder by its fields (schema ids
are drawn anew per pipeline construction, in Java's SchemaCoder too), other
payloads by their digest. A record that described a Java-serialized coder
by its digest (written before) matches any Java-serialized coder there. A version 1 record (no coders) is accepted without the coder
check, and replaced by the current version once it matched.
"""

import dataclasses
import hashlib
import re
import json
from typing import Optional, Tuple

from apache_beam.coders import coders as beam_coders
from apache_beam.portability import common_urns, python_urns
from apache_beam.portability.api import beam_fn_api_pb2, beam_runner_api_pb2, schema_pb2

from beam_spark_runner.errors import CheckpointMismatchError
from beam_spark_runner.plans import Dest, OperatorKind, StreamingPlan
from beam_spark_runner.streaming import java_serialized
from beam_spark_runner.streaming import rows as R

FORMAT_VERSION = 2
_JAVA_CODER_URN = "beam:coders:javasdk:0.1"  # Beam Java's own coders, Java-serialized
READABLE_VERSIONS = (1, 2)  # 1: written before coders were recorded
FILE_NAME = "plan.json"


@dataclasses.dataclass(frozen=True)
class OperatorPrint:
    name: str
    kind: str
    reads: Tuple[str, ...]
    state: Tuple[str, ...]
    # (what is encoded with it, coder description), sorted; None: not
    # recorded (a version 1 record).
    coders: Optional[Tuple[Tuple[str, str], ...]] = None

    def to_json(self):
        d = {"name": self.name, "kind": self.kind, "reads": list(self.reads), "state": list(self.state)}
        if self.coders is not None:
            d["coders"] = [list(pair) for pair in self.coders]
        return d

    @classmethod
    def from_json(cls, d):
        coders = d.get("coders")
        return cls(
            d["name"],
            d["kind"],
            tuple(d["reads"]),
            tuple(d["state"]),
            None if coders is None else tuple((str(what), str(coder)) for what, coder in coders),
        )


@dataclasses.dataclass(frozen=True)
class PlanFingerprint:
    key_groups: int
    sources: Tuple[str, ...]  # TestStream transform ids, "impulse" when Impulse feeds the query
    operators: Tuple[OperatorPrint, ...]  # keyed operators, in query order
    format_version: int = FORMAT_VERSION

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "format_version": self.format_version,
                "key_groups": self.key_groups,
                "sources": list(self.sources),
                "operators": [op.to_json() for op in self.operators],
            },
            indent=1,
            sort_keys=True,
        ).encode()

    @classmethod
    def from_json(cls, data: bytes, where: str) -> "PlanFingerprint":
        """Parses a recorded fingerprint; `where` names the file in errors."""
        try:
            d = json.loads(data.decode())
            version = d["format_version"]
            if version not in READABLE_VERSIONS:
                raise CheckpointMismatchError(
                    "%s has plan format version %r; this runner reads versions %s"
                    % (where, version, ", ".join(map(str, READABLE_VERSIONS)))
                )
            return cls(
                key_groups=int(d["key_groups"]),
                sources=tuple(d["sources"]),
                operators=tuple(OperatorPrint.from_json(o) for o in d["operators"]),
                format_version=version,
            )
        except CheckpointMismatchError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise CheckpointMismatchError(
                "%s is not a readable plan record (%s: %s); the checkpoint is damaged" % (where, type(e).__name__, e)
            ) from e

    def differences(self, recorded: "PlanFingerprint"):
        """Why a checkpoint recorded as `recorded` cannot run under this
        plan: one line per difference, empty when it can."""
        problems = []
        if recorded.key_groups != self.key_groups:
            problems.append(
                "the checkpoint's state is spread over %d key-groups, this run has %d (set --parallelism=%d)"
                % (recorded.key_groups, self.key_groups, recorded.key_groups)
            )
        if recorded.sources != self.sources:
            problems.append("sources: checkpoint %s, this run %s" % (list(recorded.sources), list(self.sources)))
        old = {op.name: op for op in recorded.operators}
        new = {op.name: op for op in self.operators}
        for name in old.keys() - new.keys():
            problems.append("keyed operator %s is in the checkpoint but not in this pipeline" % name)
        for name in new.keys() - old.keys():
            problems.append("keyed operator %s is new in this pipeline (not in the checkpoint)" % name)
        for name in old.keys() & new.keys():
            for field in ("kind", "reads", "state"):
                was, now = getattr(old[name], field), getattr(new[name], field)
                if was != now:
                    problems.append(
                        "keyed operator %s: %s was %s, is now %s" % (name, field, _listed(was), _listed(now))
                    )
            if old[name].coders is not None and new[name].coders is not None:
                problems.extend(_coder_differences(name, dict(old[name].coders), dict(new[name].coders)))
        common_old = [op.name for op in recorded.operators if op.name in new]
        common_new = [op.name for op in self.operators if op.name in old]
        if not problems and common_old != common_new:
            problems.append("keyed operators run in another order: was %s, is now %s" % (common_old, common_new))
        return problems


def _listed(value):
    return list(value) if isinstance(value, tuple) else value


_JAVA_CODER_HEAD = re.compile(re.escape(_JAVA_CODER_URN) + r"[#:][^\[\],]+")


def _same_coder(was, now):
    if was == now:
        return True
    if was is None or now is None or (_JAVA_CODER_URN + "#") not in was:
        return False
    return _JAVA_CODER_HEAD.sub(_JAVA_CODER_URN, was) == _JAVA_CODER_HEAD.sub(_JAVA_CODER_URN, now)


def _coder_differences(name, was, now):
    problems = []
    for what in sorted(was.keys() | now.keys()):
        if not _same_coder(was.get(what), now.get(what)):
            problems.append(
                "keyed operator %s: the coder of %s was %s, is now %s (its checkpointed state was encoded "
                "with the old one: declare the type the first run had, e.g. with .with_output_types)"
                % (name, what, was.get(what, "absent"), now.get(what, "absent"))
            )
    return problems


def fingerprint(plan: StreamingPlan, key_groups: int) -> PlanFingerprint:
    components = beam_runner_api_pb2.Components.FromString(plan.components)
    sources = (
        tuple(s.name for s in plan.sources)
        + (("impulse",) if plan.impulse_dests else ())
        + tuple(s.name for s in plan.spark_sources)
    )
    # Each stage's descriptor, parsed once for all that reads it here.
    descriptors = {
        op.name: beam_fn_api_pb2.ProcessBundleDescriptor.FromString(op.stage.descriptor)
        for op in plan.operators
        if op.stage is not None
    }
    writers = _writers(plan, components, descriptors)
    return PlanFingerprint(
        key_groups=key_groups,
        sources=sources,
        operators=tuple(
            OperatorPrint(
                op.name,
                op.kind.value + ("+stable_input" if op.stable_input else ""),
                tuple(R.dest_text(d) for d in op.inputs),
                _state_of(op, components, descriptors.get(op.name)),
                _coders_of(op, components, descriptors.get(op.name), writers),
            )
            for op in plan.operators
            if op.is_keyed
        ),
    )


def _writers(plan, components, descriptors):
    """{row destination: descriptions of the SDK-side coders its writers
    encode elements with} (a GroupByKey's own coders are the runner's
    opaque bytes: what its state holds is what its producers wrote)."""
    described = _CoderDescriber(components)
    out = {}
    for source in plan.sources:
        for _, dest, coder_id in source.outputs:
            out.setdefault(R.dest_text(dest), set()).add(described(coder_id))
    for spark_source in plan.spark_sources:
        out.setdefault(R.dest_text(spark_source.dest), set()).add(described(spark_source.coder_id))
    for op in plan.operators:
        if op.stage is None:
            continue
        in_stage = _CoderDescriber(descriptors[op.name])
        for port in op.stage.outputs:
            out.setdefault(R.dest_text(Dest.written_to(port.buffer)), set()).add(in_stage(port.coder_id))
    return out


def _coders_of(op, components, descriptor, writers):
    """(what it encodes, coder description) of each coder whose bytes the
    operator's state holds, sorted. What is named by ids that stay the same
    when code moves (PCollection and transform ids, state and timer ids)."""
    if op.kind == OperatorKind.GROUP:
        inputs = [R.dest_text(d) for d in op.inputs]
        return tuple(
            sorted(
                (
                    "grouped input" if len(inputs) == 1 else "grouped input %s" % dest,
                    " | ".join(sorted(writers.get(dest, ()))),
                )
                for dest in inputs
            )
        )
    stage = op.stage
    described = _CoderDescriber(descriptor)
    named = {}
    for port in stage.inputs:
        named["input %s" % port.buffer.name] = port.coder_id
    for side in stage.side_inputs:
        named["side input %s" % side.pcollection] = side.coder_id
    for transform_id, transform in descriptor.transforms.items():
        if transform.spec.urn != common_urns.primitives.PAR_DO.urn:
            continue
        payload = beam_runner_api_pb2.ParDoPayload.FromString(transform.spec.payload)
        for state_id, spec in payload.state_specs.items():
            for coder_id in _state_spec_coders(spec):
                named["state %s/%s" % (transform_id, state_id)] = coder_id
        for timer_id, spec in payload.timer_family_specs.items():
            named["timer %s/%s" % (transform_id, timer_id)] = spec.timer_family_coder_id
    in_components = _CoderDescriber(components)
    return tuple(
        sorted(
            (what, described(coder_id) if coder_id in descriptor.coders else in_components(coder_id))
            for what, coder_id in named.items()
        )
    )


def _state_spec_coders(spec):
    which = spec.WhichOneof("spec")
    if which is None:
        return []
    inner = getattr(spec, which)
    return [
        getattr(inner, field)
        for field in ("coder_id", "element_coder_id", "key_coder_id", "value_coder_id", "accumulator_coder_id")
        if getattr(inner, field, "")
    ]


class _CoderDescriber:
    """Coder ids of one proto's `coders` map -> a description that is the
    same for the same coder whatever process built the pipeline."""

    def __init__(self, owner):
        self._coders = owner.coders
        self._done = {}

    def __call__(self, coder_id):
        if coder_id not in self._done:
            coder = self._coders.get(coder_id)
            if coder is None:
                return "unknown coder %s" % coder_id
            parts = [self(c) for c in coder.component_coder_ids]
            urn, payload = coder.spec.urn, coder.spec.payload
            if urn == python_urns.PICKLED_CODER:
                head = "python:%s" % _coder_class(payload)
            elif urn == common_urns.coders.ROW.urn:
                head = "row:%s" % _row_fields(payload)
            elif urn == _JAVA_CODER_URN and java_serialized.top_class(payload) is not None:
                head = "%s:%s" % (urn, java_serialized.top_class(payload))
            elif payload:
                head = "%s#%s" % (urn, hashlib.sha256(payload).hexdigest()[:12])
            else:
                head = urn
            self._done[coder_id] = head + ("[%s]" % ", ".join(parts) if parts else "")
        return self._done[coder_id]


def _coder_class(payload):
    try:
        coder = beam_coders.deserialize_coder(payload)
    except Exception:  # noqa: BLE001 -- an unloadable coder is still told apart by its bytes
        return "unloadable#%s" % hashlib.sha256(payload).hexdigest()[:12]
    cls = type(coder)
    return "%s.%s" % (cls.__module__, cls.__qualname__)


def _row_fields(payload):
    schema = schema_pb2.Schema.FromString(payload)
    _clear_ids(schema)
    return hashlib.sha256(schema.SerializeToString(deterministic=True)).hexdigest()[:12]


def _clear_ids(schema):
    schema.id = ""
    for field in schema.fields:
        _clear_field_type_ids(field.type)


def _clear_field_type_ids(field_type):
    which = field_type.WhichOneof("type_info")
    if which == "row_type":
        _clear_ids(field_type.row_type.schema)
    elif which in ("array_type", "iterable_type"):
        _clear_field_type_ids(getattr(field_type, which).element_type)
    elif which == "map_type":
        _clear_field_type_ids(field_type.map_type.key_type)
        _clear_field_type_ids(field_type.map_type.value_type)
    elif which == "logical_type":
        if field_type.logical_type.HasField("representation"):
            _clear_field_type_ids(field_type.logical_type.representation)


def _state_of(op, components, descriptor):
    if op.kind == OperatorKind.GROUP:
        strategy = components.windowing_strategies[op.group.windowing_strategy_id]
        mode = beam_runner_api_pb2.AccumulationMode.Enum.Name(strategy.accumulation_mode)
        return (
            "window_fn:%s" % strategy.window_fn.urn,
            "accumulation:%s" % mode,
            "lifted_combine:%s" % ("yes" if op.group.combine is not None else "no"),
        )
    ids = []
    for transform_id, transform in descriptor.transforms.items():
        if transform.spec.urn != common_urns.primitives.PAR_DO.urn:
            continue
        payload = beam_runner_api_pb2.ParDoPayload.FromString(transform.spec.payload)
        ids.extend("state:%s/%s" % (transform_id, s) for s in payload.state_specs)
        ids.extend("timer:%s/%s" % (transform_id, t) for t in payload.timer_family_specs)
    return tuple(sorted(ids))
