#!/usr/bin/env python3
"""The servers the test suite talks to, brought up on loopback by one
idempotent command: `tools/services.sh up|down|status [SERVICE ...]`.

    postgresql  127.0.0.1:5432  trust auth for `postgres` and `root`, database `test`
    mariadb     127.0.0.1:3306  `root` with an empty password, database `test`
    redis       127.0.0.1:6379
    nats        127.0.0.1:4222  JetStream enabled
    kafka       127.0.0.1:9092  one broker in KRaft mode (controller on 127.0.0.1:9093)

`up` first asks each address whether the expected server answers there with
the expected settings (a protocol handshake, not only an open port): one
that does is reused and left alone. Otherwise the server is installed when
missing (Debian's packages for PostgreSQL, MariaDB, Redis and NATS, and
Chromium for the Spark UI test; Kafka's jars from Maven Central at a pinned
version, cached in KAFKA_CACHE so a second `up` downloads nothing) and
started in the background, its data and logs under SERVICES_DIR, its pid
recorded there. `down` stops only what `up` started, by those pids. A
port held by something that is not the expected server, a package that
cannot be installed, a data directory a server cannot start from: each
fails naming the service, the command and the last lines it printed.

Environment:
    BEAM_SPARK_SERVICES_DIR  data, logs and pids (default /var/tmp/beam-spark-runner-services-<uid>)
    BEAM_SPARK_CACHE_DIR     downloads kept across runs (default ~/.cache/beam-spark-runner);
                             Kafka's jars are in <it>/kafka/<version>/libs
    BEAM_SPARK_TEST_POSTGRESQL, BEAM_SPARK_TEST_MARIADB, BEAM_SPARK_TEST_REDIS,
    BEAM_SPARK_TEST_NATS, BEAM_SPARK_TEST_KAFKA
                             a server the user already runs, as the tests read it
                             (postgresql://user@host:port/db, mysql://user@host:port/db,
                             redis://host:port/0, nats://host:port, host:port): `up` checks
                             it answers and never installs or starts that service.

Needs only the Python standard library (it runs before the project's
virtualenv exists).
"""

import os
import pwd
import shutil
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
    probe_kafka,
    probe_mariadb,
    probe_nats,
    probe_postgresql,
    probe_redis,
)

KAFKA_VERSION = "4.1.1"
SCALA_VERSION = "2.13"
LOG4J_VERSION = "2.24.3"
# A fixed cluster id: the broker's data directory is formatted once with it.
KAFKA_CLUSTER_ID = "YmVhbS1zcGFyay1ydW5uZXI"


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


class _Database(Service):
    """A database server the tests log into without a password, as each of
    `users` (the first also names an external URL's default user), into
    database `test`."""

    users = ()

    def _parse_external(self, url):
        parsed = urllib.parse.urlsplit(url)
        self.users = (parsed.username or self.users[0],)
        self.database = parsed.path.lstrip("/") or "test"
        return parsed.hostname or "127.0.0.1", parsed.port or self.port

    def login(self, user, database):
        raise NotImplementedError

    def probe(self):
        database = self.database if self.external else "test"
        for user in self.users:
            problem = self.login(user, database)
            if problem:
                return problem
        return None


