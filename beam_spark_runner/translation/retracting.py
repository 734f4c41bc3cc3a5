"""RETRACTING accumulation mode in the pipeline proto: coders and combines.

Under ``accumulation_mode=RETRACTING`` (runner-API value 3) a GroupByKey emits
``(key, values)`` and ``(key, Retraction(values))`` (see
``triggers.retractions``).  Beam's GroupByKey output coder
``KV<K, Iterable<V>>`` cannot carry the wrapper, so ``rewrite_retracting``
changes the proto before Beam's phases plan it.  It is a pure function
(proto in, modified copy out) so the batch and streaming planners share it.

Guarantees of ``rewrite_retracting(p)`` (``p`` itself is never modified; a
pipeline without RETRACTING input to a GroupByKey, CombinePerKey or
CombineValues comes back as an equal copy):

* **GroupByKey** (``beam:transform:group_by_key:v1``) whose input PCollection's
  windowing strategy is RETRACTING: its output PCollection gets a new coder
  ``KV<K, RetractionAware(Iterable<V'>)>``, where ``V'`` is the input's value
  coder ``V`` length-prefixed exactly as Beam's ``TransformContext`` does for
  the data channel (``V' == V`` when the runner knows ``V``'s URN).  New coder
  ids are added; no existing coder is changed.
  Wire contract with the runner-side grouping: Beam's phases see the
  retraction-aware coder as unknown, so the data channel carries each grouped
  value as ``LengthPrefix<RetractionAware(Iterable<V'>)>`` and the runner sees
  it through its "safe" coder as opaque bytes.  A runner that decoded the
  GroupByKey's input values with the safe coder ``S`` of ``V'`` writes a pane
  with ``triggers.retraction_coder.grouped_pane_coder(S)`` (byte-identical,
  because ``S`` and ``V'`` have identical nested encodings).
* **CombinePerKey** (``beam:transform:combine_per_key:v1``) whose input is
  RETRACTING: never lifted.  Its spec is cleared, so Beam's phases expand it
  into its GroupByKey (rewritten as above) and CombineValues (below) instead
  of lifting it.  Why: lifting pre-combines before the shuffle and groups
  accumulators; the grouping would then emit retractions of accumulator panes
  into MergeAccumulators, which cannot consume them.
* **CombineValues** (``beam:transform:combine_grouped_values:v1``, inside such
  a CombinePerKey or applied by the user after a GroupByKey) whose input is
  RETRACTING: its spec is cleared too (so its ParDo runs, not the SDK's own
  combine_grouped_values operation), the ParDo's ``CombineValuesDoFn`` is
  wrapped in ``triggers.retracting_combine.RetractionAwareCombineValuesDoFn``,
  which turns ``(key, Retraction(values))`` into ``(key, Retraction(combined))``,
  and the output PCollection's coder ``KV<K, O>`` becomes
  ``KV<K, RetractionAware(O)>``.
* A RETRACTING CombinePerKey or CombineValues whose expansion is not exactly
  that (one GroupByKey and one CombineValues; one ParDo of Beam's
  ``CombineValuesDoFn``) is rejected with ``UnsupportedPipelineError`` naming
  it, never run unchanged.  So is a CombinePerKey with side inputs (Beam
  expands it into its own lifted form, ``LiftedCombinePerKey``: its merge step
  would receive retractions of accumulator panes).

Downstream of those (``may_hold_retractions``: every PCollection computed
from a RETRACTING grouping's output without passing through a combine):

* **Combines consume retractions.**  Every CombinePerKey (so also
  CombineGlobally) and CombineValues whose input may hold retractions gets
  ``triggers.retractable(fn)`` in place of its CombineFn, in its payload (what
  Beam's lifting phases use), in its CombineValues and in that ParDo's
  ``CombineValuesDoFn``, with the new fn's accumulator coder: invertible
  combiners subtract a retracted input, others keep the live multiset.  So a
  second aggregation over RETRACTING output converges to the right answer
  with a plain ``sum``, ``Count``, ``Mean`` or ``max``.  Retractions are
  expected where the Dataflow model puts them: the value of a KV, or the
  element itself.
* **Coders carry them.**  In such a PCollection's coder, the first coder on
  the value path (the value of a KV, the element of an iterable, the value
  of a windowed value or length prefix) that cannot encode a ``Retraction``
  (a typed coder: ``VarIntCoder``, ``StrUtf8Coder``, ...) is wrapped in
  ``RetractionAwareCoder``: ``KV<K, V>`` becomes
  ``KV<K, RetractionAware(V)>``, a GroupByKey's ``KV<K, Iterable<V>>``
  becomes ``KV<K, Iterable<RetractionAware(V)>>``.  Coders that pickle any
  object (``FastPrimitivesCoder``, ``PickleCoder``) carry them as they are;
  keys and windows are never retractions.
"""

