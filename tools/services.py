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
import shutil
import sys
import time

# The modules beside this file, also when it is loaded by path.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from service_base import REPO, ServiceError, _find, _listening, apt_install, cache_dir, services_dir  # noqa: E402,F401
from service_brokers import KAFKA_VERSION, Kafka, Nats, Redis, kafka_libs, nats_server_binary  # noqa: E402,F401
from service_databases import MariaDB, PostgreSQL  # noqa: E402,F401
from service_probes import probe_kafka, probe_mariadb, probe_nats, probe_postgresql, probe_redis  # noqa: E402,F401


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
