"""Which ParDos the plain-Python path runs, and the callable it calls.

`plain_callable(transform)` decides, from a ParDo's payload and its DoFn,
whether the runner may run it as a plain Python loop (worker/plain_stage.py)
instead of in Beam's SDK harness: a `CallableWrapperDoFn` (Map, FlatMap,
Filter, MapTuple, ...) or a DoFn class with only `process` and lifecycle
methods, taking at most the element's timestamp, window and pane as DoFn
parameters, and nothing the harness alone provides (side inputs, state,
timers, splittable DoFns, bundle finalization, batched DoFns, runtime type
checks). The planner asks it (translation/plain_stages.py); the worker's
ParDo step calls what it returns (worker/plain_steps.py).

Map's and MapTuple's wrapper lambdas are recognized by their code objects,
taken from `beam.Map` / `beam.MapTuple` themselves at import, so the user's
callable is called directly (one output per input).
"""

import inspect

from beam_spark_runner.worker.beam_internals import pickler
from apache_beam.portability import python_urns
from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.runners import common as runners_common
from apache_beam.transforms import core
from apache_beam.typehints.typecheck import AbstractDoFnWrapper
from apache_beam.utils import proto_utils

from beam_spark_runner.worker.beam_internals import (
    callable_wrapper_function,
    dofn_processes_batches,
    dofn_processes_elements,
    wrapped_user_callable,
)

# Any DoFn parameter default (ElementParam, TimestampParam, StateParam(...), ...)
# is an instance of this class.
_DOFN_PARAM_TYPE = type(core.DoFn.ElementParam)
# DoFn parameters the plain path fills from the run's metadata.
_ELEMENT_PARAMS = (
    (core.DoFn.TimestampParam, "timestamp"),
    (core.DoFn.WindowParam, "window"),
    (core.DoFn.PaneInfoParam, "pane"),
    # The element whole (value, timestamp, all its windows, pane), as
    # DoFnRunner passes it: once per element, not once per window.
    (core.DoFn.WindowedValueParam, "windowed_value"),
)


def _single_output_wrappers():
    """Code objects of the wrappers Map and MapTuple put around the user's
    callable, each with how to call the callable for one output. Matching
    the code object (not a name) makes the unwrapping exact."""

    def code(transform):
        return callable_wrapper_function(transform.fn).__code__

    return {
        code(core.Map(len)): lambda fn, args, kwargs: fn,  # [fn(x)]
        code(core.Map(lambda x, y: x, 0)): lambda fn, args, kwargs: (
            lambda x, **params: fn(x, *args, **kwargs, **params)
        ),  # [fn(x, *a, **kw)]
        code(core.MapTuple(lambda a, b: a)): lambda fn, args, kwargs: lambda x: fn(*x),
        code(core.MapTuple(lambda a, b=0: a, 0)): lambda fn, args, kwargs: (
            lambda x, **params: fn(*(tuple(x) + args), **kwargs, **params)
        ),
    }


_SINGLE_OUTPUT_WRAPPERS = _single_output_wrappers()


class PlainCallable:
    """A ParDo's callable as the plain path calls it."""

    def __init__(self, process, args, kwargs, params, dofn=None, check_first_output=False):
        self.process = process  # returns an iterable of outputs
        self.args = args
        self.kwargs = kwargs
        self.params = params  # keyword -> 'timestamp' | 'window' | 'pane' | 'windowed_value'
        self.single = None  # returns exactly one output, when known
        self.whole_positional = False  # see plain_callable
        # A DoFn class instance: the step calls its lifecycle methods.
        self.dofn = dofn
        # The harness rejects a str/bytes/dict *returned* by a DoFn class's
        # process (a `return` meant as `yield`); it checks the first call.
        self.check_first_output = check_first_output
        unwrap = _SINGLE_OUTPUT_WRAPPERS.get(getattr(process, "__code__", None))
        if unwrap is not None:
            user_fn = wrapped_user_callable(process)
            if user_fn is not None:
                self.single = unwrap(user_fn, args, kwargs)