from apache_beam.coders import coders
from beam_spark_runner.worker.beam_internals import pickler
from apache_beam.portability import common_urns, python_urns
from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.runners import pipeline_context
from beam_spark_runner.translation.beam_translations import translations
from apache_beam.transforms import combiners, core

from beam_spark_runner.errors import UnsupportedPipelineError
from triggers.retracting_combine import RetractionAwareCombineValuesDoFn
from triggers.retraction_coder import RetractionAwareCoder
from triggers.retractions import retractable

RETRACTING = 3  # beam_runner_api_pb2.AccumulationMode.RETRACTING

_GBK = common_urns.primitives.GROUP_BY_KEY.urn
_CPK = common_urns.composites.COMBINE_PER_KEY.urn
_CGV = common_urns.combine_components.COMBINE_GROUPED_VALUES.urn
_PAR_DO = common_urns.primitives.PAR_DO.urn
_KV = common_urns.coders.KV.urn
_ITERABLE = common_urns.coders.ITERABLE.urn

_ADVICE = "use GroupByKey followed by a Map with triggers.map_pane(...) instead (see docs/retractions.md)"


def rewrite_retracting(pipeline_proto):
    """Returns a copy of `pipeline_proto` whose RETRACTING GroupByKeys,
    CombinePerKeys and CombineValues carry retractions (see the module
    docstring).

    Raises UnsupportedPipelineError for a RETRACTING CombinePerKey or
    CombineValues whose expansion is not the one this rewrite knows."""
    result = beam_runner_api_pb2.Pipeline()
    result.CopyFrom(pipeline_proto)
    components = result.components

    def retracting(urn):
        return sorted(
            tid for tid, t in components.transforms.items() if t.spec.urn == urn and _retracting_input(components, t)
        )

    combines, combine_values, groups = retracting(_CPK), retracting(_CGV), retracting(_GBK)
    may_hold = may_hold_retractions(components)
    _carry_retractions(components, may_hold, set(combines) | set(combine_values) | set(groups))
    _make_combines_retractable(components, may_hold)
    for tid in combines:
        _expand_combine_per_key(components, tid)
    for tid in combine_values:
        _wrap_combine_values(components, tid)
    if groups:
        _reject_grouped_accumulators(components, groups)
        _rewrite_group_outputs(components, groups)
    if combine_values:
        _rewrite_combine_outputs(components, combine_values)
    return result


def _retracting_input(components, transform):
    if len(transform.inputs) != 1:
        return False
    pcoll = components.pcollections[translations.only_element(transform.inputs.values())]
    return components.windowing_strategies[pcoll.windowing_strategy_id].accumulation_mode == RETRACTING


def _name(components, tid):
    return components.transforms[tid].unique_name or tid


def _descendants(components, tid):
    for sub in components.transforms[tid].subtransforms:
        yield sub
        yield from _descendants(components, sub)


def _rejection(components, tid, kind, urn, why):
    return UnsupportedPipelineError(
        "%s: %s (%s) on a RETRACTING (3) input %s; %s" % (_name(components, tid), kind, urn, why, _ADVICE)
    )


