"""What tools/services.py's servers share: where their data, logs and
downloads live, running a command for a service (a failure names it),
Debian packages, pid files, and the `Service` base class that asks an
address whether the expected server answers before it starts one.

Standard library only (it runs before the project's virtualenv exists)."""

import os
import pwd
import signal
import struct
import subprocess
import sys
import time
import urllib.parse

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# service_probes.py lies beside this file, also when it is loaded by path.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from service_probes import (  # noqa: E402 -- beside this file
    listening as _listening,
)


def services_dir():
    return os.environ.get("BEAM_SPARK_SERVICES_DIR") or "/var/tmp/beam-spark-runner-services-%d" % os.getuid()


def cache_dir():
    return os.environ.get("BEAM_SPARK_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "beam-spark-runner"
    )


class ServiceError(Exception):
    """A service that cannot be brought up; the message names it and what to do."""


def _tail(text, lines=15):
    return "\n".join((text or "").strip().splitlines()[-lines:])


def _run(service, command, timeout=600, env=None, user=None):
    """Runs `command`; a failure raises naming the service, the command and its output's end."""
    if user is not None:
        command = ["runuser", "-u", user, "--", *command]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL
        )
    except FileNotFoundError as error:
        raise ServiceError("%s: %s: %s" % (service, " ".join(command), error)) from None
    except subprocess.TimeoutExpired as error:
        raise ServiceError(
            "%s: `%s` did not finish within %d s; its output ended:\n%s"
            % (service, " ".join(command), timeout, _tail((error.stdout or b"").decode(errors="replace")))
        ) from None
    if done.returncode != 0:
        raise ServiceError(
            "%s: `%s` failed (exit %d):\n%s"
            % (service, " ".join(command), done.returncode, _tail(done.stdout + "\n" + done.stderr))
        )
    return done.stdout


# --- the services --------------------------------------------------------------


def _is_root():
    return os.geteuid() == 0


_APT_UPDATED = []


