"""Runs one fused stage over the elements of one Spark partition.

Input is an iterator of `(input_index, block)` where a block is a run of
elements encoded with that input's data-channel coder; output is an iterator
of `(output_index, block)`. A partition is cut into bundles of bounded size;
SDF residuals (self-checkpoints) are fed back as further bundles until none
remain, as a bounded input requires; `run_round` instead hands them to the
driver, for stages whose bundles must be finalized first (see
execution/batch_finalization.py).
"""

import collections
import logging
import time

from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_fn_api_pb2
from beam_spark_runner.worker import beam_internals as _beam_internals

from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.utils import proto_utils

from beam_spark_runner.worker.beam_internals import pickler

from beam_spark_runner.worker import context
from beam_spark_runner.worker.beam_internals import InProcessSdkHarness
from beam_spark_runner.worker.grouped_values import GroupedValues, streams_groups
from beam_spark_runner.worker.timers import PendingTimers
from beam_spark_runner.worker.window_expiration_timers import WindowExpirationTimers, expiration_family

# Bytes of input per bundle: big enough to amortize per-bundle cost (and to
# let lifted combiners pre-combine well), small enough to bound memory, since
# a bundle's output is held until the bundle ends.
DEFAULT_BUNDLE_BYTES = 32 << 20

_TRUNCATE_URN = common_urns.sdf_components.TRUNCATE_SIZED_RESTRICTION.urn
_LOG = logging.getLogger(__name__)

# Output index of a residual record of `run_round`.
RESIDUAL = -1


def run_finalization_callbacks(callbacks, stage_name):
    """Calls bundle finalization callbacks as the SDK harness does: a
    failing one is logged and does not stop the others or fail the run."""
    for callback in callbacks:
        try:
            callback()
        except Exception as e:  # noqa: BLE001 -- any callback failure
            _LOG.warning("A bundle finalization callback of %r failed: %s", stage_name, e)


class StageFailed(RuntimeError):
    """A bundle of a stage failed; the message carries the user's traceback."""

    @classmethod
    def of_bundle(cls, display_name, error):
        """The failure of a bundle whose SDK harness reported `error`. A
        Java harness reports a Java stack trace; its frames are indented
        with spaces here, so that the driver, which cuts Spark's own frames
        (tab-indented) off the error it reports, keeps all of the user's:
        the "Caused by" parts too, where Beam's PAssert names the
        assertion's site."""
        text = error.replace("\n\tat ", "\n    at ").replace("\n\t... ", "\n    ... ")
        return cls("Beam stage %r failed:\n%s" % (display_name, text))


def _new_harness(stage, descriptor):
    """The SDK harness of the stage's environment (plans.StageEnvironment)."""
    if stage.environment.is_java:
        from beam_spark_runner.worker.java_harness import JavaSdkHarness

        expected = [p.transform_id for p in stage.outputs] + list(stage.timers)
        environment = stage.environment
        return JavaSdkHarness(
            descriptor, environment.classpath, expected, environment.jvm_options, environment.pipeline_options
        )
    return InProcessSdkHarness(descriptor)


