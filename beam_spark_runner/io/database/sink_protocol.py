"""Exactly-once writes of a PCollection's rows into a database table
(`beam_spark_runner.io.WriteToDatabase`): rows are staged by the tasks
that have them, then committed into the table by one transaction whose
marker row (sink, epoch) in `beam_spark_runner_commits` says it happened.
Run again (a restart that interrupted it, a replayed release), a commit
finds its marker and changes nothing. So every row that reached the sink
is in the table exactly once.

- Batch: every task attempt inserts its rows (`stage_rows`), in one
  transaction, into the sink's staging table (`staging_table`, beside the
  target), each row tagged with the sink, the epoch (0), the writer (one
  run of the job), the task's partition and attempt, its order within the
  attempt and whether it is a retraction. A failed attempt's transaction
  never commits; a retried or speculative attempt stages its own complete
  copy. `DatabasePublication`, on the driver after the job: the marker
  row and, only if it was not there, one attempt per partition of the
  writer's staged rows moved into the table; then the sink's staged rows
  of the epoch deleted.
- Streaming: the rows are staged outside the database
  (io/database/spark_glue.py: files under the checkpoint); `EpochCommit`,
  run by the checkpoint coordinator once the micro-batch is a completed
  checkpoint, is handed them whole, as the table's tuples (`db_rows`):
  the marker row and, only if it was not there, the rows, in one
  transaction. Each row is written into the database once (with key
  columns, through the staging table inside that transaction).

Rows reach the sink as the rows themselves (`RowEncoding.ROWS`, the
client writes them) or, into PostgreSQL, as blocks of COPY text lines the
producing tasks made (`RowEncoding.POSTGRESQL_COPY_TEXT`,
io/database/postgresql_copy.py), which the commit hands to the server
unchanged.

Without key columns the rows are appended. With key columns the table
has a unique key on them; per key the last staged row of the epoch
decides: an addition is upserted, a retraction (a RETRACTING pane's
`triggers.Retraction`) deletes the key's row, so the table holds the
current answer. No Spark here.
"""

import dataclasses
import enum
import hashlib
import itertools
import logging
import time
from typing import Optional, Tuple

import triggers

from beam_spark_runner.io.database import postgresql_copy
from beam_spark_runner.io.database.sql_dialects import DatabaseError, first_line, dialect_of
from beam_spark_runner.worker import untyped_columns
from beam_spark_runner.worker.sink_commits import SinkCommit

MARKER_TABLE = "beam_spark_runner_commits"
COMMIT_ATTEMPTS = 5
COMMIT_BACKOFF_S = 0.5
_LOG = logging.getLogger(__name__)
# The staging table's own columns, before the row's.
EPOCH, SINK, WRITER, PART, ATTEMPT, SEQ, RETRACT = (
    "_beam_epoch",
    "_beam_sink",
    "_beam_writer",
    "_beam_part",
    "_beam_attempt",
    "_beam_seq",
    "_beam_retract",
)
_STAGING_COLUMNS = (EPOCH, SINK, WRITER, PART, ATTEMPT, SEQ, RETRACT)


class RowEncoding(enum.Enum):
    """What the sink's input elements are: ROWS, the rows (or
    `triggers.Retraction`s of rows); POSTGRESQL_COPY_TEXT, blocks of COPY
    text lines (io/database/postgresql_copy.py, its format COPY_TEXT_V1)."""

    ROWS = "rows"
    POSTGRESQL_COPY_TEXT = postgresql_copy.COPY_TEXT_V1


@dataclasses.dataclass(frozen=True)
class DatabaseWriteConfig:
    """What a WriteToDatabase writes: `schema` is the rows' Spark StructType
    (JSON form, worker/spark_rows.py), `key_columns` the table's unique key
    the rows are upserted on (none: appended), `row_encoding` what its
    input elements are, `untyped` the fields Beam types Any, whose types
    (spark_rows.UNTYPED in `schema` until the write runs) are the table's
    columns' or, for a new table, the data's (execution/untyped_writes.py),
    and whose values are converted to them (`db_rows`)."""

    url: str
    table: str
    key_columns: Tuple[str, ...]
    schema: dict
    label: str = "WriteToDatabase"
    row_encoding: RowEncoding = RowEncoding.ROWS
    untyped: Tuple[str, ...] = ()

    @property
    def columns(self):
        return tuple(f["name"] for f in self.schema["fields"])

    def describe(self):
        return "table %s at %s" % (self.table, dialect_of(self.url).url.redacted())


