"""The console of a Spark JVM the runner starts: Spark's and PySpark's own
chatter is dropped, everything else reaches the user's stderr unchanged.

PySpark starts the driver JVM as a child process that inherits the driver's
stderr; everything the JVM prints goes there: log4j's console appender,
and, through Spark's stream-redirecting threads, whatever Spark's Python
processes print (user code's `print`, tracebacks, but also PySpark's own
progress prints). Most of Spark's noise is settled by configuration where
the runner creates the session (its log4j2 configuration,
`conf/log4j2.properties`; SPARK_LOCAL_IP for a local master). What no
setting reaches is filtered here: the JVM is started with its stderr on a
pipe, and a daemon thread copies every line to the real stderr except
those `is_noise` recognizes:

- the JVM launcher's notice for the incubator module Spark adds
  (`WARNING: Using incubator modules: jdk.incubator.vector`);
- PySpark's transformWithState set-up process, which `print`s five lines
  per stateful operator when a streaming query starts (its name, its UDF's
  repr, the state server's port; pyspark.sql.streaming.
  transform_with_state_driver_worker), and the blank lines after them;
- Beam's notices that optional Google Cloud clients are missing, printed by
  every Spark Python process that imports Beam.

Only for a JVM the runner starts itself (`filtered_stderr` around the
session's creation): a session the user made keeps its console as it is.
"""

import atexit
import contextlib
import os
import re
import sys
import threading

_NOISE = tuple(
    re.compile(pattern)
    for pattern in (
        r"^WARNING: Using incubator modules: ",
        r"^(Starting )?Streaming TransformWithStateInPandas Python worker",
        r"^Failed to import GCSFileSystem; loading of this filesystem will be skipped",
        r"^WARNING:root:apitools not found, and bigquery client libraries are not available",
    )
)


class NoiseFilter:
    """Line by line: False for a line to drop. A blank line right after a
    dropped one goes too (PySpark's prints end in a newline of their own)."""

    def __init__(self):
        self._after_noise = False

    def keep(self, line: str) -> bool:
        text = line.rstrip("\r\n")
        if not text.strip():
            keep = not self._after_noise
            self._after_noise = False
            return keep
        self._after_noise = any(p.search(text) for p in _NOISE)
        return not self._after_noise


_copiers = []


def drain(timeout=1.0):
    """Waits up to `timeout` seconds for the copying threads to pass on what
    the processes writing to them printed (all of it once they ended)."""
    for copier in list(_copiers):
        copier.join(timeout)


# What the JVM prints as the driver exits still reaches the console.
atexit.register(drain)


def _copy_lines(read_fd, write_fd):
    noise = NoiseFilter()
    with os.fdopen(read_fd, "rb", buffering=0) as source:
        pending = b""
        while True:
            chunk = source.read(65536)
            if not chunk:
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            out = b"".join(line + b"\n" for line in lines if noise.keep(line.decode("utf-8", "replace")))
            if out:
                os.write(write_fd, out)
        if pending and noise.keep(pending.decode("utf-8", "replace")):
            os.write(write_fd, pending)
    os.close(write_fd)


@contextlib.contextmanager
def filtered_stderr():
    """While inside, file descriptor 2 is a pipe whose lines reach the real
    stderr through the noise filter; processes started inside (the JVM)
    keep that pipe for their lifetime. The driver's own stderr is restored
    on exit. A stderr that is not a file descriptor (an embedding
    application's) is left alone."""
    try:
        sys.stderr.flush()
        real = os.dup(2)
    except (OSError, ValueError, AttributeError):
        yield
        return
    read_fd, write_fd = os.pipe()
    forward = os.dup(real)  # the copying thread's own handle on the real stderr
    copier = threading.Thread(target=_copy_lines, args=(read_fd, forward), name="beam-spark-jvm-stderr", daemon=True)
    copier.start()
    _copiers.append(copier)
    os.dup2(write_fd, 2)
    os.close(write_fd)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(real, 2)
        os.close(real)