class HarnessStageRunner:
    """Executes a StagePlan's bundles with an in-process SDK harness."""

    def __init__(self, stage, side_input_entries=(), components=None, descriptor=None):
        """`descriptor`: the stage's ProcessBundleDescriptor if the caller
        parsed it already (else parsed from `stage.descriptor`)."""
        self.stage = stage
        if descriptor is None:
            descriptor = beam_fn_api_pb2.ProcessBundleDescriptor.FromString(stage.descriptor)
        self._descriptor = descriptor
        self._harness = _new_harness(stage, descriptor)
        for state_key, data in side_input_entries:
            self._harness.state.append_raw(beam_fn_api_pb2.StateKey.FromString(state_key), data)
        self._input_ids = [p.transform_id for p in stage.inputs]
        # Inputs the harness reads with Beam's state-backed iterable coder:
        # a streamed group reaches them as a state token.
        self._streams_groups = {tid for tid in self._input_ids if streams_groups(descriptor, tid)}
        self._output_index = {p.transform_id: i for i, p in enumerate(stage.outputs)}
        self._feeding_input = {}
        self._resume_delay = None
        self._deferred = None  # run_once / run_round collect residuals here
        # Batch: hand finalization callbacks to the driver (pickled, in
        # `finalizations`) instead of running them when the bundle ends.
        self.finalize_after_commit = False
        self.finalizations = []
        self.monitoring_infos = []
        self._timer_domains = {}
        self._timer_key_impls = {}
        self._timers = None
        self._expiration = None
        if stage.timers:
            impls = self._timer_coders(components)
            family = expiration_family(descriptor)
            if family is not None:
                coder_id = next(p.coder_id for p in stage.inputs if p.transform_id == family.data_input_id)
                self._expiration = WindowExpirationTimers(family, coder_id, components)
            self._timers = PendingTimers(impls, last=[self._expiration.family_key] if self._expiration else ())

    def _timer_coders(self, components):
        impls = {}
        for transform_id, family in self.stage.timers:
            payload = proto_utils.parse_Bytes(
                self._descriptor.transforms[transform_id].spec.payload, beam_runner_api_pb2.ParDoPayload
            )
            coder_id = payload.timer_family_specs[family].timer_family_coder_id
            impls[(transform_id, family)] = context.coder_impl(components, coder_id)
            key_coder_id = context.component_coder_ids(components, coder_id)[0]
            self._timer_key_impls[(transform_id, family)] = context.coder_impl(components, key_coder_id)
            self._timer_domains[(transform_id, family)] = payload.timer_family_specs[family].time_domain
        return impls

    def run(self, tagged_blocks, bundle_bytes=DEFAULT_BUNDLE_BYTES):
        """Yields (output_index, block) for every bundle of this partition
        of bounded input, then of every timer (the watermark is +infinity)."""
        yield from self.process(tagged_blocks, bundle_bytes)
        while self._timers:
            yield from self._run_until_no_residuals({}, self._timers.take_due())

    def fire_timers(self, is_due):
        """Streaming: fires the pending timers `is_due(family key, timer)`
        accepts, in rounds (a callback may set a timer that is due too),
        in fire-timestamp order within a round; yields their outputs."""
        while self._timers:
            fired = self._timers.take_due(is_due)
            if not fired:
                return
            yield from self._run_until_no_residuals({}, fired)

    @property
    def timers(self):
        """The stage's PendingTimers (None for a stage without timers)."""
        return self._timers

    @property
    def harness(self):
        return self._harness

    def timer_key(self, family_key, timer):
        """The timer's user key, encoded as the SDK encodes it in its user
        state keys (nested, with the stage's key coder)."""
        return self._timer_key_impls[family_key].encode_nested(timer.user_key)

    def timer_domain(self, family_key):
        """beam_runner_api_pb2.TimeDomain of a (transform id, family) key."""
        return self._timer_domains[family_key]

    def process(self, tagged_blocks, bundle_bytes=DEFAULT_BUNDLE_BYTES):
        """Yields (output_index, block) for bundles of these inputs; fires no
        timer."""
        for inputs in self._bundle_inputs(tagged_blocks, bundle_bytes):
            yield from self._run_until_no_residuals(inputs)
            self._harness.state.forget_values()

    def run_round(self, tagged_blocks, bundle_bytes=DEFAULT_BUNDLE_BYTES):
        """Batch stages that finalize bundles: runs each bundle of these
        inputs once. Yields its (output_index, block) outputs, then one
        (RESIDUAL, (input_index, element, resume delay in seconds)) per
        residual, which the driver feeds back in a later Spark job, after
        this job's finalization callbacks ran."""
        self._deferred = []
        for inputs in self._bundle_inputs(tagged_blocks, bundle_bytes):
            outputs, finalize = self._run_bundle(inputs, collections.defaultdict(list), {})
            self._harness.state.forget_values()
            yield from outputs
            self._after_bundle(finalize)
        for index, element, delay, _ in self._take_deferred():
            yield RESIDUAL, (index, element, delay)

    def _bundle_inputs(self, tagged_blocks, bundle_bytes):
        """{input transform id: [block]} per bundle of about `bundle_bytes`."""
        pending = collections.defaultdict(list)
        size = 0
        for index, block in tagged_blocks:
            transform_id = self._input_ids[index]
            self._set_expiration_timers(transform_id, block)
            if isinstance(block, GroupedValues):
                block = self._group_element(transform_id, block)
            pending[transform_id].append(block)
            size += len(block)
            if size >= bundle_bytes:
                yield pending
                pending, size = collections.defaultdict(list), 0
        if pending:
            yield pending

    def _set_expiration_timers(self, transform_id, block):
        """A DoFn with a window-expiration callback: the keys and windows of
        its input get the callback's timer (window_expiration_timers.py)."""
        expiration = self._expiration
        if expiration is not None and transform_id == expiration.family.data_input_id:
            self._timers.set(expiration.family_key, expiration.timers_of(block))

    def _group_element(self, transform_id, grouped):
        """A streamed group (grouped_values.py) as the bytes written to the
        data input `transform_id`: with a state token the harness reads the
        values through, until the bundle ends; in full where the input's
        coder cannot carry a token."""
        if transform_id in self._streams_groups:
            return grouped.with_state_token(self._harness.state.serve_values)
        return grouped.encoded()

    def run_once(self, tagged_blocks):
        """Streaming SDFs: runs one bundle of these inputs and keeps its
        residuals instead of resuming them. Returns (outputs, residuals):
        residuals as (input index, encoded element, resume delay in seconds,
        earliest output watermark estimate in micros or None)."""
        inputs = collections.defaultdict(list)
        for index, block in tagged_blocks:
            inputs[self._input_ids[index]].append(block)
        self._deferred = []
        outputs, finalize = self._run_bundle(inputs, collections.defaultdict(list), {})
        self._after_bundle(finalize)
        return outputs, self._take_deferred()

    def _take_deferred(self):
        """The residuals collected since `_deferred` was set, as (input
        index, element, resume delay, watermark estimate); stops collecting."""
        deferred, self._deferred = self._deferred, None
        index_of = {tid: i for i, tid in enumerate(self._input_ids)}
        return [(index_of[tid], element, delay, wm) for tid, element, delay, wm in deferred]

    def _run_until_no_residuals(self, inputs, fired_timers=None):
        while inputs or fired_timers:
            residuals = collections.defaultdict(list)
            self._resume_delay = None
            outputs, finalize = self._run_bundle(inputs, residuals, fired_timers or {})
            yield from outputs
            # Resumed only once Spark has taken every output of the bundle
            # (a generator runs on when the next element is requested).
            self._after_bundle(finalize)
            inputs, fired_timers = residuals, None
            if inputs and self._resume_delay:
                # A self-checkpointing SDF asked to be resumed later (e.g.
                # PeriodicImpulse waiting for its next firing time).
                time.sleep(self._resume_delay)

    def _run_bundle(self, inputs, residuals, fired_timers):
        harness = self._harness
        iid = harness.new_instruction_id()
        # Every data and timer input must be opened and closed, even when
        # empty, or the bundle waits for it forever.
        timer_families = self._timers.families if self._timers is not None else []
        for transform_id, family in timer_families:
            harness.write_timers(iid, transform_id, family, fired_timers.get((transform_id, family), ()))
        for transform_id in self._input_ids:
            harness.write_input(iid, transform_id, inputs.get(transform_id, ()))
        response = harness.process(iid)
        if response.error:
            raise StageFailed.of_bundle(self.stage.display_name, response.error)
        outputs = []
        for element in harness.read_outputs(iid, list(self._output_index) + timer_families):
            if isinstance(element, beam_fn_api_pb2.Elements.Data):
                if element.data:
                    outputs.append((self._output_index[element.transform_id], element.data))
            elif element.timers:
                self._timers.record(element.transform_id, element.timer_family_id, element.timers)
        result = response.process_bundle
        for delayed in result.residual_roots:
            app = delayed.application
            feeding = self._input_feeding(app.transform_id, app.input_id)
            residuals[feeding].append(app.element)
            delay = 0.0
            if delayed.HasField("requested_time_delay"):
                # Estimators may ask for a resume time already past.
                delay = max(0.0, delayed.requested_time_delay.ToTimedelta().total_seconds())
                self._resume_delay = min(delay, self._resume_delay or delay)
            if self._deferred is not None:
                estimates = [ts.seconds * 1_000_000 + ts.nanos // 1000 for ts in app.output_watermarks.values()]
                self._deferred.append((feeding, app.element, delay, min(estimates, default=None)))
        self.monitoring_infos.extend(result.monitoring_infos)
        finalize = iid if result.requires_finalization else None
        return outputs, finalize

    def _after_bundle(self, iid):
        """Finalization of the bundle `iid` (None: it registered no callback):
        its callbacks run now, or, with `finalize_after_commit`, are pickled
        into `finalizations` for the driver. Callbacks that cannot be pickled
        run now, with a warning saying so."""
        if iid is None:
            return
        if not self.finalize_after_commit:
            self._finalize(iid)
            return
        callbacks = self._harness.take_finalization_callbacks(iid)
        try:
            self.finalizations.append(pickler.dumps(callbacks))
        except Exception as e:  # noqa: BLE001 -- any pickling failure
            _LOG.warning(
                "Bundle finalization callbacks of %r cannot be pickled (%s): they run when "
                "the bundle ends, before Spark holds its output",
                self.stage.display_name,
                e,
            )
            run_finalization_callbacks(callbacks, self.stage.display_name)

    def _finalize(self, iid):
        finalized = self._harness.finalize(iid)
        if finalized.error:
            raise StageFailed("Finalizing a bundle of %r failed:\n%s" % (self.stage.display_name, finalized.error))

    def input_index_feeding(self, transform_id, input_id):
        """The index (in the stage's inputs) of the data input whose
        elements reach input `input_id` of `transform_id`."""
        return self._input_ids.index(self._input_feeding(transform_id, input_id))

    def _input_feeding(self, transform_id, input_id):
        """The data input transform whose elements reach `transform_id`."""
        key = (transform_id, input_id)
        if key not in self._feeding_input:
            transforms = self._descriptor.transforms
            pcoll = transforms[transform_id].inputs[input_id]
            self._feeding_input[key] = self._find_data_input(pcoll)
        return self._feeding_input[key]

    def _find_data_input(self, pcoll):
        transforms = self._descriptor.transforms
        for tid, t in transforms.items():
            if pcoll in t.outputs.values():
                if t.spec.urn == _beam_internals.DATA_INPUT_URN:
                    return tid
                if t.spec.urn == _TRUNCATE_URN:
                    return self._find_data_input(next(iter(t.inputs.values())))
        raise StageFailed("No data input of stage %r feeds PCollection %s" % (self.stage.name, pcoll))

    def take_monitoring_infos(self):
        """The MonitoringInfos of the bundles run since the last call."""
        infos, self.monitoring_infos = self.monitoring_infos, []
        return infos

    def close(self):
        self._harness.close()