class PostgreSQL(_Database):
    name = "postgresql"
    port = 5432
    env_var = "BEAM_SPARK_TEST_POSTGRESQL"
    process_marker = "postgres"
    users = ("postgres", "root")

    def login(self, user, database):
        return probe_postgresql(self.host, self.port, user, database)

    def bin_dir(self):
        initdb = _find("/usr/lib/postgresql/*/bin/initdb")
        return os.path.dirname(initdb) if initdb else None

    def install(self):
        if self.bin_dir() is None:
            apt_install(self.name, ["postgresql"])

    def start(self):
        user = _service_user("postgres")
        bin_dir = self.bin_dir()
        os.makedirs(self.dir, exist_ok=True)
        _chown_tree(self.dir, user)
        if not os.path.exists(os.path.join(self.data_dir(), "PG_VERSION")):
            _run(
                self.name,
                [os.path.join(bin_dir, "initdb"), "-D", self.data_dir(), "-A", "trust", "-U", "postgres", "--no-sync"],
                user=user,
            )
        options = "-p %d -c listen_addresses=127.0.0.1 -c unix_socket_directories=%s -c fsync=off" % (
            self.port,
            self.dir,
        )
        try:
            _run(
                self.name,
                [
                    os.path.join(bin_dir, "pg_ctl"),
                    "-D",
                    self.data_dir(),
                    "-l",
                    self.log,
                    "-o",
                    options,
                    "-w",
                    "-t",
                    "60",
                    "start",
                ],
                user=user,
            )
        except ServiceError as error:
            raise ServiceError(
                "%s\nits log %s ends:\n%s\nIf its data directory %s is broken, remove it and run `up` again."
                % (error, self.log, _tail(_read(self.log)), self.data_dir())
            ) from None
        pid = int(_read(os.path.join(self.data_dir(), "postmaster.pid")).splitlines()[0])
        with open(self.pid_file, "w") as f:
            f.write(str(pid))
        psql = [
            os.path.join(bin_dir, "psql"),
            "-h",
            self.dir,
            "-p",
            str(self.port),
            "-U",
            "postgres",
            "-d",
            "postgres",
            "-v",
            "ON_ERROR_STOP=1",
            "-tA",
            "-c",
        ]
        if not _run(self.name, psql + ["SELECT 1 FROM pg_roles WHERE rolname = 'root'"], user=user).strip():
            _run(self.name, psql + ["CREATE ROLE root SUPERUSER LOGIN"], user=user)
        if not _run(self.name, psql + ["SELECT 1 FROM pg_database WHERE datname = 'test'"], user=user).strip():
            _run(self.name, psql + ["CREATE DATABASE test"], user=user)

    def stop(self, pid):
        user = _service_user("postgres")
        _run(
            self.name,
            [os.path.join(self.bin_dir(), "pg_ctl"), "-D", self.data_dir(), "-m", "fast", "-w", "stop"],
            user=user,
        )


class MariaDB(_Database):
    name = "mariadb"
    port = 3306
    env_var = "BEAM_SPARK_TEST_MARIADB"
    process_marker = "mariadbd"
    users = ("root",)

    def login(self, user, database):
        return probe_mariadb(self.host, self.port, user, database)

    def install(self):
        if not (shutil.which("mariadbd") or os.path.exists("/usr/sbin/mariadbd")):
            apt_install(self.name, ["mariadb-server", "mariadb-client"])

    def start(self):
        user = _service_user("mysql")
        socket_path = os.path.join(self.dir, "mysqld.sock")
        fresh = not os.path.isdir(os.path.join(self.data_dir(), "mysql"))
        if fresh:
            _run(
                self.name,
                [
                    "mariadb-install-db",
                    "--no-defaults",
                    "--datadir=" + self.data_dir(),
                    "--auth-root-authentication-method=normal",
                    "--skip-test-db",
                ]
                + (["--user=" + user] if user else []),
            )
        _chown_tree(self.dir, user)
        if os.path.exists(socket_path):  # left by a server that was killed
            os.unlink(socket_path)
        self._spawn(
            [
                shutil.which("mariadbd") or "/usr/sbin/mariadbd",
                "--no-defaults",
                "--datadir=" + self.data_dir(),
                "--socket=" + socket_path,
                "--port=%d" % self.port,
                "--bind-address=127.0.0.1",
                "--pid-file=" + os.path.join(self.dir, "mariadbd.pid"),
                "--log-error=" + self.log,
                "--innodb-flush-log-at-trx-commit=2",
                "--max-connections=500",
            ]
            + (["--user=" + user] if user else [])
        )
        client = [shutil.which("mariadb") or "mariadb", "--no-defaults", "--socket=" + socket_path, "-uroot", "-e"]
        # The socket file appears when mariadbd binds it, which can be before it
        # accepts connections (and a file left by a killed server accepts none):
        # wait until the server answers on it.
        deadline = time.time() + 60
        while True:
            if self.recorded_pid() is None:
                raise ServiceError(
                    "mariadb exited while starting; its log %s ends:\n%s" % (self.log, _tail(_read(self.log)))
                )
            try:
                _run(self.name, client + ["SELECT 1"], timeout=30)
                break
            except ServiceError:
                if time.time() >= deadline:
                    raise
            time.sleep(0.2)
        # The tests connect over TCP from 127.0.0.1 as root without a password.
        _run(
            self.name,
            client
            + [
                "CREATE DATABASE IF NOT EXISTS test; "
                "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY ''; "
                "GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION; "
                "ALTER USER 'root'@'localhost' IDENTIFIED VIA mysql_native_password USING PASSWORD(''); "
                "FLUSH PRIVILEGES;"
            ],
        )