def _expand_combine_per_key(components, tid):
    """Clears the CombinePerKey's spec, so Beam's phases expand it (never lift
    it); its CombineValues is handled by `_wrap_combine_values`."""
    subs = list(_descendants(components, tid))
    gbks = [s for s in subs if components.transforms[s].spec.urn == _GBK]
    cgvs = [s for s in subs if components.transforms[s].spec.urn == _CGV]
    if len(gbks) != 1 or len(cgvs) != 1:
        raise _rejection(
            components,
            tid,
            "CombinePerKey",
            _CPK,
            "has no expansion into one GroupByKey and one CombineValues (found %d and %d)" % (len(gbks), len(cgvs)),
        )
    if not _retracting_input(components, components.transforms[cgvs[0]]):
        raise _rejection(
            components, tid, "CombinePerKey", _CPK, "combines a PCollection whose windowing is not RETRACTING"
        )
    components.transforms[tid].ClearField("spec")


def _wrap_combine_values(components, tid):
    """Clears the CombineValues' spec (so its ParDo runs, not the SDK's
    combine_grouped_values operation) and wraps that ParDo's
    CombineValuesDoFn in RetractionAwareCombineValuesDoFn."""

    def reject(why):
        return _rejection(components, tid, "CombineValues", _CGV, why)

    pardos = [s for s in _descendants(components, tid) if components.transforms[s].spec.urn == _PAR_DO]
    if len(pardos) != 1:
        raise reject("has no expansion into one ParDo (found %d)" % len(pardos))
    pardo = components.transforms[pardos[0]]
    payload = beam_runner_api_pb2.ParDoPayload.FromString(pardo.spec.payload)
    if payload.do_fn.urn != python_urns.PICKLED_DOFN_INFO:
        raise reject("combines with a non-Python DoFn (%s)" % payload.do_fn.urn)
    try:
        dofn_info = pickler.loads(payload.do_fn.payload)
    except Exception as e:  # pylint: disable=broad-except
        raise reject("combines with a DoFn that cannot be loaded here (%s)" % e) from e
    if not isinstance(dofn_info[0], core.CombineValuesDoFn):
        raise reject("combines with %s, not Beam's CombineValuesDoFn" % type(dofn_info[0]).__name__)
    wrapped = (RetractionAwareCombineValuesDoFn(dofn_info[0]),) + tuple(dofn_info[1:])
    payload.do_fn.payload = pickler.dumps(wrapped)
    pardo.spec.payload = payload.SerializeToString()
    components.transforms[tid].ClearField("spec")


def _reject_grouped_accumulators(components, group_ids):
    """A CombinePerKey with side inputs is Beam's LiftedCombinePerKey: a
    ParDo pre-combines, a GroupByKey groups accumulators, `_FinishCombine`
    merges them. Under RETRACTING its merge would get Retraction(accumulators)."""
    finish_combine = getattr(combiners, "_FinishCombine", None)
    outputs = {translations.only_element(components.transforms[tid].outputs.values()) for tid in group_ids}
    for tid, t in components.transforms.items():
        if t.spec.urn != _PAR_DO or not outputs.intersection(t.inputs.values()):
            continue
        payload = beam_runner_api_pb2.ParDoPayload.FromString(t.spec.payload)
        if finish_combine is None or payload.do_fn.urn != python_urns.PICKLED_DOFN_INFO:
            continue
        try:
            dofn = pickler.loads(payload.do_fn.payload)[0]
        except Exception:  # pylint: disable=broad-except
            continue  # cannot inspect here; its own code will see the Retraction
        if isinstance(dofn, finish_combine):
            raise _rejection(
                components,
                tid,
                "a lifted CombinePerKey (CombinePerKey with side inputs)",
                _PAR_DO,
                "merges grouped accumulators, which cannot be retracted",
            )


