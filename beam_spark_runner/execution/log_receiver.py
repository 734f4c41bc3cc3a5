"""The driver's half of worker log forwarding (worker/log_forwarding.py).

One `LogReceiver` per driver process, started with the first run that needs
it: a TCP server whose connection threads re-create each record a worker
sent and hand it to the driver's logger of the same name if that logger is
enabled for its level, so records from DoFns obey the driver's logging
configuration like records logged in the driver. Each record keeps its
logger name, level, message, source location, time and traceback text, and
gets a `beam_stage` attribute (the Beam stage that logged it); its
`process` is the worker's pid.

A connection must first send the receiver's token (a random secret that
reaches workers inside the tasks Spark ships, as the rest of the pipeline
does); other connections are closed unread.
"""

import logging
import secrets
import socketserver
import threading

from beam_spark_runner.worker.log_forwarding import SYNC_ACK, LogSettings, read_frame

_LOG = logging.getLogger(__name__)


def reemit(fields):
    """Hands one forwarded record to the driver's logging."""
    record = logging.makeLogRecord(fields)
    logger = logging.getLogger(record.name)
    if logger.isEnabledFor(record.levelno):
        logger.handle(record)


class _Connection(socketserver.StreamRequestHandler):
    def handle(self):
        hello = read_frame(self.rfile)
        if not isinstance(hello, dict) or not secrets.compare_digest(str(hello.get("token", "")), self.server.token):
            return
        while True:
            frame = read_frame(self.rfile)
            if frame is None:
                return
            for fields in frame.get("records", ()):
                try:
                    reemit(fields)
                except Exception:  # one malformed record must not end the connection
                    _LOG.exception("Could not log a record forwarded by a Spark worker")
            if frame.get("sync"):
                self.wfile.write(SYNC_ACK)
                self.wfile.flush()


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


class LogReceiver:
    """Listens on `host` (port chosen by the OS) until `close()`."""

    def __init__(self, host="127.0.0.1"):
        self._server = _Server((host, 0), _Connection)
        self._server.token = secrets.token_hex(16)
        self._thread = threading.Thread(target=self._server.serve_forever, name="beam-worker-logs", daemon=True)
        self._thread.start()

    @property
    def address(self):
        return self._server.server_address[:2]

    def settings(self, base: LogSettings, advertised_host=None) -> LogSettings:
        """`base` with this receiver's address (as workers reach it) and token."""
        host, port = self.address
        return base.to((advertised_host or host, port), self._server.token)

    def close(self):
        self._server.shutdown()
        self._server.server_close()


_RECEIVERS = {}  # bind address -> LogReceiver
_RECEIVERS_LOCK = threading.Lock()


def settings_for(sc, base: LogSettings) -> LogSettings:
    """`base` pointing at this driver's receiver, started on first use. On a
    local master it listens on the loopback interface; on a cluster on
    spark.driver.bindAddress (else all interfaces) and workers connect to
    spark.driver.host, as they reach the driver for everything else."""
    conf = sc.getConf()
    local = sc.master.startswith("local")
    bind = "127.0.0.1" if local else conf.get("spark.driver.bindAddress", "0.0.0.0")
    with _RECEIVERS_LOCK:
        receiver = _RECEIVERS.get(bind)
        if receiver is None:
            receiver = _RECEIVERS[bind] = LogReceiver(bind)
    return receiver.settings(base, None if local else conf.get("spark.driver.host", None))
