"""Servers of a test's own, for faults that stop a server: a PostgreSQL
cluster, a NATS server with JetStream and a Kafka broker, each on a free port with its data
in a directory of the test's, started from the machine's installed binaries
(the ones behind the shared services of tests/services.py). Stopping one
disturbs no other test running beside it on the shared servers.

A server that cannot be started fails the test naming the binary and what
it printed, or skips when its binary is not installed (a failure under
`--require-services`, so CI)."""

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(port, process_name, log_path, timeout_s=30):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    log = open(log_path).read()[-2000:] if os.path.exists(log_path) else ""
    raise RuntimeError("%s did not listen on 127.0.0.1:%d within %d s: %s" % (process_name, port, timeout_s, log))


def _binary(request, pattern, name):
    """The newest installed binary matching `pattern` (a glob, or a
    program name looked up on the PATH first): the Debian packages
    tools/services.sh installs put them there."""
    found = sorted(glob.glob(pattern))
    if not found and shutil.which(os.path.basename(pattern)):
        found = [shutil.which(os.path.basename(pattern))]
    if not found:
        message = "%s is not installed (%s)" % (name, pattern)
        if request.config.getoption("--require-services"):
            pytest.fail(message + " (--require-services)")
        pytest.skip(message)
    return found[-1]


class _ServerProcess:
    """A server run as one child process, with its files in `_directory`."""

    _process = None
    _directory = None

    def kill(self):
        """Stops the server as a crash would (SIGKILL)."""
        if self._process is not None:
            self._process.send_signal(signal.SIGKILL)
            self._process.wait()
            self._process = None

    def close(self):
        self.kill()
        shutil.rmtree(self._directory, ignore_errors=True)


class PrivateNats(_ServerProcess):
    """A nats-server with JetStream whose store survives its restarts."""

    def __init__(self, request):
        self._binary = _binary(request, "/usr/*bin/nats-server", "nats-server")
        self._directory = tempfile.mkdtemp(prefix="beam-test-nats-")
        self.port = _free_port()
        self.url = "nats://127.0.0.1:%d" % self.port
        self._log = os.path.join(self._directory, "server.log")
        self._process = None
        self.start()

    def start(self):
        self._process = subprocess.Popen(
            [self._binary, "-a", "127.0.0.1", "-p", str(self.port), "-js", "-sd", self._directory, "-l", self._log],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _wait_for_port(self.port, "nats-server", self._log)


class PrivatePostgres:
    """A PostgreSQL cluster (trust auth, user `postgres`), run as the
    `postgres` user when the tests run as root, as PostgreSQL requires."""

    def __init__(self, request):
        initdb = _binary(request, "/usr/lib/postgresql/*/bin/initdb", "PostgreSQL's initdb")
        self._bin = os.path.dirname(initdb)
        self._directory = tempfile.mkdtemp(prefix="beam-test-postgresql-")
        self._data = os.path.join(self._directory, "data")
        self._log = os.path.join(self._directory, "server.log")
        self.port = _free_port()
        self.url = "postgresql://postgres@127.0.0.1:%d/postgres" % self.port
        self._user = None
        if os.geteuid() == 0:
            self._user = pwd.getpwnam("postgres")
            os.chown(self._directory, self._user.pw_uid, self._user.pw_gid)
        self._run("initdb", "-D", self._data, "-A", "trust", "-U", "postgres", "--no-sync")
        self.start()

    def _run(self, program, *args):
        command = [os.path.join(self._bin, program), *args]
        if self._user is not None:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError("%s failed: %s%s" % (" ".join(command), done.stdout[-2000:], done.stderr[-2000:]))

    def start(self):
        options = "-p %d -c listen_addresses=127.0.0.1 -c unix_socket_directories=%s" % (self.port, self._directory)
        self._run("pg_ctl", "-D", self._data, "-l", self._log, "-o", options, "-w", "-t", "60", "start")
        _wait_for_port(self.port, "postgres", self._log)

    def stop(self, mode="immediate"):
        """Stops the server; "immediate" aborts every session and the
        server as a crash would (recovery runs at the next start)."""
        self._run("pg_ctl", "-D", self._data, "-m", mode, "-w", "-t", "60", "stop")

    def close(self):
        try:
            self.stop()
        except RuntimeError:
            pass  # already stopped
        shutil.rmtree(self._directory, ignore_errors=True)


def _service_brokers():
    """tools/service_brokers.py: the services script's Kafka jars and config."""
    import importlib.util

    tools = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools", "service_brokers.py")
    spec = importlib.util.spec_from_file_location("service_brokers", tools)
    brokers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(brokers)
    return brokers


def _kafka_libs(request, brokers):
    """The Kafka broker's jars the services script fetched."""
    libs = brokers.kafka_libs()
    if not os.path.exists(os.path.join(libs, ".complete")) or not shutil.which("java"):
        message = "Kafka's jars are not in %s (tools/services.sh up fetches them) or java is missing" % libs
        if request.config.getoption("--require-services"):
            pytest.fail(message + " (--require-services)")
        pytest.skip(message)
    return libs, brokers.KAFKA_CLUSTER_ID


class PrivateKafka(_ServerProcess):
    """A one-node KRaft Kafka broker whose log survives its restarts, on the
    same ports each time, from the jars tools/services.sh fetched."""

    def __init__(self, request):
        brokers = _service_brokers()
        self._libs, cluster_id = _kafka_libs(request, brokers)
        self._directory = tempfile.mkdtemp(prefix="beam-test-kafka-")
        self.port, self._controller_port = _free_port(), _free_port()
        self.servers = "127.0.0.1:%d" % self.port
        self._log = os.path.join(self._directory, "server.log")
        self._config = os.path.join(self._directory, "server.properties")
        self._data = os.path.join(self._directory, "data")
        with open(self._config, "w") as f:
            f.write(brokers.kraft_properties("127.0.0.1", self.port, self._controller_port, self._data))
        done = subprocess.run(
            self._java("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", self._config),
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0:
            raise RuntimeError("Kafka's StorageTool failed: %s%s" % (done.stdout[-2000:], done.stderr[-2000:]))
        self._process = None
        self.start()

    def _java(self, main, *args):
        return ["java", "-Xmx384m", "-Xms64m", "-cp", os.path.join(self._libs, "*"), main, *args]

    def start(self):
        with open(self._log, "ab") as log:
            self._process = subprocess.Popen(
                self._java("kafka.Kafka", self._config), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        _wait_for_port(self.port, "Kafka", self._log, timeout_s=90)