def _rewrite_group_outputs(components, group_ids):
    # Length-prefix each input value coder exactly as the data channel will,
    # on a scratch copy (TransformContext adds helper coders as it goes).
    scratch = beam_runner_api_pb2.Components()
    scratch.coders.MergeFrom(components.coders)
    scratch.environments.MergeFrom(components.environments)
    transform_context = translations.TransformContext(scratch, known_runner_urns=frozenset())
    plans = []
    for tid in group_ids:
        gbk = components.transforms[tid]
        name = _name(components, tid)
        in_pcoll = components.pcollections[translations.only_element(gbk.inputs.values())]
        out_pcoll_id = translations.only_element(gbk.outputs.values())
        in_coder = components.coders[in_pcoll.coder_id]
        out_coder = components.coders[components.pcollections[out_pcoll_id].coder_id]
        if (
            in_coder.spec.urn != _KV
            or out_coder.spec.urn != _KV
            or components.coders[out_coder.component_coder_ids[1]].spec.urn != _ITERABLE
        ):
            raise UnsupportedPipelineError(
                "%s: GroupByKey (%s) on a RETRACTING (3) input needs coders KV<K, V> -> "
                "KV<K, Iterable<V>>, found %s -> %s" % (name, _GBK, in_coder.spec.urn, out_coder.spec.urn)
            )
        value_id = transform_context.maybe_length_prefixed_coder(in_coder.component_coder_ids[1])
        _copy_coder_closure(scratch, components, value_id)
        plans.append((out_pcoll_id, out_coder.component_coder_ids[0], value_id))
    python_coders = pipeline_context.PipelineContext(components).coders
    for out_pcoll_id, key_id, value_id in plans:
        pane = RetractionAwareCoder(coders.IterableCoder(python_coders[value_id]))
        _set_kv_coder(components, out_pcoll_id, key_id, pane)


def _rewrite_combine_outputs(components, combine_values_ids):
    python_coders = pipeline_context.PipelineContext(components).coders
    plans = []
    for tid in combine_values_ids:
        out_pcoll_id = translations.only_element(components.transforms[tid].outputs.values())
        out_coder = components.coders[components.pcollections[out_pcoll_id].coder_id]
        if out_coder.spec.urn != _KV:
            raise UnsupportedPipelineError(
                "%s: CombineValues (%s) on a RETRACTING (3) input needs a KV output coder, found %s"
                % (_name(components, tid), _CGV, out_coder.spec.urn)
            )
        key_id, value_id = out_coder.component_coder_ids
        plans.append((out_pcoll_id, key_id, RetractionAwareCoder(python_coders[value_id])))
    for out_pcoll_id, key_id, value_coder in plans:
        _set_kv_coder(components, out_pcoll_id, key_id, value_coder)


def _set_kv_coder(components, pcoll_id, key_id, value_coder):
    """Points the PCollection at a new coder KV<key_id, value_coder>."""
    pcoll = components.pcollections[pcoll_id]
    value_id = _add_coder(components, value_coder.to_runner_api(None), pcoll.coder_id + "_retraction_aware_value")
    kv = beam_runner_api_pb2.Coder(
        spec=beam_runner_api_pb2.FunctionSpec(urn=_KV), component_coder_ids=[key_id, value_id]
    )
    pcoll.coder_id = _add_coder(components, kv, pcoll.coder_id + "_retraction_aware")


def _add_coder(components, coder_proto, base):
    coder_id, n = base, 0
    while coder_id in components.coders:
        n += 1
        coder_id = "%s_%d" % (base, n)
    components.coders[coder_id].CopyFrom(coder_proto)
    return coder_id


def _copy_coder_closure(src, dst, coder_id):
    if coder_id in dst.coders:
        return
    coder = src.coders[coder_id]
    dst.coders[coder_id].CopyFrom(coder)
    for component in coder.component_coder_ids:
        _copy_coder_closure(src, dst, component)


# --- downstream of RETRACTING groupings ----------------------------------


