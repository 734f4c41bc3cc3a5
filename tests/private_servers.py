"""Servers of a test's own, for faults that stop a server: a PostgreSQL
cluster and a NATS server with JetStream, each on a free port with its data
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


class PrivateNats:
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

    def kill(self):
        """Stops the server as a crash would (SIGKILL)."""
        if self._process is not None:
            self._process.send_signal(signal.SIGKILL)
            self._process.wait()
            self._process = None

    def close(self):
        self.kill()
        shutil.rmtree(self._directory, ignore_errors=True)


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
