"""Worker log forwarding (worker/log_forwarding.py, execution/log_receiver.py)
without Spark: the worker half runs in this process against a real
receiver, whose re-emission into logging is replaced by a list (in one
process both halves share the logger tree, so re-emitted records would be
forwarded again)."""

import logging
import socket
import time

import pytest

from beam_spark_runner.execution import log_receiver
from beam_spark_runner.worker import log_forwarding
from beam_spark_runner.worker.log_forwarding import LogSettings, forwarding


@pytest.fixture
def receiver(monkeypatch):
    received = []
    monkeypatch.setattr(log_receiver, "reemit", received.append)
    r = log_receiver.LogReceiver()
    r.received = received
    yield r
    r.close()


def _settings(receiver, **kw):
    return receiver.settings(LogSettings(**kw))


def test_records_reach_the_driver_in_order_before_the_task_ends(receiver, monkeypatch):
    def slow_reemit(fields):  # a driver slower than the worker
        time.sleep(0.002)
        receiver.received.append(fields)

    monkeypatch.setattr(log_receiver, "reemit", slow_reemit)
    log = logging.getLogger("lf_test.user")
    with forwarding(_settings(receiver), "Map(f)"):
        for i in range(450):  # more than two sends of SEND_EVERY
            log.info("element %d of %s", i, "x")
    # finish() waited for the receiver's acknowledgement: nothing in flight.
    assert [r["msg"] for r in receiver.received] == ["element %d of x" % i for i in range(450)]
    first = receiver.received[0]
    assert (first["name"], first["levelno"], first["levelname"]) == ("lf_test.user", logging.INFO, "INFO")
    assert first["beam_stage"] == "Map(f)" and first["args"] is None
    assert first["funcName"] == "test_records_reach_the_driver_in_order_before_the_task_ends"


def test_an_exception_travels_as_text_and_a_failing_task_still_delivers(receiver):
    log = logging.getLogger("lf_test.user")
    with pytest.raises(ZeroDivisionError):
        with forwarding(_settings(receiver), "ParDo(D)"):
            try:
                1 / 0
            except ZeroDivisionError:
                log.exception("failed on %r", "elem")
            raise ZeroDivisionError("the task fails")
    (record,) = receiver.received
    assert record["levelno"] == logging.ERROR and record["msg"] == "failed on 'elem'"
    assert "ZeroDivisionError: division by zero" in record["exc_text"]


def test_levels_and_overrides_apply_during_the_task_and_are_restored_after(receiver):
    root, noisy = logging.getLogger(), logging.getLogger("lf_test.noisy")
    outside = logging.StreamHandler()
    root.addHandler(outside)
    levels = (root.level, noisy.level)
    try:
        settings = _settings(receiver, level=logging.DEBUG, overrides=(("lf_test.noisy", logging.ERROR),))
        with forwarding(settings, "s"):
            assert outside not in root.handlers  # the worker's own handlers step aside
            logging.getLogger("lf_test.user").debug("debug kept")
            noisy.warning("warning dropped by the override")
            noisy.error("error kept")
        assert outside in root.handlers
        assert (root.level, noisy.level) == levels
    finally:
        root.removeHandler(outside)
    assert [r["msg"] for r in receiver.received] == ["debug kept", "error kept"]


def test_default_level_info_leaves_debug_out(receiver):
    with forwarding(_settings(receiver), "s"):
        logging.getLogger("lf_test.user").debug("not sent")
        logging.getLogger("lf_test.user").info("sent")
    assert [r["msg"] for r in receiver.received] == ["sent"]


def test_a_task_sends_at_most_the_limit_and_reports_what_it_dropped(receiver, monkeypatch):
    monkeypatch.setattr(log_forwarding, "MAX_RECORDS_PER_TASK", 5)
    with forwarding(_settings(receiver), "Chatty"):
        for i in range(12):
            logging.getLogger("lf_test.user").info("line %d", i)
    msgs = [r["msg"] for r in receiver.received]
    assert msgs[:5] == ["line %d" % i for i in range(5)]
    assert msgs[5:] == ["7 log records of Beam stage 'Chatty' were dropped: a task sends at most 5"]
    assert receiver.received[5]["levelno"] == logging.WARNING


def test_a_wrong_token_is_refused_and_the_records_go_to_stderr(receiver, capfd):
    settings = LogSettings().to(receiver.address, "not-the-token")
    with forwarding(settings, "s"):
        logging.getLogger("lf_test.user").warning("kept on the worker")
    assert receiver.received == []
    assert "WARNING lf_test.user [s] kept on the worker" in capfd.readouterr().err


def test_an_unreachable_driver_does_not_fail_the_task(capfd):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        address = s.getsockname()
    with forwarding(LogSettings().to(address, "t"), "s"):
        logging.getLogger("lf_test.user").error("driver gone")
    assert "ERROR lf_test.user [s] driver gone" in capfd.readouterr().err


def test_without_a_receiver_nothing_changes():
    root = logging.getLogger()
    handlers = list(root.handlers)
    with forwarding(LogSettings(), "s"):
        assert root.handlers == handlers


def test_reemit_obeys_the_drivers_logger_levels(caplog):
    fields = {
        "name": "lf_test.driver",
        "levelno": logging.INFO,
        "levelname": "INFO",
        "msg": "m",
        "args": None,
        "beam_stage": "s",
    }
    caplog.set_level(logging.WARNING, logger="lf_test.driver")
    log_receiver.reemit(fields)
    assert caplog.records == []
    caplog.set_level(logging.INFO, logger="lf_test.driver")
    log_receiver.reemit(fields)
    (record,) = caplog.records
    assert (record.name, record.levelno, record.getMessage(), record.beam_stage) == (
        "lf_test.driver",
        logging.INFO,
        "m",
        "s",
    )


@pytest.mark.parametrize(
    "level,expected",
    [(None, logging.INFO), ("DEBUG", logging.DEBUG), ("warning", logging.WARNING), ("15", 15), (30, 30)],
)
def test_levels_from_beams_options(level, expected):
    assert LogSettings.from_option_values(level, None).level == expected


def test_bad_levels_name_the_option():
    with pytest.raises(ValueError, match="--default_sdk_harness_log_level: 'LOUD' is not a logging level"):
        LogSettings.from_option_values("LOUD", None)
    with pytest.raises(ValueError, match=r"--sdk_harness_log_level_overrides\['a.b'\]: 'LOUD'"):
        LogSettings.from_option_values(None, {"a.b": "LOUD"})
    with pytest.raises(ValueError, match="--sdk_harness_log_level_overrides: expected a JSON object"):
        LogSettings.from_option_values(None, ["a"])
    assert LogSettings.from_option_values("ERROR", {"b": "DEBUG", "a": 20}).overrides == (
        ("a", 20),
        ("b", logging.DEBUG),
    )
