"""The SQL databases the runner reads and writes, behind one small interface:
PostgreSQL through psycopg 3 and MariaDB / MySQL through PyMySQL.

A dialect knows its connection URL, how it quotes names, the column types
it gives the runner's row types (Spark's type names, worker/spark_rows.py,
so the Beam <-> Spark mapping is the one the Spark I/O uses) and back, how
it bulk-inserts rows (COPY for PostgreSQL, multi-row INSERT for MariaDB),
an insert that skips a row whose key exists, and an upsert from a SELECT.
No Spark here; every statement runs on a connection the caller opens with
`connect` and commits.

Types (docs/io.md has the table):

    row type (Spark)   PostgreSQL          MariaDB / MySQL
    boolean            BOOLEAN             BOOLEAN (tinyint(1))
    byte, short        SMALLINT            SMALLINT
    integer            INTEGER             INT
    long               BIGINT              BIGINT
    float              REAL                FLOAT
    double             DOUBLE PRECISION    DOUBLE
    decimal(p, s)      NUMERIC(p, s)       DECIMAL(p, s)
    string             TEXT                LONGTEXT (VARCHAR(255) in a key)
    binary             BYTEA               LONGBLOB (VARBINARY(255) in a key)
    date               DATE                DATE
    timestamp          TIMESTAMPTZ         DATETIME(6), in UTC

Arrays, maps and nested rows have no column type here and are refused,
naming the column.
"""

import dataclasses
import re
import urllib.parse
from typing import Optional, Tuple

from beam_spark_runner.worker import spark_rows
from beam_spark_runner.worker.spark_rows import DEFAULT_DECIMAL


APPLICATION_NAME = "beam_spark_runner"


class DatabaseError(RuntimeError):
    """A database the pipeline names cannot be used as asked: the message
    names the server (without its password), the table and the problem."""


class UnmappableColumn(ValueError):
    """A column whose type has no counterpart on the other side."""


@dataclasses.dataclass(frozen=True)
class DatabaseUrl:
    """A parsed connection URL: `postgresql://user:password@host:port/db`
    or `mysql://user:password@host:port/db` (also `postgres://`,
    `mariadb://`)."""

    dialect: str  # "postgresql" | "mysql"
    host: str
    port: int
    user: Optional[str]
    password: Optional[str]
    database: Optional[str]
    query: Tuple[Tuple[str, str], ...] = ()

    def redacted(self) -> str:
        """The URL as messages show it: never with its password."""
        user = "%s@" % self.user if self.user else ""
        return "%s://%s%s:%d/%s" % (self.dialect, user, self.host, self.port, self.database or "")


_SCHEMES = {"postgresql": "postgresql", "postgres": "postgresql", "mysql": "mysql", "mariadb": "mysql"}
_DEFAULT_PORTS = {"postgresql": 5432, "mysql": 3306}


def parse_url(url: str) -> DatabaseUrl:
    parsed = urllib.parse.urlparse(url)
    dialect = _SCHEMES.get(parsed.scheme)
    if dialect is None:
        raise ValueError(
            "database URL %r: the scheme must be one of %s"
            % (urllib.parse.urlunparse(parsed._replace(netloc=parsed.hostname or "")), ", ".join(sorted(_SCHEMES)))
        )
    return DatabaseUrl(
        dialect,
        parsed.hostname or "localhost",
        parsed.port or _DEFAULT_PORTS[dialect],
        urllib.parse.unquote(parsed.username) if parsed.username else None,
        urllib.parse.unquote(parsed.password) if parsed.password is not None else None,
        parsed.path.lstrip("/") or None,
        tuple(urllib.parse.parse_qsl(parsed.query)),
    )


def dialect_of(url: str) -> "Dialect":
    parsed = parse_url(url)
    return (PostgreSQL if parsed.dialect == "postgresql" else MariaDB)(parsed)


def _simple_type(spark_type, column):
    if not isinstance(spark_type, str):
        raise UnmappableColumn(
            "column %r has type %s, which has no database column type here" % (column, spark_type.get("type"))
        )
    return spark_type


_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)$")