def staging_table(table: str) -> str:
    """The staging table of the sinks writing `table`, in the same schema:
    `beam_staging_<digest of the table's name>`."""
    digest = hashlib.sha1(table.encode()).hexdigest()[:12]
    schema = table.rsplit(".", 1)[0] + "." if "." in table else ""
    return "%sbeam_staging_%s" % (schema, digest)


def marker_table(config: DatabaseWriteConfig) -> str:
    schema = config.table.rsplit(".", 1)[0] + "." if "." in config.table else ""
    return schema + MARKER_TABLE


def check_table(config: DatabaseWriteConfig, cursor=None) -> Optional[dict]:
    """Raises DatabaseError naming the table when an existing table cannot
    take the rows (a column missing, no unique key on `key_columns`);
    returns its columns, or None when it does not exist yet."""
    dialect = dialect_of(config.url)
    if cursor is None:
        with dialect.connect() as conn:
            return check_table(config, conn.cursor())
    columns = dialect.table_columns(cursor, config.table)
    if columns is None:
        return None
    where = "%s: table %s at %s" % (config.label, config.table, dialect.url.redacted())
    missing = [c for c in config.columns if c not in columns]
    if missing:
        raise DatabaseError(
            "%s has no column %s (its columns: %s)" % (where, ", ".join(map(repr, missing)), ", ".join(columns))
        )
    if config.key_columns and frozenset(config.key_columns) not in dialect.unique_keys(cursor, config.table):
        raise DatabaseError(
            "%s has no unique key or primary key on exactly %s, which upserts need"
            % (where, ", ".join(config.key_columns))
        )
    return columns


def prepare_tables(config: DatabaseWriteConfig):
    """Creates what is missing (the table, with a primary key on the key
    columns; the staging and marker tables) and checks the table."""
    dialect = dialect_of(config.url)
    types = {f["name"]: f["type"] for f in config.schema["fields"]}
    with dialect.connect() as conn:
        cursor = conn.cursor()
        if check_table(config, cursor) is None:
            defs = [
                "%s %s%s"
                % (
                    dialect.quote(c),
                    dialect.column_type(types[c], c, in_key=c in config.key_columns),
                    " NOT NULL" if c in config.key_columns else "",
                )
                for c in config.columns
            ]
            if config.key_columns:
                defs.append("PRIMARY KEY (%s)" % ", ".join(map(dialect.quote, config.key_columns)))
            cursor.execute("CREATE TABLE IF NOT EXISTS %s (%s)" % (dialect.quote_table(config.table), ", ".join(defs)))
        staging = [
            "%s BIGINT NOT NULL" % dialect.quote(EPOCH),
            "%s VARCHAR(64) NOT NULL" % dialect.quote(SINK),
            "%s VARCHAR(64) NOT NULL" % dialect.quote(WRITER),
            "%s INTEGER NOT NULL" % dialect.quote(PART),
            "%s BIGINT NOT NULL" % dialect.quote(ATTEMPT),
            "%s BIGINT NOT NULL" % dialect.quote(SEQ),
            "%s BOOLEAN NOT NULL" % dialect.quote(RETRACT),
        ] + [
            "%s %s" % (dialect.quote(c), dialect.column_type(types[c], c, in_key=c in config.key_columns))
            for c in config.columns
        ]
        cursor.execute(
            "CREATE TABLE IF NOT EXISTS %s (%s)"
            % (dialect.quote_table(staging_table(config.table)), ", ".join(staging))
        )
        cursor.execute(
            "CREATE TABLE IF NOT EXISTS %s (sink VARCHAR(64) NOT NULL, epoch BIGINT NOT NULL, "
            "PRIMARY KEY (sink, epoch))" % dialect.quote_table(marker_table(config))
        )
        conn.commit()


