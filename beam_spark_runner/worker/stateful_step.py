"""A stateful ParDo as a step of a plain-Python stage: the user's DoFn run
by Beam's own `DoFnRunner` (the argument passing, output handling and
timer callbacks of the harness), with its state and timers in the
runner's `user_state.UserStateTable` instead of behind the SDK harness's
state API. No state request, StateKey or cache weighing per key.

The step is the root of its stage (a stateful DoFn always starts one);
stateless steps fused after it run on its outputs as usual. Which ParDos
qualify: `plain_callables.plain_stateful_dofn`. Timers fire when the stage
asks (`fire`): all of them at the end of bounded input, the due ones at a
streaming step.
"""

from beam_spark_runner.worker.beam_internals import pickler
from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.runners import common as runners_common
from apache_beam.transforms import userstate
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.utils import proto_utils

from beam_spark_runner.worker.plain_steps import Step
from beam_spark_runner.worker.runs import same_metadata
from beam_spark_runner.worker.user_state import TimerFamily, UserStateTable, combine_fns_of

STATEFUL_PARDO = "stateful_pardo"


class _Collect(runners_common.Receiver):
    """A DoFnRunner receiver: outputs of one PCollection as runs (consecutive
    outputs sharing timestamp, windows and pane share a run)."""

    def __init__(self):
        self.runs = []

    def receive(self, wv):
        runs = self.runs
        if runs and same_metadata(runs[-1][0], wv):
            runs[-1][1].append(wv.value)
        else:
            runs.append((wv, [wv.value]))


class _Drop(runners_common.Receiver):
    """The receiver of a tag the transform does not declare (the harness
    drops such outputs too)."""

    def receive(self, wv):
        pass


class _Receivers(dict):
    def __missing__(self, tag):
        return _Drop()


class StatefulParDoStep(Step):
    """Runs one stateful ParDo over runs of its keyed (KV) input."""

    bounded_output = False

    def __init__(self, spec, transform, descriptor, ctx, scoped):
        super().__init__(spec, scoped)
        payload = proto_utils.parse_Bytes(transform.spec.payload, beam_runner_api_pb2.ParDoPayload)
        dofn, args, kwargs = pickler.loads(payload.do_fn.payload)[:3]
        input_pcoll = descriptor.pcollections[spec.input_pcoll]
        windowing = ctx.windowing_strategies[input_pcoll.windowing_strategy_id]
        key_coder = ctx.coders[input_pcoll.coder_id].key_coder()
        window_coder = ctx.coders[descriptor.windowing_strategies[input_pcoll.windowing_strategy_id].window_coder_id]
        state_specs, timer_specs = userstate.get_dofn_specs(dofn)
        families = {}
        for timer_spec in timer_specs:
            family = payload.timer_family_specs[timer_spec.name]
            families[timer_spec.name] = TimerFamily(
                (spec.transform_id, timer_spec.name),
                timer_spec,
                ctx.coders[family.timer_family_coder_id].get_impl(),
            )
        self.families = families
        self._combine_fns = combine_fns_of(state_specs)
        self.table = UserStateTable(state_specs, self._combine_fns, key_coder, window_coder, families)
        self._collectors = {pcoll: _Collect() for _, pcoll in spec.outputs}
        receivers = _Receivers()
        for tag, pcoll in spec.outputs:
            receivers[tag] = self._collectors[pcoll]
        if self._main is not None:
            receivers[None] = self._collectors[self._main]
        else:
            receivers[None] = _Drop()
        self._runner = runners_common.DoFnRunner(
            dofn,
            args,
            kwargs,
            [],
            windowing,
            tagged_receivers=receivers,
            step_name=spec.name,
            transform_id=spec.transform_id,
            user_state_context=self.table,
        )

    def setup(self):
        with self._scoped:
            try:
                for fn in self._combine_fns.values():
                    fn.setup()
                self._runner.setup()
            except Exception:
                raise self._failed() from None

    def start_bundle(self):
        with self._scoped:
            try:
                self._runner.start()
            except Exception:
                raise self._failed() from None
        return self._outputs()

    def process(self, runs):
        process = self._runner.process
        with self._scoped:
            try:
                for template, values in runs:
                    for value in values:
                        process(template.with_value(value))
            except Exception:
                raise self._failed() from None
        return self._outputs()

    def fire(self, fired):
        """Runs the callbacks of `fired` ([(TimerFamily, Timer)], in order);
        returns their outputs."""
        process_user_timer = self._runner.process_user_timer
        with self._scoped:
            try:
                for family, timer in fired:
                    process_user_timer(
                        family.spec,
                        timer.user_key,
                        timer.windows[0],
                        timer.fire_timestamp,
                        timer.paneinfo,
                        timer.dynamic_timer_tag,
                    )
            except Exception:
                raise self._failed() from None
        return self._outputs()

    def finish(self):
        with self._scoped:
            try:
                self._runner.finish()
            except Exception:
                raise self._failed() from None
        return self._outputs()

    def teardown(self):
        with self._scoped:
            try:
                self._runner.teardown()
                for fn in self._combine_fns.values():
                    fn.teardown()
            except Exception:
                raise self._failed() from None

    def _outputs(self):
        out = []
        for pcoll, collector in self._collectors.items():
            if collector.runs:
                out.append((pcoll, collector.runs))
                collector.runs = []
        return out


def timer_domains(families):
    """{family key: beam_runner_api_pb2.TimeDomain} of TimerFamilies."""
    return {f.key: TimeDomain.to_runner_api(f.spec.time_domain) for f in families.values()}