class Dialect:
    """What the runner needs of one kind of SQL database."""

    name = ""
    _types = {}
    _key_types = {}

    def __init__(self, url: DatabaseUrl):
        self.url = url

    def connect(self):
        """A new connection (autocommit off), or DatabaseError naming the server."""
        try:
            return self._connect()
        except Exception as e:  # noqa: BLE001 -- each client raises its own classes
            raise DatabaseError("cannot connect to %s: %s" % (self.url.redacted(), first_line(e))) from None

    def quote(self, name: str) -> str:
        raise NotImplementedError

    def is_transient(self, error) -> bool:
        """Whether `error` is a lost or refused connection (worth a new one),
        not a refusal of the statement."""
        return isinstance(error, DatabaseError) and str(error).startswith("cannot connect")

    def quote_table(self, table: str) -> str:
        """`schema.table` (or `database.table`) with each part quoted."""
        return ".".join(self.quote(part) for part in table.split("."))

    def column_type(self, spark_type, column, in_key=False) -> str:
        """The column type a new table gives a field of `spark_type`."""
        name = _simple_type(spark_type, column)
        match = _DECIMAL.match(name)
        if match:
            return self._decimal % (int(match.group(1)), int(match.group(2)))
        if in_key and name in self._key_types:
            return self._key_types[name]
        if name not in self._types:
            raise UnmappableColumn("column %r has type %s, which has no database column type here" % (column, name))
        return self._types[name]

    def to_db(self, spark_type):
        """A function turning a row field's value into what the client
        writes for a column of `spark_type`."""
        if spark_type == "timestamp":
            return self._timestamp_to_db
        return None

    def from_db(self, spark_type):
        """A function turning what the client read for a column of
        `spark_type` into the row field's value (None: as read)."""
        if spark_type == "timestamp":
            return spark_rows.reader_of("timestamp")  # a naive datetime as UTC
        return None

    def result_cursor(self, conn):
        """A cursor that streams a large result rather than loading it whole."""
        raise NotImplementedError

    def result_columns(self, cursor, query):
        """[(column, Spark type)] of `query`'s result, without running it
        in full; UnmappableColumn names a column no row type can hold."""
        raise NotImplementedError

    def split_table(self, table: str):
        """(schema or None, table name) of a dotted table name."""
        if "." in table:
            schema, name = table.rsplit(".", 1)
            return schema, name
        return None, table

    def table_columns(self, cursor, table):
        """{column: data type} of an existing table, or None if it is missing."""
        raise NotImplementedError

    def table_spark_types(self, cursor, table):
        """{column: (Spark type, nullable)} of an existing table's columns
        (the type None for a column no row field holds), or None if it is
        missing."""
        raise NotImplementedError

    def unique_keys(self, cursor, table):
        """The column sets (frozensets) of the table's unique indexes."""
        raise NotImplementedError

    def bulk_insert(self, cursor, table, columns, rows, trusted=()):
        """Inserts `rows` (tuples in `columns` order) into `table`;
        `trusted`: the columns whose values the runner made itself."""
        raise NotImplementedError

    def insert_if_absent(self, table, columns) -> str:
        """An INSERT of one row that does nothing when its key exists (its
        rowcount says which)."""
        raise NotImplementedError

    def upsert(self, table, columns, keys, select) -> str:
        """INSERT INTO table (columns) <select>, updating the other columns
        of a row whose `keys` exist."""
        raise NotImplementedError

    def delete_matching(self, table, keys, select) -> str:
        """DELETE the rows of `table` whose `keys` equal a row of `select`."""
        raise NotImplementedError


