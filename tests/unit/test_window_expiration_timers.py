"""Java's @OnWindowExpiration without Spark or Java: the timer the runner
sets for each key and window a stage's input carries
(worker/window_expiration_timers.py), and the order in which pending
timers give it back (worker/timers.py): after every other due timer."""

from apache_beam.coders import coders
from apache_beam.coders.coder_impl import create_OutputStream
from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_fn_api_pb2, beam_runner_api_pb2
from apache_beam.runners import pipeline_context
from apache_beam.transforms import userstate
from apache_beam.transforms.window import IntervalWindow
from apache_beam.utils import windowed_value
from apache_beam.utils.timestamp import Timestamp

from beam_spark_runner.worker.beam_internals import DATA_INPUT_URN
from beam_spark_runner.worker.timers import PendingTimers
from beam_spark_runner.worker.window_expiration_timers import WindowExpirationTimers, expiration_family

S = 1_000_000  # micros per second
KV = coders.TupleCoder([coders.StrUtf8Coder(), coders.VarIntCoder()])
ELEMENT = coders.WindowedValueCoder(KV, coders.IntervalWindowCoder())
TIMER = coders._TimerCoder(coders.StrUtf8Coder(), coders.IntervalWindowCoder())
FAMILY = "onWindowExpiration0"
ELEMENT_ID = pipeline_context.PipelineContext().coders.get_id(ELEMENT)


def _descriptor(lateness_ms, expiration=FAMILY):
    ctx = pipeline_context.PipelineContext()
    element_coder = ctx.coders.get_id(ELEMENT)
    assert element_coder == ELEMENT_ID
    strategy = beam_runner_api_pb2.WindowingStrategy(allowed_lateness=lateness_ms)
    components = ctx.to_runner_api()
    descriptor = beam_fn_api_pb2.ProcessBundleDescriptor(coders=components.coders)
    descriptor.windowing_strategies["ws"].CopyFrom(strategy)
    descriptor.pcollections["in"].CopyFrom(beam_runner_api_pb2.PCollection(windowing_strategy_id="ws"))
    port = beam_fn_api_pb2.RemoteGrpcPort(coder_id=element_coder)
    descriptor.transforms["read"].CopyFrom(
        beam_runner_api_pb2.PTransform(
            spec=beam_runner_api_pb2.FunctionSpec(urn=DATA_INPUT_URN, payload=port.SerializeToString()),
            outputs={"out": "in"},
        )
    )
    payload = beam_runner_api_pb2.ParDoPayload(on_window_expiration_timer_family_spec=expiration)
    descriptor.transforms["dofn"].CopyFrom(
        beam_runner_api_pb2.PTransform(
            spec=beam_runner_api_pb2.FunctionSpec(
                urn=common_urns.primitives.PAR_DO.urn, payload=payload.SerializeToString()
            ),
            inputs={"in": "in"},
        )
    )
    return descriptor


def _components(descriptor):
    return beam_runner_api_pb2.Components(coders=descriptor.coders).SerializeToString()


def _block(*elements):
    out = create_OutputStream()
    for key, value, window in elements:
        ELEMENT.get_impl().encode_to_stream(
            windowed_value.WindowedValue((key, value), window.max_timestamp(), (window,)), out, True
        )
    return out.get()


def test_no_family_without_a_window_expiration_callback():
    assert expiration_family(_descriptor(0, expiration="")) is None


def test_each_key_and_window_gets_one_timer_at_its_expiry_holding_the_windows_end():
    descriptor = _descriptor(lateness_ms=5000)
    family = expiration_family(descriptor)
    assert family.family_id == FAMILY and family.data_input_id == "read" and family.allowed_lateness_us == 5 * S
    timers = WindowExpirationTimers(family, ELEMENT_ID, _components(descriptor))
    first, second = IntervalWindow(0, 10), IntervalWindow(10, 20)
    made = timers.timers_of(_block(("a", 1, first), ("a", 2, first), ("b", 3, first), ("a", 4, second)))
    assert sorted((t.user_key, t.windows[0].start.micros, t.fire_timestamp, t.hold_timestamp) for t in made) == [
        ("a", 0, Timestamp(micros=15 * S - 1), Timestamp(micros=10 * S - 1)),
        ("a", 10 * S, Timestamp(micros=25 * S - 1), Timestamp(micros=20 * S - 1)),
        ("b", 0, Timestamp(micros=15 * S - 1), Timestamp(micros=10 * S - 1)),
    ]
    assert all(t.dynamic_timer_tag == "" and not t.clear_bit for t in made)


def _user_timer(key, fire_s, window):
    return userstate.Timer(
        user_key=key,
        dynamic_timer_tag="",
        windows=(window,),
        clear_bit=False,
        fire_timestamp=Timestamp(fire_s),
        hold_timestamp=Timestamp(fire_s),
        paneinfo=windowed_value.PANE_INFO_UNKNOWN,
    )


def _decoded(fired, family_key):
    from apache_beam.coders.coder_impl import create_InputStream

    out = []
    for block in fired.get(family_key, ()):
        stream = create_InputStream(block)
        while stream.size() > 0:
            out.append(TIMER.get_impl().decode_from_stream(stream, True))
    return out


def _pending_with_an_expiration_timer():
    """(user family, expiration family, window, PendingTimers holding the
    expiration timer of key "a" in the window [0, 10))."""
    user, expiration = ("dofn", "flush"), ("dofn", FAMILY)
    pending = PendingTimers({user: TIMER.get_impl(), expiration: TIMER.get_impl()}, last=[expiration])
    window = IntervalWindow(0, 10)
    descriptor = _descriptor(lateness_ms=0)
    made = WindowExpirationTimers(expiration_family(descriptor), ELEMENT_ID, _components(descriptor))
    pending.set(expiration, made.timers_of(_block(("a", 1, window))))
    return user, expiration, window, pending


def test_the_expiration_timer_fires_only_once_no_other_timer_is_due():
    user, expiration, window, pending = _pending_with_an_expiration_timer()
    pending.set(user, [_user_timer("a", 9, window), _user_timer("a", 12, IntervalWindow(10, 20))])

    # Everything is due (bounded input's end): the DoFn's own timers first,
    # even one later than the expiry.
    first = pending.take_due()
    assert list(first) == [user]
    assert [t.fire_timestamp for t in _decoded(first, user)] == [Timestamp(9), Timestamp(12)]
    second = pending.take_due()
    assert list(second) == [expiration] and [t.user_key for t in _decoded(second, expiration)] == ["a"]
    assert not pending and pending.take_due() == {}


def test_a_due_expiration_timer_waits_for_a_due_user_timer_but_not_for_one_not_due():
    user, expiration, window, pending = _pending_with_an_expiration_timer()
    pending.set(user, [_user_timer("a", 30, window)])

    def due_at(wm_s):
        return lambda family, timer: timer.fire_timestamp <= Timestamp(wm_s)

    assert pending.take_due(due_at(9)) == {}  # the window has not ended
    fired = pending.take_due(due_at(10))  # expired; the user timer is not due
    assert list(fired) == [expiration]
    assert list(pending.take_due(due_at(30))) == [user]