def db_rows(config: DatabaseWriteConfig, values):
    """(retract, row tuple in the table's column order, as the client
    writes it; a named tuple of the table's columns as it is) for each of
    `values` (rows, or `triggers.Retraction`s of rows). A field Beam types
    Any is converted to its column's type first, or refused
    (untyped_columns.ColumnTypeError, naming the column, the value and the
    table)."""
    dialect = dialect_of(config.url)
    converters = [(f["name"], _to_db(config, dialect, f)) for f in config.schema["fields"]]
    names = tuple(name for name, _ in converters)
    plain = not any(convert for _, convert in converters)
    as_they_are = set()  # tuple types whose fields are the table's columns, in order
    unwrap = triggers.unwrap
    for value in values:
        row, retract = unwrap(value)
        if type(row) in as_they_are:
            yield retract, row
        elif plain and isinstance(row, tuple) and getattr(row, "_fields", None) == names:
            # A row of the schema's own type (a named tuple): its fields
            # are the table's columns in order, so it is written as it is.
            as_they_are.add(type(row))
            yield retract, row
        else:
            yield (
                retract,
                tuple(convert(getattr(row, name)) if convert else getattr(row, name) for name, convert in converters),
            )


def _to_db(config, dialect, field):
    """A function turning a field's value into what the client writes (None:
    as it is)."""
    to_db = dialect.to_db(field["type"])
    if field["name"] not in config.untyped:
        return to_db
    convert = untyped_columns.converter(
        field["type"], field["name"], config.label, "its column in %s" % config.describe(), field.get("nullable", True)
    )
    if to_db is None:
        return convert
    return lambda value: to_db(convert(value))


def _staging_insert(cursor, dialect, config, head, rows):
    """Inserts (retract, row) pairs into the staging table under `head`
    (epoch, sink, writer, part, attempt), numbered in order; returns how many."""
    counter = itertools.count()
    dialect.bulk_insert(
        cursor,
        staging_table(config.table),
        _STAGING_COLUMNS + config.columns,
        (head + (next(counter), retract) + row for retract, row in rows),
        _STAGING_COLUMNS,
    )
    return next(counter)


def stage_rows(config: DatabaseWriteConfig, sink: str, writer: str, epoch: int, part: int, attempt: int, values):
    """Stages one task attempt's values (of `config.row_encoding`) in one
    transaction; returns how many rows. Nothing is staged (the transaction
    rolls back) if `values` raises."""
    dialect = dialect_of(config.url)
    head = (epoch, sink, writer, part, attempt)
    with dialect.connect() as conn:
        cursor = conn.cursor()
        if config.row_encoding is RowEncoding.POSTGRESQL_COPY_TEXT:
            count = _stage_copy_blocks(cursor, dialect, config, head, values)
        else:
            count = _staging_insert(cursor, dialect, config, head, db_rows(config, values))
        conn.commit()
    return count


def _stage_copy_blocks(cursor, dialect, config, head, blocks):
    """Stages COPY text blocks under `head`: loaded in order into the
    transaction's temporary table, then moved into the staging table
    with their numbers."""
    q = dialect.quote
    staging = dialect.quote_table(staging_table(config.table))
    loaded = postgresql_copy.load_epoch_rows(
        cursor, dialect, staging, config.columns, blocks, keyed=bool(config.key_columns)
    )
    columns = ", ".join(map(q, config.columns))
    cursor.execute(
        "INSERT INTO %s (%s, %s) SELECT %%s, %%s, %%s, %%s, %%s, _beam_seq, _beam_retract, %s FROM %s"
        % (staging, ", ".join(map(q, _STAGING_COLUMNS)), columns, columns, loaded),
        head,
    )
    return cursor.rowcount


