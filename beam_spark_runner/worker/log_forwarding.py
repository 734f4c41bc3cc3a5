"""Log records of user code in Spark's Python workers, forwarded to the driver.

Beam's portable runners send their SDK workers' log records to the runner
(the Fn API logging service), so a DoFn's `logging.info(...)` shows up in
the driver's logs. Here user code runs in Spark's Python worker processes,
whose logging nobody configures: without this module their INFO records
went nowhere and WARNING and above to the executor's stderr only. While
records are forwarded, the worker's own root handlers step aside (in local
mode executor stderr is the driver's console: each record would show
twice).

This module is the worker's half. While a task runs user code,
`forwarding(settings, stage)` sets the levels the pipeline options ask for
(Beam's own `--default_sdk_harness_log_level`, default INFO, and
`--sdk_harness_log_level_overrides`, as Beam's SDK harness does), collects
the records logged at or above them and sends them over TCP to the driver's
receiver (`execution/log_receiver.py`), which hands them to the driver's
`logging` under their own logger names and levels, so the driver's logging
configuration decides what is shown, as for code running in the driver.

Guarantees:
- every record a task logs is handled by the driver before the task ends
  (the task waits for the receiver's acknowledgement, at most
  SYNC_TIMEOUT_S), so before its Spark job and the pipeline run complete,
  also when the task fails; records of one worker arrive in the order
  logged;
- at most MAX_RECORDS_PER_TASK records per task are sent (Beam's SDK
  harness also bounds its log queue); the rest are counted and reported as
  one WARNING record;
- logging never fails a task: records the driver did not acknowledge (it
  cannot be reached, or the connection broke) go to the worker's stderr
  instead, some possibly twice if the connection broke after the driver
  handled them.

The wire format is JSON (no pickle, so the receiver never unpickles what
arrives on a socket): 4-byte big-endian length, then a UTF-8 JSON object:
`{"token": ...}` first on each connection, then `{"records": [...]}` and
`{"sync": true}`, which the receiver answers with one byte once it has
handled everything sent before it. No pyspark here (docs/architecture.md).
"""

import contextlib
import dataclasses
import json
import logging
import socket
import struct
import sys
import threading
import time
from typing import Optional, Tuple

MAX_RECORDS_PER_TASK = 10_000
SEND_EVERY = 200  # records buffered before a send
SEND_AFTER_S = 1.0  # ... or when the oldest buffered record is this old
SYNC_TIMEOUT_S = 10.0
# Connecting waits at most this long, once per worker process and run: a
# driver behind a firewall that drops packets costs user code this, then
# records go to stderr (--worker_log_forwarding=off avoids even that).
CONNECT_TIMEOUT_S = 2.0
SYNC_ACK = b"\x01"
# The attributes of a LogRecord that cross to the driver (args are already
# merged into msg: they need not be JSON-serializable).
_FIELDS = (
    "name",
    "levelno",
    "levelname",
    "pathname",
    "filename",
    "module",
    "lineno",
    "funcName",
    "created",
    "msecs",
    "thread",
    "threadName",
    "process",
    "processName",
    "stack_info",
)
_ORIGIN = "beam_stage"  # extra attribute: the Beam stage the record came from


def level_of(value, option):
    """A logging level from a name ('INFO', 'warning') or a number; a clear
    error naming `option` otherwise."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    text = str(value).strip()
    if text.isdecimal():
        return int(text)
    level = logging.getLevelName(text.upper())
    if not isinstance(level, int):
        raise ValueError(
            "%s: %r is not a logging level (use a name such as INFO or DEBUG, or a number)" % (option, value)
        )
    return level


@dataclasses.dataclass(frozen=True)
class LogSettings:
    """What workers capture and where they send it. `level` applies to the
    root logger, `overrides` to the named loggers (and their children)."""

    level: int = logging.INFO
    overrides: Tuple[Tuple[str, int], ...] = ()
    address: Optional[Tuple[str, int]] = None  # the driver's receiver
    token: str = ""

    @classmethod
    def from_option_values(cls, default_level, overrides):
        """From Beam's --default_sdk_harness_log_level (None: INFO) and
        --sdk_harness_log_level_overrides ({logger: level} or None)."""
        level = logging.INFO if default_level is None else level_of(default_level, "--default_sdk_harness_log_level")
        if overrides is not None and not isinstance(overrides, dict):
            raise ValueError(
                "--sdk_harness_log_level_overrides: expected a JSON object "
                "{\"logger\": \"LEVEL\", ...}, got %r" % (overrides,)
            )
        pairs = tuple(
            sorted(
                (str(name), level_of(value, "--sdk_harness_log_level_overrides[%r]" % name))
                for name, value in (overrides or {}).items()
            )
        )
        return cls(level, pairs)

    def to(self, address, token):
        return dataclasses.replace(self, address=tuple(address), token=token)


# -- frames -------------------------------------------------------------------------


def encode_frame(obj) -> bytes:
    body = json.dumps(obj, separators=(",", ":"), default=str).encode("utf-8")
    return struct.pack(">I", len(body)) + body


def read_frame(stream):
    """The next frame's object from a binary file-like `stream`; None at EOF."""
    header = stream.read(4)
    if len(header) < 4:
        return None
    (length,) = struct.unpack(">I", header)
    body = stream.read(length)
    if len(body) < length:
        return None
    return json.loads(body.decode("utf-8"))