class Redis(Service):
    name = "redis"
    port = 6379
    env_var = "BEAM_SPARK_TEST_REDIS"
    process_marker = "redis-server"

    def probe(self):
        return probe_redis(self.host, self.port)

    def install(self):
        if not (shutil.which("redis-server") or os.path.exists("/usr/bin/redis-server")):
            apt_install(self.name, ["redis-server"])

    def start(self):
        os.makedirs(self.data_dir(), exist_ok=True)
        self._spawn(
            [
                shutil.which("redis-server") or "/usr/bin/redis-server",
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--dir",
                self.data_dir(),
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
                "--protected-mode",
                "no",
            ]
        )


def nats_server_binary():
    return shutil.which("nats-server") or _find("/usr/bin/nats-server", "/usr/sbin/nats-server")


class Nats(Service):
    name = "nats"
    port = 4222
    env_var = "BEAM_SPARK_TEST_NATS"
    process_marker = "nats-server"

    def probe(self):
        return probe_nats(self.host, self.port)

    def install(self):
        if nats_server_binary() is None:
            apt_install(self.name, ["nats-server"])

    def start(self):
        os.makedirs(self.data_dir(), exist_ok=True)
        self._spawn([nats_server_binary(), "-a", "127.0.0.1", "-p", str(self.port), "-js", "-sd", self.data_dir()])


KAFKA_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>beam-spark-runner</groupId>
  <artifactId>kafka-broker</artifactId>
  <version>1</version>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_{scala}</artifactId><version>{kafka}</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>{log4j}</version></dependency>
  </dependencies>
</project>
"""

KAFKA_LOG4J = """Configuration:
  Appenders:
    Console:
      name: STDOUT
      PatternLayout:
        Pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: WARN
      AppenderRef:
        - ref: STDOUT
"""


def kafka_libs():
    """The directory of the pinned Kafka broker's jars (present once fetched)."""
    return os.path.join(cache_dir(), "kafka", KAFKA_VERSION, "libs")