def _committed_with_retries(config: DatabaseWriteConfig, epoch: int, commit_once, sleep):
    """Runs `commit_once()` (one idempotent commit transaction), again on a
    new connection when the connection was lost (`COMMIT_ATTEMPTS`, backing
    off from `COMMIT_BACKOFF_S`); raises DatabaseError naming the sink, the
    table and the database's message when the database refuses."""
    dialect = dialect_of(config.url)
    for attempt in range(COMMIT_ATTEMPTS):
        try:
            commit_once()
            return
        except Exception as e:  # noqa: BLE001 -- each client raises its own classes
            transient = dialect.is_transient(e)
            if transient and attempt + 1 < COMMIT_ATTEMPTS:
                # Idempotent: a commit whose connection was lost is tried
                # again on a new one (its marker says whether the lost one
                # had committed).
                _LOG.warning(
                    "%s: committing micro-batch %d failed (%s); trying again", config.label, epoch, first_line(e)
                )
                sleep(COMMIT_BACKOFF_S * 2**attempt)
                continue
            raise DatabaseError(
                "%s: cannot commit micro-batch %d into %s%s: %s"
                % (
                    config.label,
                    epoch,
                    config.describe(),
                    " (%d attempts)" % (attempt + 1) if transient else "",
                    first_line(e),
                )
            ) from None


def _one_attempt_per_part(dialect, staging):
    """SQL of the staged rows of (sink, epoch, writer) (its three
    parameters), one attempt per partition: each attempt staged its whole
    partition in one transaction, so any one of them is complete. A window
    rather than a join with the grouped attempts: one scan of the staged
    rows, whatever plan the database's statistics (none yet, for rows
    staged a moment ago) would give a join."""
    q = dialect.quote
    return (
        "SELECT * FROM (SELECT s.*, MIN(s.%s) OVER (PARTITION BY s.%s) AS beam_first_attempt FROM %s AS s "
        "WHERE s.%s = %%s AND s.%s = %%s AND s.%s = %%s) AS w WHERE w.%s = w.beam_first_attempt"
        % (q(ATTEMPT), q(PART), staging, q(SINK), q(EPOCH), q(WRITER), q(ATTEMPT))
    )


def _apply_keyed(cursor, dialect, config, rows, params):
    """Per key, the last staged row of `rows` (SQL over the staging table,
    with `params`) decides: a retraction deletes the key's row, an addition
    replaces it."""
    q = dialect.quote
    keys = ", ".join(map(q, config.key_columns))
    columns = ", ".join(map(q, config.columns))
    last = (
        "SELECT * FROM (SELECT r.*, ROW_NUMBER() OVER (PARTITION BY %s ORDER BY r.%s DESC, r.%s DESC) AS rn "
        "FROM (%s) AS r) AS ranked WHERE rn = 1"
        % (", ".join("r.%s" % q(k) for k in config.key_columns), q(PART), q(SEQ), rows)
    )
    cursor.execute(
        dialect.delete_matching(
            config.table, config.key_columns, "SELECT %s FROM (%s) AS l WHERE l.%s" % (keys, last, q(RETRACT))
        ),
        params,
    )
    cursor.execute(
        dialect.upsert(
            config.table,
            config.columns,
            config.key_columns,
            "SELECT %s FROM (%s) AS l WHERE NOT l.%s" % (columns, last, q(RETRACT)),
        ),
        params,
    )


def _claim_epoch(cursor, dialect, config, sink, epoch) -> bool:
    """Inserts the marker row (sink, epoch); False when it was there (the
    epoch is committed already)."""
    cursor.execute(dialect.insert_if_absent(marker_table(config), ("sink", "epoch")), (sink, epoch))
    return cursor.rowcount == 1


def _close(conn):
    try:
        conn.close()  # without a commit: rolled back
    except Exception:  # noqa: BLE001 -- a connection the server closed
        pass