def may_hold_retractions(components):
    """Ids of the PCollections that may hold retractions: the outputs of
    every RETRACTING GroupByKey, CombinePerKey or CombineValues, and of every
    transform computed from one, except a combine (which consumes them,
    see `_make_combines_retractable`, and emits retractions only of its own
    RETRACTING panes). A GroupByKey passes them on inside its groups."""
    transforms = components.transforms
    units = []

    def collect(tid):
        t = transforms[tid]
        if t.spec.urn in (_CPK, _CGV) or not t.subtransforms:
            units.append(t)
        else:
            for sub in t.subtransforms:
                collect(sub)

    for tid in _roots(components):
        collect(tid)
    may_hold = set()
    changed = True
    while changed:
        changed = False
        for t in units:
            inputs = set(t.inputs.values())
            if t.spec.urn in (_CPK, _CGV):
                holds = _retracting_input(components, t)
            elif t.spec.urn == _GBK:
                holds = _retracting_input(components, t) or bool(inputs & may_hold)
            else:
                holds = bool(inputs & may_hold)
            new = set(t.outputs.values()) - may_hold if holds else ()
            if new:
                may_hold.update(new)
                changed = True
    return may_hold


def _roots(components):
    children = {sub for t in components.transforms.values() for sub in t.subtransforms}
    return sorted(tid for tid in components.transforms if tid not in children)


def _carries_retractions(coder):
    """Does `coder` encode any picklable object, a Retraction included?"""
    return isinstance(coder, (RetractionAwareCoder, coders.FastPrimitivesCoder, coders.PickleCoder, coders.DillCoder))


# Standard composite coders and the component on their value path: a
# Retraction sits in the value of a KV, in an element of an iterable, inside
# a length prefix or a windowed value (a Reshuffle carries whole elements as
# windowed values), never in a key or a window.
_VALUE_PATH = {
    _KV: 1,
    _ITERABLE: 0,
    common_urns.coders.LENGTH_PREFIX.urn: 0,
    common_urns.coders.WINDOWED_VALUE.urn: 0,
    common_urns.coders.PARAM_WINDOWED_VALUE.urn: 0,
    common_urns.coders.STATE_BACKED_ITERABLE.urn: 0,
}


def _carry_retractions(components, may_hold, retracting_groupings):
    """Points each PCollection of `may_hold` at a coder that can encode a
    Retraction wherever the model puts one (`_VALUE_PATH`): the first coder
    on the value path that cannot is wrapped in RetractionAwareCoder. The
    outputs of `retracting_groupings` are `rewrite_retracting`'s (it gives
    them their own coders after this)."""
    python_coders = pipeline_context.PipelineContext(components).coders
    exempt = {pc for tid in retracting_groupings for pc in components.transforms[tid].outputs.values()}
    memo = {}

    def carrying(coder_id):
        if coder_id not in memo:
            coder = components.coders[coder_id]
            index = _VALUE_PATH.get(coder.spec.urn)
            if index is not None and len(coder.component_coder_ids) > index:
                component = carrying(coder.component_coder_ids[index])
                if component == coder.component_coder_ids[index]:
                    memo[coder_id] = coder_id
                else:
                    new = beam_runner_api_pb2.Coder()
                    new.CopyFrom(coder)
                    new.component_coder_ids[index] = component
                    memo[coder_id] = _add_coder(components, new, coder_id + "_retraction_aware")
            elif _carries_retractions(python_coders[coder_id]):
                memo[coder_id] = coder_id
            else:
                memo[coder_id] = _add_coder(
                    components,
                    RetractionAwareCoder(python_coders[coder_id]).to_runner_api(None),
                    coder_id + "_retraction_aware",
                )
        return memo[coder_id]

    for pcoll_id in sorted(may_hold - exempt):
        pcoll = components.pcollections[pcoll_id]
        pcoll.coder_id = carrying(pcoll.coder_id)