class PostgreSQL(Dialect):
    name = "PostgreSQL"
    _types = {
        "boolean": "BOOLEAN",
        "byte": "SMALLINT",
        "short": "SMALLINT",
        "integer": "INTEGER",
        "long": "BIGINT",
        "float": "REAL",
        "double": "DOUBLE PRECISION",
        "string": "TEXT",
        "binary": "BYTEA",
        "date": "DATE",
        "timestamp": "TIMESTAMPTZ",
    }
    _decimal = "NUMERIC(%d, %d)"

    def _connect(self):
        import psycopg

        u = self.url
        # A server that does not answer fails the connection rather than
        # hanging it; the application name tells the runner's sessions apart.
        params = {"connect_timeout": 10, "application_name": APPLICATION_NAME, **dict(u.query)}
        return psycopg.connect(host=u.host, port=u.port, user=u.user, password=u.password, dbname=u.database, **params)

    def quote(self, name):
        return '"%s"' % name.replace('"', '""')

    def is_transient(self, error):
        import psycopg

        return isinstance(error, psycopg.OperationalError) or super().is_transient(error)

    def result_cursor(self, conn):
        return conn.cursor(name="beam_read")  # server-side

    @staticmethod
    def _timestamp_to_db(value):
        return None if value is None else value.to_utc_datetime(has_tz=True)

    def table_columns(self, cursor, table):
        schema, name = self.split_table(table)
        cursor.execute(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = COALESCE(%s, current_schema()) AND table_name = %s ORDER BY ordinal_position",
            (schema, name),
        )
        found = cursor.fetchall()
        return {c: t for c, t in found} if found else None

    _column_types = {
        "smallint": "short",
        "integer": "integer",
        "bigint": "long",
        "real": "float",
        "double precision": "double",
        "text": "string",
        "character varying": "string",
        "character": "string",
        "name": "string",
        "boolean": "boolean",
        "bytea": "binary",
        "date": "date",
        "timestamp with time zone": "timestamp",
        "timestamp without time zone": "timestamp",  # as UTC
    }

    def table_spark_types(self, cursor, table):
        schema, name = self.split_table(table)
        cursor.execute(
            "SELECT column_name, data_type, numeric_precision, numeric_scale, is_nullable = 'YES' "
            "FROM information_schema.columns WHERE table_schema = COALESCE(%s, current_schema()) "
            "AND table_name = %s ORDER BY ordinal_position",
            (schema, name),
        )
        found = {}
        for column, data_type, precision, scale, nullable in cursor.fetchall():
            if data_type == "numeric":
                spark = "decimal(%d,%d)" % (precision, scale or 0) if precision else DEFAULT_DECIMAL
            else:
                spark = self._column_types.get(data_type)
            found[column] = (spark, bool(nullable))
        return found or None

    def unique_keys(self, cursor, table):
        cursor.execute(
            "SELECT array_agg(a.attname::text) FROM pg_index i "
            "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
            "WHERE i.indrelid = to_regclass(%s) AND i.indisunique AND i.indpred IS NULL GROUP BY i.indexrelid",
            (self.quote_table(table),),
        )
        return [frozenset(cols) for (cols,) in cursor.fetchall()]

    # Binary COPY skips formatting each value as text and the server parsing
    # it back (about 1.75x the rows/s for the sink's staging rows here). It
    # is used for a column of one of these types (OIDs: bytea, bigint, text,
    # double precision, varchar, date, timestamptz), whose binary form
    # psycopg writes exactly from the values rows hold and refuses what the
    # column cannot hold, as the text form does (an int past 64 bits, a
    # naive datetime, a string over the varchar's length).
    BINARY_COPY_OIDS = frozenset({17, 20, 25, 701, 1043, 1082, 1184})
    # Not for smallint, integer, real or boolean columns of a user's rows:
    # psycopg writes 2**15 into a smallint as -32768, 2**31 into an integer
    # as -2**31, 1e40 into a real as infinity and 2 into a boolean as true,
    # where the text form is refused. Columns whose values the runner makes
    # itself (`trusted`: the staging table's own) may have them.
    TRUSTED_BINARY_COPY_OIDS = BINARY_COPY_OIDS | frozenset({16, 21, 23, 700})

    def copy_types(self, cursor, table, columns, trusted=()):
        """The OIDs of `columns` of `table`, in that order, when binary COPY
        writes each of them exactly (BINARY_COPY_OIDS; for the `trusted`
        columns, TRUSTED_BINARY_COPY_OIDS); None otherwise."""
        cursor.execute(
            "SELECT attname, atttypid::int FROM pg_attribute "
            "WHERE attrelid = to_regclass(%s) AND attnum > 0 AND NOT attisdropped",
            (self.quote_table(table),),
        )
        oids = dict(cursor.fetchall())
        types = [oids.get(c) for c in columns]
        exact = all(
            t in (self.TRUSTED_BINARY_COPY_OIDS if c in trusted else self.BINARY_COPY_OIDS)
            for c, t in zip(columns, types)
        )
        return types if exact else None

    def bulk_insert(self, cursor, table, columns, rows, trusted=()):
        types = self.copy_types(cursor, table, columns, trusted)
        sql = "COPY %s (%s) FROM STDIN%s" % (
            self.quote_table(table),
            ", ".join(map(self.quote, columns)),
            " (FORMAT BINARY)" if types else "",
        )
        with cursor.copy(sql) as copy:
            if types:
                copy.set_types(types)
            for row in rows:
                copy.write_row(row)

    def insert_if_absent(self, table, columns):
        return "INSERT INTO %s (%s) VALUES (%s) ON CONFLICT DO NOTHING" % (
            self.quote_table(table),
            ", ".join(map(self.quote, columns)),
            ", ".join(["%s"] * len(columns)),
        )

    def upsert(self, table, columns, keys, select):
        others = [c for c in columns if c not in keys]
        action = (
            "DO UPDATE SET " + ", ".join("%s = EXCLUDED.%s" % (self.quote(c), self.quote(c)) for c in others)
            if others
            else "DO NOTHING"
        )
        return "INSERT INTO %s (%s) %s ON CONFLICT (%s) %s" % (
            self.quote_table(table),
            ", ".join(map(self.quote, columns)),
            select,
            ", ".join(map(self.quote, keys)),
            action,
        )

    # A result column's type name (psycopg's type registry) -> Spark type.
    _read_types = {
        "int2": "short",
        "int4": "integer",
        "int8": "long",
        "float4": "float",
        "float8": "double",
        "text": "string",
        "varchar": "string",
        "bpchar": "string",
        "name": "string",
        "bool": "boolean",
        "bytea": "binary",
        "date": "date",
        "timestamptz": "timestamp",
        "timestamp": "timestamp",  # read as UTC
    }

    def result_columns(self, cursor, query):
        cursor.execute("SELECT * FROM (%s) AS q LIMIT 0" % query)
        columns = []
        for col in cursor.description:
            info = cursor.connection.adapters.types.get(col.type_code)
            name = info.name if info is not None else "oid %d" % col.type_code
            if name == "numeric":
                spark = "decimal(%d,%d)" % (col.precision, col.scale or 0) if col.precision else DEFAULT_DECIMAL
            elif name in self._read_types:
                spark = self._read_types[name]
            else:
                raise UnmappableColumn(_unreadable(col.name, name))
            columns.append((col.name, spark))
        return columns

    def delete_matching(self, table, keys, select):
        return "DELETE FROM %s AS t USING (%s) AS d WHERE %s" % (
            self.quote_table(table),
            select,
            " AND ".join("t.%s = d.%s" % (self.quote(k), self.quote(k)) for k in keys),
        )


