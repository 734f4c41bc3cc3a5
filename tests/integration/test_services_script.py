"""tools/services.sh, the script that brings up the servers the suite uses:
what it reports for the servers the suite runs against, that a second `up`
starts and downloads nothing, that a port held by something else is a
clear error naming the service rather than a hang, and that a server the
user runs elsewhere is reused."""

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

import pytest

from tests import services
from tests.private_servers import PrivatePostgres

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "tools", "services.sh")
_SPEC = importlib.util.spec_from_file_location("services_script", os.path.join(REPO, "tools", "services.py"))
script = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(script)

NAMES = ["postgresql", "mariadb", "redis", "nats", "kafka"]


def _run(*args, env=None, timeout=120):
    return subprocess.run(
        [SCRIPT, *args], capture_output=True, text=True, timeout=timeout, env=dict(os.environ, **(env or {}))
    )


@pytest.fixture
def every_service(request):
    for url in (services.POSTGRESQL, services.MARIADB, services.REDIS, services.NATS, services.KAFKA):
        services.require(request, url)


def test_status_reports_every_service_up_at_its_address(every_service):
    done = _run("status")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = {line.split()[0]: line for line in done.stdout.splitlines()}
    for name in NAMES:
        assert " up" in lines[name], lines[name]
    assert "127.0.0.1:9092" in lines["kafka"] or os.environ.get("BEAM_SPARK_TEST_KAFKA")


def test_a_second_up_starts_nothing_and_downloads_nothing(every_service):
    libs = script.kafka_libs()
    before = os.path.getmtime(libs) if os.path.exists(libs) else None
    done = _run("up", *NAMES)
    assert done.returncode == 0, done.stdout + done.stderr
    for line in done.stdout.splitlines():
        assert "started (" not in line and "installed now" not in line, line
        assert "reused" in line or "already running" in line, line
    if before is not None:
        assert os.path.getmtime(libs) == before


class _Impostor:
    """A listener on a free port that is no server of ours: it says
    `greeting` (or nothing at all) to whoever connects."""

    def __init__(self, greeting):
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen()
        self.port = self.socket.getsockname()[1]
        self.greeting = greeting
        self.connections = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return
            self.connections.append(connection)
            if self.greeting:
                connection.sendall(self.greeting)

    def close(self):
        self.socket.close()
        for connection in self.connections:
            connection.close()


@pytest.mark.parametrize("greeting", [b"HTTP/1.0 400 Bad Request\r\n\r\n", b""], ids=["another-protocol", "silent"])
@pytest.mark.parametrize(
    "probe",
    [
        lambda port: script.probe_postgresql("127.0.0.1", port, "postgres", "test"),
        lambda port: script.probe_mariadb("127.0.0.1", port, "root", "test"),
        lambda port: script.probe_redis("127.0.0.1", port),
        lambda port: script.probe_nats("127.0.0.1", port),
        lambda port: script.probe_kafka("127.0.0.1", port),
    ],
    ids=NAMES,
)
def test_a_port_held_by_something_else_is_not_taken_for_the_server(greeting, probe):
    impostor = _Impostor(greeting)
    started = time.monotonic()
    try:
        try:
            problem = probe(impostor.port)
        except (OSError, ConnectionError, ValueError) as error:
            problem = str(error) or type(error).__name__
        assert problem, "an impostor passed for the server"
    finally:
        impostor.close()
    assert time.monotonic() - started < 10  # an answer, never a hang


def test_up_refuses_an_address_that_answers_as_another_server_naming_the_service():
    impostor = _Impostor(b"-ERR not what you think\r\n")
    try:
        done = _run("up", "redis", env={"BEAM_SPARK_TEST_REDIS": "redis://127.0.0.1:%d/0" % impostor.port})
    finally:
        impostor.close()
    assert done.returncode == 1
    assert "redis" in done.stderr and "BEAM_SPARK_TEST_REDIS" in done.stderr, done.stderr
    assert "not a Redis server" in done.stderr, done.stderr


def test_a_postgresql_the_user_runs_elsewhere_is_reused_not_started(request):
    server = PrivatePostgres(request)
    try:
        done = _run("up", "postgresql", env={"BEAM_SPARK_TEST_POSTGRESQL": server.url})
        assert done.returncode == 0, done.stdout + done.stderr
        assert "reused" in done.stdout and "127.0.0.1:%d" % server.port in done.stdout, done.stdout
        status = _run("status", "postgresql", env={"BEAM_SPARK_TEST_POSTGRESQL": server.url})
        assert " up" in status.stdout and "started by this script" not in status.stdout, status.stdout
        # The probe logs in, so a server that asks for a password is not "up".
        wrong = script.probe_postgresql("127.0.0.1", server.port, "postgres", "no_such_database")
        assert "no_such_database" in wrong, wrong
    finally:
        server.close()


def test_mariadb_starts_over_the_socket_file_a_killed_server_left(request, monkeypatch):
    """A server killed with SIGKILL leaves its socket file behind; the next
    `up` starts a new server that answers, and `down` stops it."""
    services.require(request, services.MARIADB)  # the machine has MariaDB installed
    # The server may run as the mysql user: its directory must be reachable
    # by it (pytest's own temporary directories are not).
    directory = tempfile.mkdtemp(prefix="beam-test-services-", dir="/var/tmp")
    os.chmod(directory, 0o755)
    monkeypatch.setenv("BEAM_SPARK_SERVICES_DIR", directory)
    server = script.MariaDB()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        server.port = s.getsockname()[1]
    try:
        assert server.up() == "started"
        os.kill(server.recorded_pid(), signal.SIGKILL)  # leaves its socket file behind
        deadline = time.time() + 30
        # A process's command line goes before its sockets close: wait for both.
        while (server.recorded_pid() is not None or script._listening("127.0.0.1", server.port)) and (
            time.time() < deadline
        ):
            time.sleep(0.1)
        assert os.path.exists(os.path.join(server.dir, "mysqld.sock"))
        assert server.up() == "started"
        assert script.probe_mariadb("127.0.0.1", server.port, "root", "test") is None
        assert server.down() == "stopped"
    finally:
        server.down()
        shutil.rmtree(directory, ignore_errors=True)