@dataclasses.dataclass(frozen=True)
class DatabasePublication(SinkCommit):
    """Commits the rows `writer` staged for (`sink`, `epoch`) into the
    table, exactly once (the module's docstring). Idempotent: a lost
    connection is tried again (`COMMIT_ATTEMPTS`, backing off from
    `COMMIT_BACKOFF_S`); raises DatabaseError naming the sink, the table
    and the database's message when the database refuses, leaving the
    staged rows for the next call."""

    config: DatabaseWriteConfig
    sink: str
    epoch: int
    writer: str

    def commit(self, context):
        _committed_with_retries(self.config, self.epoch, self._commit_once, self.sleep)

    def _commit_once(self):
        config = self.config
        dialect = dialect_of(config.url)
        q = dialect.quote
        staging = dialect.quote_table(staging_table(config.table))
        columns = ", ".join(map(q, config.columns))
        rows = _one_attempt_per_part(dialect, staging)
        params = (self.sink, self.epoch, self.writer)
        conn = dialect.connect()
        try:
            cursor = conn.cursor()
            if _claim_epoch(cursor, dialect, config, self.sink, self.epoch):
                if config.key_columns:
                    _apply_keyed(cursor, dialect, config, rows, params)
                else:
                    cursor.execute(
                        "INSERT INTO %s (%s) SELECT %s FROM (%s) AS r WHERE NOT r.%s"
                        % (dialect.quote_table(config.table), columns, columns, rows, q(RETRACT)),
                        params,
                    )
            cursor.execute(
                # This epoch's rows only (every writer's): an epoch still to
                # commit keeps its own, whatever order commits run in.
                "DELETE FROM %s WHERE %s = %%s AND %s = %%s" % (staging, q(SINK), q(EPOCH)),
                (self.sink, self.epoch),
            )
            conn.commit()
        finally:
            _close(conn)

    @staticmethod
    def sleep(seconds):
        time.sleep(seconds)


@dataclasses.dataclass(frozen=True)
class EpochCommit:
    """Commits an epoch's rows, handed over whole at commit time (a
    streaming sink keeps them in files under the checkpoint until then),
    into the table exactly once: one transaction inserts the marker row
    (sink, epoch) and, only if it was not there, the rows. Without key
    columns the rows go straight into the table (each row written once);
    with key columns they pass through the staging table inside the same
    transaction, and per key the last row decides, as for
    `DatabasePublication`. Idempotent, tried again on a lost connection,
    errors as `DatabasePublication`'s.

    Call with `rows`: a function returning the epoch's staged values in
    order, called once per attempt: (retract, row tuple) pairs (`db_rows`)
    for `RowEncoding.ROWS`, COPY text blocks for
    `RowEncoding.POSTGRESQL_COPY_TEXT`."""

    config: DatabaseWriteConfig
    sink: str
    epoch: int

    def __call__(self, rows):
        _committed_with_retries(self.config, self.epoch, lambda: self._commit_once(rows), DatabasePublication.sleep)

    def _commit_once(self, rows):
        config = self.config
        dialect = dialect_of(config.url)
        conn = dialect.connect()
        try:
            cursor = conn.cursor()
            if _claim_epoch(cursor, dialect, config, self.sink, self.epoch):
                if config.row_encoding is RowEncoding.POSTGRESQL_COPY_TEXT:
                    self._copy(cursor, dialect, rows())
                elif config.key_columns:
                    writer = "commit"
                    _staging_insert(cursor, dialect, config, (self.epoch, self.sink, writer, 0, 0), rows())
                    staging = dialect.quote_table(staging_table(config.table))
                    params = (self.sink, self.epoch, writer)
                    _apply_keyed(cursor, dialect, config, _one_attempt_per_part(dialect, staging), params)
                    q = dialect.quote
                    cursor.execute(
                        "DELETE FROM %s WHERE %s = %%s AND %s = %%s AND %s = %%s"
                        % (staging, q(SINK), q(EPOCH), q(WRITER)),
                        params,
                    )
                else:
                    dialect.bulk_insert(
                        cursor, config.table, config.columns, (row for retract, row in rows() if not retract)
                    )
            conn.commit()
        finally:
            _close(conn)

    def _copy(self, cursor, dialect, blocks):
        config = self.config
        if not config.key_columns:
            postgresql_copy.copy_blocks(cursor, dialect, dialect.quote_table(config.table), config.columns, blocks)
            return
        staging = dialect.quote_table(staging_table(config.table))
        loaded = postgresql_copy.load_epoch_rows(cursor, dialect, staging, config.columns, blocks)
        _apply_keyed(cursor, dialect, config, "SELECT * FROM %s" % loaded, None)
