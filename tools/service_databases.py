"""The SQL servers of tools/services.py: PostgreSQL and MariaDB from
Debian's packages, each in a data directory of its own under the services
directory. Standard library only."""

import os
import shutil
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from service_base import Service, ServiceError, _chown_tree, _find, _read, _run, _service_user, _tail, apt_install  # noqa: E402 -- beside this file
from service_probes import probe_mariadb, probe_postgresql  # noqa: E402


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