class Kafka(Service):
    name = "kafka"
    port = 9092
    controller_port = 9093
    env_var = "BEAM_SPARK_TEST_KAFKA"
    process_marker = "kafka.Kafka"

    def probe(self):
        return probe_kafka(self.host, self.port)

    def install(self):
        """Fetches org.apache.kafka:kafka_2.13 and its runtime dependencies
        from Maven Central into the cache (once: the directory is complete
        only when its marker file exists)."""
        libs = kafka_libs()
        if os.path.exists(os.path.join(libs, ".complete")):
            return
        java = shutil.which("java")
        if java is None:
            raise ServiceError("kafka: no `java` on the PATH (the broker needs Java 17)")
        mvn = shutil.which("mvn")
        if mvn is None:
            if _is_root():
                apt_install(self.name, ["maven"])
                mvn = shutil.which("mvn")
            else:
                raise ServiceError("kafka: Maven (`mvn`) is needed once to fetch Kafka's jars into %s" % libs)
        build = os.path.join(os.path.dirname(libs), "resolve")
        os.makedirs(build, exist_ok=True)
        with open(os.path.join(build, "pom.xml"), "w") as f:
            f.write(KAFKA_POM.format(scala=SCALA_VERSION, kafka=KAFKA_VERSION, log4j=LOG4J_VERSION))
        partial = libs + ".partial"
        shutil.rmtree(partial, ignore_errors=True)
        try:
            _run(
                self.name,
                [
                    mvn,
                    "-B",
                    "-q",
                    "-f",
                    os.path.join(build, "pom.xml"),
                    "dependency:copy-dependencies",
                    "-DincludeScope=runtime",
                    "-DoutputDirectory=" + partial,
                ],
            )
        except ServiceError as error:
            raise ServiceError(
                "%s\nKafka %s's jars (org.apache.kafka:kafka_%s:%s) could not be fetched from Maven Central into "
                "%s; with no network, copy them there from a machine that has them."
                % (error, KAFKA_VERSION, SCALA_VERSION, KAFKA_VERSION, libs)
            ) from None
        shutil.rmtree(libs, ignore_errors=True)
        os.rename(partial, libs)
        open(os.path.join(libs, ".complete"), "w").close()

    def _java(self, main, *args):
        return [
            "java",
            "-Xmx512m",
            "-Xms128m",
            "-Dlog4j2.configurationFile=" + os.path.join(self.dir, "log4j2.yaml"),
            "-cp",
            os.path.join(kafka_libs(), "*"),
            main,
            *args,
        ]

    def start(self):
        if _listening(self.host, self.controller_port):
            raise ServiceError("kafka: its controller port %s:%d is taken" % (self.host, self.controller_port))
        os.makedirs(self.data_dir(), exist_ok=True)
        config = os.path.join(self.dir, "server.properties")
        with open(config, "w") as f:
            f.write(
                "\n".join(
                    [
                        "process.roles=broker,controller",
                        "node.id=1",
                        "controller.quorum.voters=1@127.0.0.1:%d" % self.controller_port,
                        "listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d"
                        % (self.port, self.controller_port),
                        "advertised.listeners=PLAINTEXT://127.0.0.1:%d" % self.port,
                        "controller.listener.names=CONTROLLER",
                        "inter.broker.listener.name=PLAINTEXT",
                        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                        "log.dirs=" + self.data_dir(),
                        "num.partitions=1",
                        "offsets.topic.replication.factor=1",
                        "transaction.state.log.replication.factor=1",
                        "transaction.state.log.min.isr=1",
                        "share.coordinator.state.topic.replication.factor=1",
                        "share.coordinator.state.topic.min.isr=1",
                        "group.initial.rebalance.delay.ms=0",
                        "auto.create.topics.enable=true",
                        # Tests produce messages stamped with event times
                        # months in the past: time-based retention (7 days by
                        # default, checked every 5 minutes) would delete them
                        # at a moment no test controls.
                        "log.retention.ms=-1",
                        "",
                    ]
                )
            )
        with open(os.path.join(self.dir, "log4j2.yaml"), "w") as f:
            f.write(KAFKA_LOG4J)
        if not os.path.exists(os.path.join(self.data_dir(), "meta.properties")):
            _run(self.name, self._java("kafka.tools.StorageTool", "format", "-t", KAFKA_CLUSTER_ID, "-c", config))
        self._spawn(self._java("kafka.Kafka", config))


class Chromium:
    """Not a server: the browser the Spark UI test drives, from Debian's package."""

    name = "chromium"

    def binary(self):
        return shutil.which("chromium") or _find("/usr/bin/chromium")

    def up(self):
        if self.binary():
            return "installed"
        apt_install(self.name, ["chromium"])
        return "installed now"

    def status(self):
        return ("chromium", self.binary() or "-", bool(self.binary()))

    def down(self):
        return "nothing to stop"


SERVICES = {service.name: service for service in (PostgreSQL, MariaDB, Redis, Nats, Kafka)}


def _selected(names):
    unknown = [n for n in names if n not in SERVICES and n != "chromium"]
    if unknown:
        raise SystemExit("unknown service %s; known: %s, chromium" % (", ".join(unknown), ", ".join(SERVICES)))
    return list(names) or list(SERVICES) + ["chromium"]


def main(argv):
    if not argv or argv[0] not in ("up", "down", "status"):
        print("usage: tools/services.sh up|down|status [%s|chromium ...]" % "|".join(SERVICES), file=sys.stderr)
        return 2
    action, names = argv[0], _selected(argv[1:])
    failures = []
    for name in names:
        service = Chromium() if name == "chromium" else SERVICES[name]()
        started = time.time()
        try:
            if action == "status":
                if name == "chromium":
                    _, where, ok = service.status()
                    print("%-11s %-22s %s" % (name, where, "installed" if ok else "not installed"))
                else:
                    up, detail = service.check()
                    owner = " (started by this script)" if not service.external and service.recorded_pid() else ""
                    print("%-11s %-22s %s%s" % (name, service.address, "up" if up else "down: " + detail, owner))
                    if not up:
                        failures.append(name)
            else:
                outcome = service.up() if action == "up" else service.down()
                address = getattr(service, "address", "")
                print("%-11s %-22s %s (%.1f s)" % (name, address, outcome, time.time() - started), flush=True)
        except ServiceError as error:
            print("FAILED %s" % error, file=sys.stderr, flush=True)
            failures.append(name)
    if failures and action != "down":
        if action == "up":
            print("services not up: %s" % ", ".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