def portable_record(record: logging.LogRecord, stage: str) -> dict:
    """The fields of `record` the driver re-creates it from (JSON-safe)."""
    fields = {name: getattr(record, name, None) for name in _FIELDS}
    fields["msg"] = record.getMessage()
    fields["args"] = None
    if record.exc_info and not record.exc_text:
        record.exc_text = logging.Formatter().formatException(record.exc_info)
    fields["exc_text"] = record.exc_text
    fields[_ORIGIN] = stage
    return fields


# -- the connection to the driver (one per worker process and receiver) -------------


class _Connection:
    def __init__(self, address, token):
        self.address, self.token = address, token
        self._sock = self._reader = None
        self.broken = False

    def _open(self):
        sock = socket.create_connection(self.address, timeout=CONNECT_TIMEOUT_S)
        sock.settimeout(SYNC_TIMEOUT_S)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(encode_frame({"token": self.token}))
        self._sock, self._reader = sock, sock.makefile("rb")

    def send(self, records) -> bool:
        """Sends `records`; False (and the connection marked broken) on failure."""
        return self._call(encode_frame({"records": records}), wait_ack=False)

    def sync(self) -> bool:
        """Returns once the receiver has handled everything sent before."""
        return self._call(encode_frame({"sync": True}), wait_ack=True)

    def _call(self, frame, wait_ack):
        if self.broken:
            return False
        try:
            if self._sock is None:
                self._open()
            self._sock.sendall(frame)
            return not wait_ack or self._reader.read(1) == SYNC_ACK
        except OSError:
            self.close()
            self.broken = True
            return False

    def close(self):
        for closable in (self._reader, self._sock):
            with contextlib.suppress(OSError):
                if closable is not None:
                    closable.close()
        self._sock = self._reader = None


_CONNECTIONS = {}
_CONNECTIONS_LOCK = threading.Lock()


def _connection(settings):
    key = (settings.address, settings.token)
    with _CONNECTIONS_LOCK:
        conn = _CONNECTIONS.get(key)
        if conn is None:
            conn = _CONNECTIONS[key] = _Connection(settings.address, settings.token)
        return conn


# -- the handler ---------------------------------------------------------------------


class ForwardingHandler(logging.Handler):
    """Buffers the records of one task and sends them to the driver in
    batches; `finish()` sends the rest and waits for the receiver."""

    def __init__(self, settings: LogSettings, stage: str, clock=time.monotonic):
        super().__init__(logging.NOTSET)
        self._conn = _connection(settings)
        self._stage, self._clock = stage, clock
        self._pending, self._oldest = [], None
        self._unacknowledged = []  # sent, not yet acknowledged by a sync
        self.kept = self.dropped = 0

    def emit(self, record):
        if self.kept >= MAX_RECORDS_PER_TASK:
            self.dropped += 1
            return
        try:
            fields = portable_record(record, self._stage)
        except Exception:  # a bad format string: what logging itself does
            self.handleError(record)
            return
        self.kept += 1
        if not self._pending:
            self._oldest = self._clock()
        self._pending.append(fields)
        if len(self._pending) >= SEND_EVERY or self._clock() - self._oldest >= SEND_AFTER_S:
            self._send()

    def _send(self):
        records, self._pending = self._pending, []
        if not records:
            return
        if self._conn.send(records):
            self._unacknowledged.extend(records)
        else:
            _to_stderr(records)

    def finish(self):
        self.acquire()
        try:
            if self.dropped:
                note = logging.LogRecord(
                    __name__,
                    logging.WARNING,
                    __file__,
                    0,
                    "%d log records of Beam stage %r were dropped: a task sends at most %d",
                    (self.dropped, self._stage, MAX_RECORDS_PER_TASK),
                    None,
                )
                self._pending.append(portable_record(note, self._stage))
                self.dropped = 0
            self._send()
            if self._unacknowledged and not self._conn.sync():
                # The receiver refused or lost the connection: what it may
                # not have handled goes to stderr (possibly some twice).
                _to_stderr(self._unacknowledged)
            self._unacknowledged = []
        finally:
            self.release()


def _to_stderr(records):
    for fields in records:
        sys.stderr.write("%s %s [%s] %s\n" % (fields["levelname"], fields["name"], fields.get(_ORIGIN), fields["msg"]))
        if fields.get("exc_text"):
            sys.stderr.write(fields["exc_text"] + "\n")


@contextlib.contextmanager
def forwarding(settings: Optional[LogSettings], stage: str):
    """Forwards the log records of the code run inside to the driver (see the
    module docstring). No-op without settings or a receiver address, or
    inside another `forwarding` (the outer one already captures)."""
    root = logging.getLogger()
    if settings is None or settings.address is None or any(isinstance(h, ForwardingHandler) for h in root.handlers):
        yield
        return
    handler = ForwardingHandler(settings, stage)
    loggers = [root] + [logging.getLogger(name) for name, _ in settings.overrides]
    saved_levels = [(logger, logger.level) for logger in loggers]
    # The worker's own root handlers (a stderr one, from whoever configured
    # logging in the worker) step aside while the driver gets the records:
    # else each record would show twice where executor stderr is the
    # driver's console (local masters). They return after the task.
    saved_handlers = list(root.handlers)
    for other in saved_handlers:
        root.removeHandler(other)
    root.setLevel(settings.level)
    for name, level in settings.overrides:
        logging.getLogger(name).setLevel(level)
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
        for other in saved_handlers:
            root.addHandler(other)
        for logger, level in reversed(saved_levels):
            logger.setLevel(level)
        handler.finish()
