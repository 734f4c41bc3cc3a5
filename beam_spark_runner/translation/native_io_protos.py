"""The runner's Spark-native text read and file write, found in a pipeline
proto (batch).

`native_io_overrides.py` replaces `ReadFromText` and a bounded `WriteImpl`
while they are still Python transform objects (`SparkRunner.run_pipeline`).
A pipeline that reaches the job service is a proto already, so the same
replacement is made here, on the proto, with the same configs and URNs:

- a `beam:transform:read:v1` whose bounded source is a `_TextSource` with
  default record handling (`native_io_overrides.text_source_config`)
  becomes a READ_TEXT_URN leaf;
- the composite Beam's `WriteImpl` expands to with a runner-chosen shard
  count (its steps, and a WriteBundles ParDo whose DoFn is Beam's
  `_WriteBundleDoFn`) becomes a WRITE_FILES_URN leaf over the same sink.

Anything else, including a source or sink that cannot be unpickled here (a
class only the client has), keeps Beam's expansion. The result is the same
either way; only the speed differs.
"""

from beam_spark_runner.worker.beam_internals import pickler
from apache_beam.portability import common_urns, python_urns
from apache_beam.portability.api import beam_runner_api_pb2

from beam_spark_runner.worker.beam_internals import is_write_bundle_dofn
from beam_spark_runner.translation.native_io_overrides import (
    READ_TEXT_URN,
    WRITE_FILES_URN,
    WriteFilesConfig,
    encode_payload,
    text_source_config,
)

# The steps of WriteImpl's expansion when the runner picks the shard count.
_WRITE_STEPS = frozenset(
    [
        "DoOnce",
        "InitializeWrite",
        "WindowInto(WindowIntoFn)",
        "WriteBundles",
        "Pair",
        "GroupByKey",
        "Extract",
        "PreFinalize",
        "FinalizeWrite",
    ]
)
_BOUNDED = beam_runner_api_pb2.IsBounded.BOUNDED


def _unpickled(payload):
    try:
        return pickler.loads(payload)
    except Exception:  # noqa: BLE001 -- a class this process lacks: keep Beam's expansion
        return None


def _text_read(transform):
    payload = beam_runner_api_pb2.ReadPayload.FromString(transform.spec.payload)
    if payload.is_bounded != _BOUNDED or payload.source.urn != python_urns.PICKLED_SOURCE:
        return None
    return text_source_config(_unpickled(payload.source.payload))


def _write_sink(components, transform):
    steps = {}
    for sub in transform.subtransforms:
        child = components.transforms[sub]
        steps[child.unique_name.rsplit("/", 1)[-1]] = child
    if set(steps) != _WRITE_STEPS or len(transform.inputs) != 1:
        return None
    (main,) = transform.inputs.values()
    if components.pcollections[main].is_bounded != _BOUNDED:
        return None
    write = steps["WriteBundles"]
    if write.spec.urn != common_urns.primitives.PAR_DO.urn:
        return None
    do_fn = beam_runner_api_pb2.ParDoPayload.FromString(write.spec.payload).do_fn
    if do_fn.urn != python_urns.PICKLED_DOFN_INFO:
        return None
    info = _unpickled(do_fn.payload)
    fn = info[0] if isinstance(info, tuple) and info else None
    if not is_write_bundle_dofn(fn):
        return None
    sink = getattr(fn, "sink", None)
    if sink is None or getattr(sink, "num_shards", 0) != 0:
        return None
    return sink


def _drop_subtree(components, transform_id):
    for sub in list(components.transforms[transform_id].subtransforms):
        _drop_subtree(components, sub)
        del components.transforms[sub]


def _make_leaf(components, transform_id, urn, payload):
    transform = components.transforms[transform_id]
    _drop_subtree(components, transform_id)
    del transform.subtransforms[:]
    transform.spec.CopyFrom(beam_runner_api_pb2.FunctionSpec(urn=urn, payload=payload))


def native_io_in_proto(pipeline):
    """A copy of `pipeline` with eligible text reads and file writes as the
    runner's Spark-native transforms (batch only)."""
    rewritten = beam_runner_api_pb2.Pipeline()
    rewritten.CopyFrom(pipeline)
    components = rewritten.components
    for tid in sorted(components.transforms):
        if tid not in components.transforms:
            continue  # inside a subtree already replaced
        transform = components.transforms[tid]
        if transform.spec.urn == common_urns.deprecated_primitives.READ.urn:
            config = _text_read(transform)
            if config is not None:
                _make_leaf(components, tid, READ_TEXT_URN, encode_payload(config))
        elif transform.subtransforms and transform.unique_name.rsplit("/", 1)[-1] == "WriteImpl":
            sink = _write_sink(components, transform)
            if sink is not None:
                _make_leaf(components, tid, WRITE_FILES_URN, encode_payload(WriteFilesConfig(sink)))
    return rewritten