def apt_install(service, packages):
    """Installs Debian packages (as root); the servers they bring are not
    started by the packages' own scripts (we start ours)."""
    if not _is_root():
        raise ServiceError(
            "%s: %s is not installed, and only root can install it: run `apt-get install %s` as root, "
            "or point the tests at a server you run (see tools/services.py)"
            % (service, " ".join(packages), " ".join(packages))
        )
    policy = "/usr/sbin/policy-rc.d"
    placed_policy = not os.path.exists(policy)
    if placed_policy:  # Debian's way to keep a package's postinst from starting its daemon
        with open(policy, "w") as f:
            f.write("#!/bin/sh\nexit 101\n")
        os.chmod(policy, 0o755)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    try:
        if not _APT_UPDATED:
            _run(service, ["apt-get", "update", "-q"], env=env)
            _APT_UPDATED.append(True)
        _run(service, ["apt-get", "install", "-y", "-q", "--no-install-recommends", *packages], env=env)
    finally:
        if placed_policy:
            os.unlink(policy)


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A server that has exited but whose parent (a process that started it,
    # such as a test) has not reaped it yet is a zombie: not alive.
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class Service:
    """One server: where it should answer, how to ask it, how to start it."""

    name = ""
    host = "127.0.0.1"
    port = 0
    env_var = ""

    def __init__(self):
        self.dir = os.path.join(services_dir(), self.name)
        self.pid_file = os.path.join(self.dir, "pid")
        self.log = os.path.join(self.dir, "server.log")
        self.external = os.environ.get(self.env_var)
        if self.external:
            self.host, self.port = self._parse_external(self.external)

    def _parse_external(self, url):
        parsed = urllib.parse.urlsplit(url if "//" in url else "//" + url)
        return parsed.hostname or "127.0.0.1", parsed.port or self.port

    @property
    def address(self):
        return "%s:%d" % (self.host, self.port)

    def probe(self):
        """None when the expected server answers with the expected settings."""
        raise NotImplementedError

    def check(self):
        """(up, detail): detail says what answers when it is not the expected server."""
        if not _listening(self.host, self.port):
            return False, "nothing listens"
        try:
            problem = self.probe()
        except (OSError, ConnectionError, ValueError, struct.error) as error:
            problem = "the server did not answer as expected (%s)" % error
        return problem is None, problem or "up"

    def recorded_pid(self):
        try:
            with open(self.pid_file) as f:
                pid = int(f.read().strip())
        except (OSError, ValueError):
            return None
        return pid if _pid_alive(pid) and self.process_marker in _cmdline(pid) else None

    process_marker = ""

    def up(self):
        up, detail = self.check()
        if up:
            if self.external or self.recorded_pid() is None:
                return "reused"
            return "already running (started by this script)"
        if self.external:
            raise ServiceError(
                "%s: %s=%s does not answer as expected: %s" % (self.name, self.env_var, self.external, detail)
            )
        if detail != "nothing listens":
            raise ServiceError(
                "%s: %s is taken by something that is not the expected server (%s); stop it, or point the "
                "tests at your server with %s" % (self.name, self.address, detail, self.env_var)
            )
        self.install()
        os.makedirs(self.dir, exist_ok=True)
        self.start()
        self._wait_until_up()
        return "started"

    def install(self):
        pass

    def start(self):
        raise NotImplementedError

    def _wait_until_up(self, timeout_s=90):
        deadline = time.time() + timeout_s
        detail = ""
        while time.time() < deadline:
            up, detail = self.check()
            if up:
                return
            pid = self.recorded_pid()
            if pid is None and os.path.exists(self.pid_file) and not self._managed_elsewhere():
                break  # the process we started has exited
            time.sleep(0.3)
        raise ServiceError(
            "%s did not come up at %s (%s); its log %s ends:\n%s\nIf its data directory %s is broken, "
            "`tools/services.sh down %s`, remove that directory and run `up` again."
            % (self.name, self.address, detail, self.log, _tail(_read(self.log)), self.data_dir(), self.name)
        )

    def _managed_elsewhere(self):
        return False

    def data_dir(self):
        return os.path.join(self.dir, "data")

    def _spawn(self, command, user=None, cwd=None):
        """Starts `command` in the background (its own session, output to the log), recording its pid."""
        if user is not None:
            command = ["runuser", "-u", user, "--", *command]
        with open(self.log, "ab") as log:
            process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=cwd or self.dir,
            )
        with open(self.pid_file, "w") as f:
            f.write(str(process.pid))
        time.sleep(0.2)
        if process.poll() is not None and process.returncode != 0:
            raise ServiceError(
                "%s: `%s` exited at once (exit %d); its log %s ends:\n%s"
                % (self.name, " ".join(command), process.returncode, self.log, _tail(_read(self.log)))
            )

    def down(self):
        pid = self.recorded_pid()
        if pid is None:
            if os.path.exists(self.pid_file):
                os.unlink(self.pid_file)
            return "not started by this script"
        self.stop(pid)
        deadline = time.time() + 60
        while _pid_alive(pid) and time.time() < deadline:
            time.sleep(0.2)
        if _pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
        os.unlink(self.pid_file)
        return "stopped"

    def stop(self, pid):
        os.kill(pid, signal.SIGTERM)


def _read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _find(*candidates):
    for candidate in candidates:
        matches = sorted(__import__("glob").glob(candidate))
        if matches:
            return matches[-1]
    return None


def _service_user(name):
    """The account a server runs as: `name` when the script runs as root (the
    servers refuse root), else the caller."""
    if not _is_root():
        return None
    try:
        pwd.getpwnam(name)
    except KeyError:
        _run("services", ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name])
    return name


def _chown_tree(path, user):
    if user is None:
        return
    entry = pwd.getpwnam(user)
    for root, dirs, files in os.walk(path):
        os.chown(root, entry.pw_uid, entry.pw_gid)
        for name in files:
            os.chown(os.path.join(root, name), entry.pw_uid, entry.pw_gid)