class MariaDB(Dialect):
    name = "MariaDB"
    _types = {
        "boolean": "BOOLEAN",
        "byte": "SMALLINT",
        "short": "SMALLINT",
        "integer": "INT",
        "long": "BIGINT",
        "float": "FLOAT",
        "double": "DOUBLE",
        "string": "LONGTEXT",
        "binary": "LONGBLOB",
        "date": "DATE",
        "timestamp": "DATETIME(6)",
    }
    # A key column needs a length.
    _key_types = {"string": "VARCHAR(255)", "binary": "VARBINARY(255)"}
    _decimal = "DECIMAL(%d, %d)"

    def _connect(self):
        import pymysql

        u = self.url
        return pymysql.connect(
            host=u.host,
            port=u.port,
            user=u.user or "root",
            password=u.password or "",
            database=u.database,
            autocommit=False,
            charset="utf8mb4",
            connect_timeout=10,
            program_name=APPLICATION_NAME,
            **dict(u.query),
        )

    def quote(self, name):
        return "`%s`" % name.replace("`", "``")

    def is_transient(self, error):
        import pymysql

        return isinstance(error, (pymysql.err.OperationalError, pymysql.err.InterfaceError)) or super().is_transient(
            error
        )

    def result_cursor(self, conn):
        import pymysql.cursors

        return conn.cursor(pymysql.cursors.SSCursor)  # unbuffered

    @staticmethod
    def _timestamp_to_db(value):
        return None if value is None else value.to_utc_datetime(has_tz=False)

    def table_columns(self, cursor, table):
        schema, name = self.split_table(table)
        cursor.execute(
            "SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS "
            "WHERE TABLE_SCHEMA = COALESCE(%s, DATABASE()) AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
            (schema, name),
        )
        found = cursor.fetchall()
        return {c: t for c, t in found} if found else None

    def unique_keys(self, cursor, table):
        schema, name = self.split_table(table)
        cursor.execute(
            "SELECT INDEX_NAME, COLUMN_NAME FROM information_schema.STATISTICS "
            "WHERE TABLE_SCHEMA = COALESCE(%s, DATABASE()) AND TABLE_NAME = %s AND NON_UNIQUE = 0",
            (schema, name),
        )
        keys = {}
        for index, column in cursor.fetchall():
            keys.setdefault(index, set()).add(column)
        return [frozenset(cols) for cols in keys.values()]

    def bulk_insert(self, cursor, table, columns, rows, trusted=()):
        # PyMySQL turns an INSERT ... VALUES executemany into multi-row
        # INSERTs, each within the server's packet size.
        sql = "INSERT INTO %s (%s) VALUES (%s)" % (
            self.quote_table(table),
            ", ".join(map(self.quote, columns)),
            ", ".join(["%s"] * len(columns)),
        )
        batch = []
        for row in rows:
            batch.append(row)
            if len(batch) >= 5000:
                cursor.executemany(sql, batch)
                batch = []
        if batch:
            cursor.executemany(sql, batch)

    def insert_if_absent(self, table, columns):
        return "INSERT IGNORE INTO %s (%s) VALUES (%s)" % (
            self.quote_table(table),
            ", ".join(map(self.quote, columns)),
            ", ".join(["%s"] * len(columns)),
        )

    def upsert(self, table, columns, keys, select):
        others = [c for c in columns if c not in keys] or list(keys)
        return "INSERT INTO %s (%s) %s ON DUPLICATE KEY UPDATE %s" % (
            self.quote_table(table),
            ", ".join(map(self.quote, columns)),
            select,
            ", ".join("%s = VALUES(%s)" % (self.quote(c), self.quote(c)) for c in others),
        )

    _read_types = {
        "tinyint": "short",
        "smallint": "short",
        "mediumint": "integer",
        "int": "integer",
        "integer": "integer",
        "bigint": "long",
        "float": "float",
        "double": "double",
        "char": "string",
        "varchar": "string",
        "tinytext": "string",
        "text": "string",
        "mediumtext": "string",
        "longtext": "string",
        "enum": "string",
        "set": "string",
        "binary": "binary",
        "varbinary": "binary",
        "tinyblob": "binary",
        "blob": "binary",
        "mediumblob": "binary",
        "longblob": "binary",
        "date": "date",
        "datetime": "timestamp",  # read as UTC
        "timestamp": "timestamp",
    }
    _unsigned = {
        "tinyint": "short",
        "smallint": "integer",
        "mediumint": "integer",
        "int": "long",
        "bigint": "decimal(20,0)",
    }

    def result_columns(self, cursor, query):
        # The result's column types, as the server gives a table made of it.
        cursor.execute("CREATE TEMPORARY TABLE beam_result_probe AS SELECT * FROM (%s) AS q LIMIT 0" % query)
        try:
            cursor.execute("SHOW COLUMNS FROM beam_result_probe")
            described = cursor.fetchall()
        finally:
            cursor.execute("DROP TEMPORARY TABLE beam_result_probe")
        columns = []
        for row in described:
            column, declared = row[0], row[1].lower()
            spark = self._declared_type(declared)
            if spark is None:
                raise UnmappableColumn(_unreadable(column, declared))
            columns.append((column, spark))
        return columns

    def _declared_type(self, declared):
        """The Spark type of a column declared `declared` (lower case), or None."""
        base = declared.split("(")[0].split(" ")[0]
        if declared.startswith("tinyint(1)"):
            return "boolean"
        if base in ("decimal", "numeric"):
            match = re.match(r"\w+\((\d+),(\d+)\)", declared)
            return "decimal(%s,%s)" % match.groups() if match else DEFAULT_DECIMAL
        if "unsigned" in declared and base in self._unsigned:
            return self._unsigned[base]
        return self._read_types.get(base)

    def table_spark_types(self, cursor, table):
        schema, name = self.split_table(table)
        cursor.execute(
            "SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE = 'YES' FROM information_schema.COLUMNS "
            "WHERE TABLE_SCHEMA = COALESCE(%s, DATABASE()) AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
            (schema, name),
        )
        found = {c: (self._declared_type(t.lower()), bool(n)) for c, t, n in cursor.fetchall()}
        return found or None

    def from_db(self, spark_type):
        return bool_or_none if spark_type == "boolean" else super().from_db(spark_type)

    def delete_matching(self, table, keys, select):
        return "DELETE t FROM %s AS t JOIN (%s) AS d ON %s" % (
            self.quote_table(table),
            select,
            " AND ".join("t.%s = d.%s" % (self.quote(k), self.quote(k)) for k in keys),
        )


def bool_or_none(value):
    return None if value is None else bool(value)


def _unreadable(column, type_name):
    return (
        "column %r has type %s, which no Beam row field holds here; cast it in the query "
        "(to text, a number or a timestamp)" % (column, type_name)
    )


def first_line(error):
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]
