"""A test whose service is down skips on a laptop and fails under
--require-services (the README's test command, so CI)."""

import socket

import pytest

from tests import services


class _Config:
    def __init__(self, required):
        self._required = required

    def getoption(self, name):
        assert name == "--require-services"
        return self._required


class _Request:
    def __init__(self, required):
        self.config = _Config(required)


def _closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once the socket closes


def test_an_unreachable_service_skips_naming_it():
    addresses = {"db://x": ("SomeDB", "127.0.0.1", _closed_port())}
    with pytest.raises(pytest.skip.Exception, match="SomeDB is not reachable at 127.0.0.1:"):
        services.require(_Request(False), "db://x", addresses)


def test_an_unreachable_service_fails_under_require_services():
    addresses = {"db://x": ("SomeDB", "127.0.0.1", _closed_port())}
    with pytest.raises(pytest.fail.Exception, match=r"SomeDB is not reachable .*--require-services"):
        services.require(_Request(True), "db://x", addresses)
