"""The external services tests run against, over real connections, at the
addresses `tools/services.sh up` brings them up on (the README's test
command runs it first): PostgreSQL (127.0.0.1:5432, trust auth, database
`test`), MariaDB (127.0.0.1:3306, root without a password, database
`test`), Redis (127.0.0.1:6379), NATS with JetStream (127.0.0.1:4222) and
Kafka (127.0.0.1:9092). Servers the user already runs elsewhere are named
by the same environment variables the script reads (BEAM_SPARK_TEST_POSTGRESQL,
BEAM_SPARK_TEST_MARIADB, BEAM_SPARK_TEST_REDIS, BEAM_SPARK_TEST_NATS as URLs,
BEAM_SPARK_TEST_KAFKA as host:port).

A test that needs one asks for its fixture (`postgresql_url`,
`mariadb_url`, or `database_url`, parametrized over both). When the
service is unreachable the test skips, naming the service, except under
`--require-services` (the README's test command, so CI), where it fails.
"""

import os
import socket
import urllib.parse
import uuid

import pytest

POSTGRESQL = os.environ.get("BEAM_SPARK_TEST_POSTGRESQL") or "postgresql://postgres@127.0.0.1:5432/test"
MARIADB = os.environ.get("BEAM_SPARK_TEST_MARIADB") or "mysql://root@127.0.0.1:3306/test"
REDIS = os.environ.get("BEAM_SPARK_TEST_REDIS") or "redis://127.0.0.1:6379/0"
NATS = os.environ.get("BEAM_SPARK_TEST_NATS") or "nats://127.0.0.1:4222"
KAFKA = os.environ.get("BEAM_SPARK_TEST_KAFKA") or "127.0.0.1:9092"
BY_NAME = {"postgresql": POSTGRESQL, "mariadb": MARIADB, "redis": REDIS, "nats": NATS, "kafka": KAFKA}
_NAMES = {POSTGRESQL: "PostgreSQL", MARIADB: "MariaDB", REDIS: "Redis", NATS: "NATS", KAFKA: "Kafka"}


def host_port(url):
    """(host, port) of a service URL (or of Kafka's host:port)."""
    parsed = urllib.parse.urlsplit(url if "//" in url else "//" + url)
    return parsed.hostname, parsed.port


_ADDRESSES = {url: (name,) + host_port(url) for url, name in _NAMES.items()}


def add_options(parser):
    parser.addoption(
        "--require-services",
        action="store_true",
        help="fail, rather than skip, a test whose external service (PostgreSQL, MariaDB, ...) is unreachable",
    )


def _reachable(host, port):
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


def require(request, url, addresses=_ADDRESSES):
    """`url` once its service answers; else a skip (or, under
    --require-services, a failure) naming the service."""
    name, host, port = addresses[url]
    if not _reachable(host, port):
        message = "%s is not reachable at %s:%d (tools/services.sh up starts it)" % (name, host, port)
        if request.config.getoption("--require-services"):
            pytest.fail(message + " (--require-services)")
        pytest.skip(message)
    return url


def unique_table(prefix="t"):
    return "%s_%s" % (prefix, uuid.uuid4().hex[:10])


def execute(url, *statements):
    """Runs statements on `url` in one committed transaction; returns the
    last one's rows (if it returns any)."""
    from beam_spark_runner.io.database.sql_dialects import dialect_of

    with dialect_of(url).connect() as conn:
        cursor = conn.cursor()
        rows = None
        for statement in statements:
            if isinstance(statement, tuple):
                cursor.execute(*statement)
            else:
                cursor.execute(statement)
            rows = cursor.fetchall() if cursor.description else None
        conn.commit()
        return rows


def create_slow_insert_table(url, table, sleep_s):
    """Creates PostgreSQL table `table` (entry_id TEXT, n BIGINT) whose
    every INSERT or COPY statement sleeps `sleep_s` first, so a commit holds its
    connection long enough for a test to break it."""
    execute(
        url,
        "CREATE TABLE %s (entry_id TEXT, n BIGINT)" % table,
        "CREATE OR REPLACE FUNCTION beam_test_slow_insert() RETURNS trigger AS "
        "$$ BEGIN PERFORM pg_sleep(%s); RETURN NULL; END $$ LANGUAGE plpgsql" % float(sleep_s),
        "CREATE TRIGGER slow_insert BEFORE INSERT ON %s FOR EACH STATEMENT EXECUTE FUNCTION beam_test_slow_insert()"
        % table,
    )


def drop_table(url, table):
    """Drops `table` and the staging table WriteToDatabase made beside it."""
    from beam_spark_runner.io.database.sink_protocol import staging_table
    from beam_spark_runner.io.database.sql_dialects import dialect_of

    quote = dialect_of(url).quote_table
    execute(url, "DROP TABLE IF EXISTS %s" % quote(table), "DROP TABLE IF EXISTS %s" % quote(staging_table(table)))


def row_count(url, table):
    """Rows in `table`; 0 while it does not exist yet (a sink makes it when
    its run starts)."""
    from beam_spark_runner.io.database.sql_dialects import dialect_of

    try:
        return execute(url, "SELECT COUNT(*) FROM %s" % dialect_of(url).quote_table(table))[0][0]
    except Exception:  # noqa: BLE001 -- each client names a missing table its own way
        return 0


def wait_for_rows(url, table, count, result, timeout_s=180):
    """Waits until `table` holds `count` rows while the streaming `result`
    runs; fails naming how many arrived."""
    import time

    from apache_beam.runners.runner import PipelineState

    deadline = time.time() + timeout_s
    while row_count(url, table) < count:
        assert result.state not in (PipelineState.FAILED, PipelineState.DONE), result.state
        assert time.time() < deadline, "the table has %d of %d rows" % (row_count(url, table), count)
        time.sleep(0.5)