def _make_combines_retractable(components, may_hold):
    """Gives every CombinePerKey and CombineValues whose input may hold
    retractions `triggers.retractable(fn)` (see the module docstring)."""
    transforms = components.transforms
    _reject_lifted_combines(components, may_hold)
    for tid in sorted(transforms):
        t = transforms[tid]
        if t.spec.urn not in (_CPK, _CGV) or len(t.inputs) != 1:
            continue
        if translations.only_element(t.inputs.values()) not in may_hold:
            continue
        _retractable_payload(components, tid)
        for sub in _descendants(components, tid):
            st = transforms[sub]
            if st.spec.urn in (_CPK, _CGV):
                _retractable_payload(components, sub)
            elif st.spec.urn == _PAR_DO:
                _retractable_combine_values_dofn(components, tid, sub)


def _reject_lifted_combines(components, may_hold):
    """A CombinePerKey with side inputs is Beam's own LiftedCombinePerKey,
    whose first ParDo pre-combines with the CombineFn: not a combine the
    runner can make retractable, so refused rather than failed mid-run."""
    partial = getattr(combiners, "_PartialGroupByKeyCombiningValues", None)
    for tid, t in sorted(components.transforms.items()):
        if partial is None or t.spec.urn != _PAR_DO or not may_hold.intersection(t.inputs.values()):
            continue
        payload = beam_runner_api_pb2.ParDoPayload.FromString(t.spec.payload)
        if payload.do_fn.urn != python_urns.PICKLED_DOFN_INFO:
            continue
        try:
            dofn = pickler.loads(payload.do_fn.payload)[0]
        except Exception:  # pylint: disable=broad-except
            continue  # cannot inspect it here; its own code will see the Retraction
        if isinstance(dofn, partial):
            raise UnsupportedPipelineError(
                "%s: a CombinePerKey with side inputs (%s) combines a PCollection that may hold "
                "retractions (it is computed from a RETRACTING grouping's output); Beam runs it in its "
                "own lifted form, which cannot consume them: use a CombinePerKey without side inputs "
                "(see docs/retractions.md)" % (_name(components, tid), _PAR_DO)
            )


def _retractable_payload(components, tid):
    t = components.transforms[tid]
    payload = beam_runner_api_pb2.CombinePayload.FromString(t.spec.payload)
    if payload.combine_fn.urn != python_urns.PICKLED_COMBINE_FN:
        raise _rejection(
            components,
            tid,
            "a combine",
            t.spec.urn,
            "combines a PCollection that may hold retractions with a non-Python CombineFn (%s)"
            % payload.combine_fn.urn,
        )
    context = pipeline_context.PipelineContext(components)
    fn = retractable(core.CombineFn.from_runner_api(payload.combine_fn, context))
    payload.combine_fn.CopyFrom(fn.to_runner_api(context))
    payload.accumulator_coder_id = _add_coder(
        components, fn.get_accumulator_coder().to_runner_api(None), payload.accumulator_coder_id + "_retractable"
    )
    t.spec.payload = payload.SerializeToString()


def _retractable_combine_values_dofn(components, combine_id, pardo_id):
    pardo = components.transforms[pardo_id]
    payload = beam_runner_api_pb2.ParDoPayload.FromString(pardo.spec.payload)
    if payload.do_fn.urn != python_urns.PICKLED_DOFN_INFO:
        return
    dofn_info = pickler.loads(payload.do_fn.payload)
    if not isinstance(dofn_info[0], core.CombineValuesDoFn):
        raise _rejection(
            components,
            combine_id,
            "a combine",
            components.transforms[combine_id].spec.urn,
            "runs %s, not Beam's CombineValuesDoFn, over a PCollection that may hold retractions"
            % type(dofn_info[0]).__name__,
        )
    dofn_info[0].combinefn = retractable(dofn_info[0].combinefn)
    payload.do_fn.payload = pickler.dumps(dofn_info)
    pardo.spec.payload = payload.SerializeToString()
