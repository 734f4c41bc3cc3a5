"""Which Java SDK harness JVM the Python workers of one executor share.

Spark runs a task's Python code in a Python worker process, and an
executor has several: one per running task, and more when a task chains
Python evaluations (a union's inputs, a streaming stage's state operator
and the stateless stage after it). A Java stage's bundles run in Beam's
Java SDK harness, a JVM that takes seconds of CPU to start and a few
hundred MB to live. The Python workers of one executor that run the same
job's Java stages (same jars, JVM options and pipeline options) therefore
share one JVM: the first that needs it starts it and serves its control
stream (its owner); the others attach, send their instructions through the
owner, and serve their own data and state endpoints, which the descriptors
of their bundles name (worker/java_harness.py).

This module is the bookkeeping: a record per shared JVM in a directory on
the executor's host, written by its owner and read by the others, all under
one lock.

Guarantees:
- One JVM per key at a time: the lock is held from reading the record until
  a new owner's JVM is connected and its record written, so the first tasks
  of a stage, starting together, start one JVM rather than one each.
- A record whose owner process or JVM is gone, or of another format, is
  never used: the next worker that needs the key starts a JVM and replaces
  it. A live record of another format (another version of the runner on
  the same host) is left to its owner.
- Keys are per executor: the Python workers of an executor are children of
  one process (PySpark's daemon, or the executor when the daemon is off),
  whose pid is part of the key, so two Spark applications on one host (two
  drivers in local mode, a job server and a script) never share a JVM,
  whose life is bound to its owner's.
"""

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import tempfile
from typing import Optional, Sequence

FORMAT_VERSION = 2


@dataclasses.dataclass(frozen=True)
class SharedJvm:
    """A running harness JVM and where its owner serves its control stream."""

    url: str  # the owner's relay endpoint (host:port)
    owner_pid: int
    jvm_pid: int
    worker_id: str  # the JVM's HARNESS_ID: it names itself so on every stream
    # Where the driver finalizes the JVM's bundles (worker/java_finalization.py),
    # and the JVM's token there.
    finalization_url: str = ""
    finalization_token: str = ""

    def alive(self) -> bool:
        return process_alive(self.owner_pid) and process_alive(self.jvm_pid)


def process_alive(pid: int) -> bool:
    """True if process `pid` exists and has not exited (a zombie has)."""
    if os.path.isdir("/proc"):
        try:
            with open("/proc/%d/stat" % pid, "rb") as f:
                # "pid (command) state ...": the command may hold spaces.
                return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
        except (OSError, IndexError):
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def executor_scope() -> int:
    """What the Python workers of one executor have in common: their parent."""
    return os.getppid()


def key_digest(classpath: Sequence[str], jvm_options: Sequence[str], pipeline_options: str) -> str:
    """The name of a shared JVM's record: this executor's JVM for these jars,
    JVM options and pipeline options."""
    text = json.dumps([executor_scope(), list(classpath), list(jvm_options), pipeline_options])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def default_directory() -> str:
    return os.path.join(tempfile.gettempdir(), "beam-spark-java-harnesses-%d" % os.getuid())


class SharedJvms:
    """The records of one host's shared JVMs (a directory), and its lock."""

    def __init__(self, directory: Optional[str] = None):
        self.directory = directory or default_directory()

    @contextlib.contextmanager
    def locked(self):
        """Holds the directory's lock (raises OSError if it cannot be had)."""
        os.makedirs(self.directory, mode=0o700, exist_ok=True)
        with open(os.path.join(self.directory, "lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _path(self, digest):
        return os.path.join(self.directory, digest + ".json")

    def read(self, digest: str) -> Optional[SharedJvm]:
        """The live JVM recorded under `digest`, or None (hold the lock)."""
        record = self._recorded(digest)
        return record if record is not None and record.alive() else None

    def write(self, digest: str, record: SharedJvm):
        """Records `record` under `digest`, whole or not at all (hold the lock)."""
        path = self._path(digest)
        temporary = "%s.%d.writing" % (path, os.getpid())
        with open(temporary, "w") as f:
            json.dump(dict(dataclasses.asdict(record), format_version=FORMAT_VERSION), f)
        os.replace(temporary, path)
        self._remove_dead(keep=digest)

    def remove(self, digest: str, record: SharedJvm):
        """Removes the record under `digest` if it is still `record`."""
        with self.locked():
            if self._recorded(digest) == record:
                with contextlib.suppress(OSError):
                    os.remove(self._path(digest))

    def _recorded(self, digest) -> Optional[SharedJvm]:
        """The record under `digest`, live or not; None if there is none of
        this format."""
        try:
            with open(self._path(digest)) as f:
                data = json.load(f)
            if data.pop("format_version", None) != FORMAT_VERSION:
                return None
            return SharedJvm(**data)
        except (OSError, ValueError, TypeError):
            return None

    def _remove_dead(self, keep):
        """Drops the records of JVMs that are gone (an owner that was killed
        cannot remove its own), so the directory stays as small as the
        number of live JVMs. A record of another format (another version of
        the runner on this host) goes only once its processes are gone too."""
        for name in os.listdir(self.directory):
            digest, ext = os.path.splitext(name)
            if ext != ".json" or digest == keep:
                continue
            if not _names_live_processes(os.path.join(self.directory, name)):
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(self.directory, name))


def _names_live_processes(path) -> bool:
    """Whether the record at `path`, of any format, names an owner and a JVM
    that are both alive (a record that cannot be read names none)."""
    try:
        with open(path) as f:
            data = json.load(f)
        return process_alive(int(data["owner_pid"])) and process_alive(int(data["jvm_pid"]))
    except (OSError, ValueError, TypeError, KeyError):
        return False