def plain_callable(transform, loading=False):
    """The PlainCallable of a ParDo the plain path can run, else None.

    Planning (`loading=False`): a DoFn that cannot be unpickled here (a proto
    from another process) is left to the harness. In a worker
    (`loading=True`) the stage was planned plain, so failing to unpickle is
    the user's error (e.g. a module the workers cannot import) and raises."""
    payload = proto_utils.parse_Bytes(transform.spec.payload, beam_runner_api_pb2.ParDoPayload)
    if (
        payload.side_inputs
        or payload.state_specs
        or payload.timer_family_specs
        or payload.restriction_coder_id
        or payload.requests_finalization
        or payload.do_fn.urn != python_urns.PICKLED_DOFN_INFO
    ):
        return None
    try:
        dofn, args, kwargs = pickler.loads(payload.do_fn.payload)[:3]
    except Exception:
        if loading:
            raise
        return None
    # Exactly Map/FlatMap/Filter/MapTuple/FlatMapTuple's wrapper (a subclass
    # could add start_bundle, setup, ... which it would not call), or a DoFn
    # class whose methods the step calls as the harness does.
    is_callable = type(dofn) is core.CallableWrapperDoFn
    if not is_callable and not _is_plain_dofn_class(dofn):
        return None
    try:
        signature = runners_common.DoFnSignature(dofn)
    except Exception:
        return None
    method = signature.process_method
    if not is_callable and not _lifecycle_without_params(signature):
        return None
    if any(isinstance(a, _DOFN_PARAM_TYPE) for a in list(args) + list(kwargs.values())):
        return None
    params = {}
    defaults = list(method.defaults)
    names = method.args[len(method.args) - len(defaults) :] if defaults else []
    for name, default in zip(names, defaults):
        if not isinstance(default, _DOFN_PARAM_TYPE):
            continue
        kind = next((k for param, k in _ELEMENT_PARAMS if param == default), None)
        if kind is None:
            return None
        params[name] = kind
    if params and (args or kwargs):
        return None  # the harness interleaves placeholders and extra arguments
    if is_callable:
        plain = PlainCallable(dofn.process, tuple(args), dict(kwargs), params)
    else:
        plain = PlainCallable(
            dofn.process,
            tuple(args),
            dict(kwargs),
            params,
            dofn=dofn,
            check_first_output=not inspect.isgeneratorfunction(method.method_value),
        )
    # process(element, windowed_value=WindowedValueParam) alone: the step
    # passes the WindowedValue as the second positional argument.
    plain.whole_positional = (
        list(params.values()) == ["windowed_value"] and list(method.args[1:2]) == list(params) and not plain.single
    )
    return plain


def _is_plain_dofn_class(dofn):
    """A DoFn class the plain path can run: elements in, elements out.
    Wrappers (runtime type checks) and batched DoFns stay on the harness;
    state, timers, SDFs, side inputs and finalization are excluded by the
    ParDo payload before this is asked."""
    if not isinstance(dofn, core.DoFn) or isinstance(dofn, (core.CallableWrapperDoFn, AbstractDoFnWrapper)):
        return False
    try:
        return dofn_processes_elements(dofn) and not dofn_processes_batches(dofn)
    except Exception:
        return False


def _lifecycle_without_params(signature):
    """setup / start_bundle / finish_bundle / teardown take no DoFn
    parameter (e.g. a BundleFinalizerParam): the plain path passes none."""
    for method in (
        signature.setup_lifecycle_method,
        signature.start_bundle_method,
        signature.finish_bundle_method,
        signature.teardown_lifecycle_method,
    ):
        if any(isinstance(d, _DOFN_PARAM_TYPE) for d in method.defaults):
            return False
        if len(method.args) > len(method.defaults):
            return False  # a required argument only the harness could fill
    return True


# State kinds the runner keeps itself (worker/user_state.py); ordered-list,
# map and multimap state need the harness.
_RUNNER_STATE_KINDS = frozenset(["read_modify_write_spec", "bag_spec", "set_spec", "combining_spec"])


def plain_stateful_dofn(transform, loading=False):
    """Whether a ParDo with state and/or timers can run on the plain path
    (worker/stateful_step.py): a pickled Python DoFn, its state of the
    kinds the runner keeps (ReadModifyWrite, bag, set, combining), no side
    inputs, no splittable DoFn, no bundle finalization, no time-sorted
    input, no window-expiration callback, no batched DoFn. The DoFn's
    parameters (state, timers, key, window, timestamp, pane, dynamic timer
    tag) are passed by Beam's own DoFnRunner. `loading` as `plain_callable`."""
    payload = proto_utils.parse_Bytes(transform.spec.payload, beam_runner_api_pb2.ParDoPayload)
    if (
        not (payload.state_specs or payload.timer_family_specs)
        or payload.side_inputs
        or payload.restriction_coder_id
        or payload.requests_finalization
        or payload.requires_time_sorted_input
        or payload.on_window_expiration_timer_family_spec
        or payload.do_fn.urn != python_urns.PICKLED_DOFN_INFO
    ):
        return False
    if any(spec.WhichOneof("spec") not in _RUNNER_STATE_KINDS for spec in payload.state_specs.values()):
        return False
    try:
        dofn, args, kwargs = pickler.loads(payload.do_fn.payload)[:3]
    except Exception:
        if loading:
            raise
        return False
    if not isinstance(dofn, core.DoFn) or isinstance(dofn, core.CallableWrapperDoFn):
        return False
    try:
        if dofn_processes_batches(dofn):
            return False
        signature = runners_common.DoFnSignature(dofn)
    except Exception:
        return False
    if signature.is_splittable_dofn() or signature.has_bundle_finalization():
        return False
    return not any(isinstance(a, _DOFN_PARAM_TYPE) for a in list(args) + list(kwargs.values()))
