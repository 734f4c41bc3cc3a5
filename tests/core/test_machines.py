"""Unit tests: each trigger state machine, driven directly through a context.
Times are int micros (the machines' contract); S is one second."""

from apache_beam.portability.api import beam_runner_api_pb2 as pb
from apache_beam.transforms import trigger as T
from apache_beam.transforms.window import IntervalWindow

from triggers.machines import PROCESSING
from triggers.machines import WATERMARK
from triggers.machines import compile_trigger
from triggers.machines import merge_trigger_states

W = IntervalWindow(0, 10)
S = 1_000_000


class Ctx(object):
    def __init__(self, window=W, now=0):
        self.window = window
        self.end = window.end.micros
        self.state = {}
        self.timers = {}
        self._now = now * S

    def now(self):
        return self._now

    def set_timer(self, name, domain, ts):
        self.timers[(name, domain)] = ts

    def clear_timer(self, name, domain):
        self.timers.pop((name, domain), None)


def test_default():
    m, c = compile_trigger(T.DefaultTrigger()), Ctx()
    m.on_element(c)
    assert c.timers == {('eow', WATERMARK): 10 * S}
    assert not m.should_fire(c, 10 * S - 1)
    assert m.should_fire(c, 10 * S) and not c.timers  # cleared so it fires once
    assert m.on_fire(c, 10 * S) is False and m.has_ontime_pane


def test_element_count():
    m, c = compile_trigger(T.AfterCount(2)), Ctx()
    m.on_element(c)
    assert not m.should_fire(c, 0)
    m.on_element(c)
    assert m.should_fire(c, 0) and m.on_fire(c, 0) is True
    m.reset(c)
    assert not m.should_fire(c, 0)


def test_always_and_never():
    a, n, c = compile_trigger(T.Always()), compile_trigger(T._Never()), Ctx()
    assert a.should_fire(c, 0) and a.on_fire(c, 0) is False
    assert not n.should_fire(c, 10**6 * S) and n.on_fire(c, 0) is True


def test_after_synchronized_processing_time_is_always_ready():
    m = compile_trigger(pb.Trigger(after_synchronized_processing_time=pb.Trigger.AfterSynchronizedProcessingTime()))
    assert m.should_fire(Ctx(), 0)


def test_after_processing_time_delay_and_alignment():
    proto = pb.Trigger(
        after_processing_time=pb.Trigger.AfterProcessingTime(
            timestamp_transforms=[
                pb.TimestampTransform(delay=pb.TimestampTransform.Delay(delay_millis=3000)),
                pb.TimestampTransform(align_to=pb.TimestampTransform.AlignTo(period=5000, offset=1000)),
            ]
        )
    )
    m, c = compile_trigger(proto), Ctx(now=2)
    m.on_element(c)  # 2 + 3 = 5, aligned up to 6 (period 5, offset 1)
    assert c.timers == {('pt', PROCESSING): 6 * S}
    c._now = 6 * S - 1
    assert not m.should_fire(c, 0)
    c._now = 6 * S
    assert m.should_fire(c, 0) and m.on_fire(c, 0) is True
    m.reset(c)
    assert not c.timers and not c.state


def test_repeat_resets_finished_subtrigger():
    m, c = compile_trigger(T.Repeatedly(T.AfterCount(2))), Ctx()
    m.on_element(c)
    m.on_element(c)
    assert m.should_fire(c, 0) and m.on_fire(c, 0) is False
    assert not m.should_fire(c, 0)


def test_after_end_of_window_early_on_time_late():
    m = compile_trigger(T.AfterWatermark(early=T.AfterCount(2), late=T.AfterCount(1)))
    c = Ctx()
    m.on_element(c)
    m.on_element(c)
    assert m.should_fire(c, 5 * S)  # early
    assert m.on_fire(c, 5 * S) is False
    assert not m.should_fire(c, 5 * S)  # early count reset
    assert m.should_fire(c, 10 * S)  # on time
    assert m.on_fire(c, 10 * S) is False  # late firings follow
    m.on_element(c)
    assert m.should_fire(c, 11 * S) and m.on_fire(c, 11 * S) is False


def test_after_end_of_window_without_late_finishes_on_time():
    m, c = compile_trigger(T.AfterWatermark()), Ctx()
    m.on_element(c)
    assert not m.should_fire(c, 10 * S - 1)
    assert m.should_fire(c, 10 * S) and m.on_fire(c, 10 * S) is True


def test_after_any_all_each_or_finally():
    c = Ctx()
    any_ = compile_trigger(T.AfterAny(T.AfterCount(1), T.AfterCount(3)))
    any_.on_element(c)
    assert any_.should_fire(c, 0) and any_.on_fire(c, 0) is True
    c = Ctx()
    all_ = compile_trigger(T.AfterAll(T.AfterCount(1), T.AfterCount(2)))
    all_.on_element(c)
    assert not all_.should_fire(c, 0)
    all_.on_element(c)
    assert all_.should_fire(c, 0) and all_.on_fire(c, 0) is True
    c = Ctx()
    each = compile_trigger(T.AfterEach(T.AfterCount(1), T.AfterCount(2)))
    each.on_element(c)
    assert each.should_fire(c, 0) and each.on_fire(c, 0) is False
    each.on_element(c)
    assert not each.should_fire(c, 0)
    each.on_element(c)
    assert each.should_fire(c, 0) and each.on_fire(c, 0) is True
    c = Ctx()
    orf = compile_trigger(T.OrFinally(T.Repeatedly(T.AfterCount(1)), T.AfterCount(3)))
    for i in range(2):
        orf.on_element(c)
        assert orf.should_fire(c, 0) and orf.on_fire(c, 0) is False
    orf.on_element(c)
    assert orf.on_fire(c, 0) is True


def test_builds_from_proto_bytes_and_triggerfn_equally():
    t = T.AfterWatermark(early=T.AfterCount(2))
    a = compile_trigger(t)
    b = compile_trigger(t.to_runner_api(None).SerializeToString())
    assert repr(a) == repr(b)


def test_state_merging_rules():
    merged = merge_trigger_states(
        [
            {'count:n': 2, 'late:late': False, 'index:each': 1, 'deadline:pt': 7},
            {'count:n': 3, 'late:late': True, 'index:each': 0, 'deadline:pt': 4},
        ]
    )
    assert merged == {'count:n': 5, 'late:late': True, 'index:each': 1, 'deadline:pt': 4}
