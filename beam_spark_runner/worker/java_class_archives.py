"""Class-data archives (Java's AppCDS) for Beam's Java SDK harness JVMs.

A harness JVM loads some 6,000 classes from Beam's jars before it opens
its control stream: about 2.4 s of a loaded 2-core machine's time per JVM,
and a job starts one per Spark Python worker that runs a Java stage. The
JVM can map those classes from an archive instead (0.65 s, measured on
the same machine). The first JVM for a classpath, JVM options and Java
writes the archive when it exits (`-XX:ArchiveClassesAtExit`); later ones
map it (`-XX:SharedArchiveFile`).

Guarantees:
- An archive is used only for the exact classpath (each jar's path, size
  and modification time), JVM options and `java` it was written by (its
  key); a JVM that finds it unusable anyway falls back to loading classes
  (Java's `-Xshare:auto`), so an archive never changes what runs.
- An archive appears whole or not at all: a JVM writes under a name of its
  own, renamed into place only after it exited normally.
- JVM options that choose their own sharing (`-Xshare:...`,
  `-XX:SharedArchiveFile`, `-XX:ArchiveClassesAtExit`) get none of this:
  `--java_harness_jvm_options=-Xshare:off` turns it off.
- The directory stays bounded: the `KEEP` archives used last are kept, and
  writes not put in place within five minutes are removed. A JVM writes
  its archive as it exits, and its Python worker puts it in place right
  after; a write older than that is a JVM's whose worker exited first
  (Spark ends its Python workers with `os._exit`, so they stop no JVM).

Directory: `$BEAM_SPARK_CACHE_DIR/java-class-archives/` (default
`~/.cache/beam-spark-runner/java-class-archives/`); one that cannot be
written means no archive, and the JVM starts as before.
"""

import dataclasses
import hashlib
import logging
import os
import time
from typing import Optional, Sequence, Tuple

from beam_spark_runner.maven_jars import cache_base

_LOG = logging.getLogger(__name__)

KEEP = 8
_STALE_SECONDS = 300.0
_SUFFIX = ".jsa"
_PENDING = ".writing"
_OWN_SHARING = ("-Xshare", "-XX:SharedArchiveFile", "-XX:ArchiveClassesAtExit")


@dataclasses.dataclass(frozen=True)
class ClassArchive:
    """What a JVM start adds to its options, and what to do when it exits."""

    jvm_options: Tuple[str, ...]
    # Where the JVM writes a new archive (None: it maps one, or none at all).
    writing: Optional[str] = None
    # Where that archive goes once the JVM exited normally.
    final: Optional[str] = None

    def finish(self, exit_code: Optional[int]):
        """Puts a written archive in place after its JVM exited with
        `exit_code` (0, or 143 for the SIGTERM the harness is stopped with);
        a JVM that was killed or failed leaves nothing behind."""
        if self.writing is None:
            return
        try:
            if exit_code in (0, 143) and os.path.getsize(self.writing) > 0:
                os.replace(self.writing, self.final)
                return
        except OSError:
            pass
        _remove(self.writing)


NO_ARCHIVE = ClassArchive(())


def directory() -> str:
    return os.path.join(cache_base(), "java-class-archives")


def _key(java: str, classpath: Sequence[str], jvm_options: Sequence[str]) -> str:
    digest = hashlib.sha256()
    for path in [os.path.realpath(java), *classpath]:
        try:
            stat = os.stat(path)
        except OSError:
            stat = None
        digest.update(("%s\0%s\0%s\n" % (path, stat and stat.st_size, stat and stat.st_mtime_ns)).encode())
    digest.update("\0".join(jvm_options).encode())
    return digest.hexdigest()[:32]


def for_jvm(java: str, classpath: Sequence[str], jvm_options: Sequence[str], clock=time.time) -> ClassArchive:
    """The archive options for a harness JVM started with `java`,
    `classpath` and the user's `jvm_options`."""
    if any(option.startswith(_OWN_SHARING) for option in jvm_options):
        return NO_ARCHIVE
    root = directory()
    try:
        os.makedirs(root, exist_ok=True)
    except OSError as e:
        _LOG.debug("No class archive for the Java harness: %s", e)
        return NO_ARCHIVE
    final = os.path.join(root, _key(java, classpath, jvm_options) + _SUFFIX)
    if os.path.exists(final):
        try:
            os.utime(final)  # used: kept by the pruning below
        except OSError:
            pass
        return ClassArchive(("-XX:SharedArchiveFile=" + final,))
    _prune(root, clock())
    writing = "%s.%d.%d%s" % (final, os.getpid(), int(clock() * 1e6), _PENDING)
    if not os.access(root, os.W_OK):
        return NO_ARCHIVE
    return ClassArchive(("-XX:ArchiveClassesAtExit=" + writing,), writing, final)


def _prune(root: str, now: float):
    entries = []
    for name in os.listdir(root):
        path = os.path.join(root, name)
        try:
            mtime = os.stat(path).st_mtime
        except OSError:
            continue
        if name.endswith(_PENDING):
            if now - mtime > _STALE_SECONDS:
                _remove(path)
        elif name.endswith(_SUFFIX):
            entries.append((mtime, path))
    for _, path in sorted(entries, reverse=True)[KEEP - 1 :]:
        _remove(path)


def _remove(path: str):
    try:
        os.remove(path)
    except OSError:
        pass
