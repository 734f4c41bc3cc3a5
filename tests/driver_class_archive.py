"""A class-data archive (Java's AppCDS) for the Spark driver JVMs the test
suite starts: its processes' sessions, and every driver a test starts in a
subprocess (fault tests, examples, notebooks, job servers).

A driver JVM loads some 11,000 classes from Spark's jars as its session
starts and its first streaming query runs: on a 2-core machine about 3 s of
a session start and 3 s of CPU in the first streaming run, paid again by
every driver a test starts. Mapped from an archive they cost about half.

- `write()` runs one driver (a batch and a streaming pipeline on the
  runner) with `-XX:ArchiveClassesAtExit`, ends its JVM normally and puts
  the archive in place only then: an archive is whole or absent.
- `jvm_options()`: what a driver JVM adds to SPARK_SUBMIT_OPTS to map it,
  once it exists. The archive is keyed by `java` and the driver's
  classpath (Spark's jars and the runner's), so a changed installation
  writes a new one; a JVM that cannot use it anyway loads classes as
  before (`-Xshare:auto`), and says nothing about it (`-Xlog:cds*=off`:
  tests read the drivers' output).
- `BEAM_SPARK_TEST_DRIVER_ARCHIVE=off` turns it off.

Directory: `$BEAM_SPARK_CACHE_DIR/test-driver-class-archives/` (default
`~/.cache/beam-spark-runner/test-driver-class-archives/`), the newest
`KEEP` kept.
"""

import glob
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import time

OFF_ENV = "BEAM_SPARK_TEST_DRIVER_ARCHIVE"
KEEP = 3
QUIET = "-Xlog:cds*=off"
_SUFFIX = ".jsa"
# A writer takes under a minute; a lock older than this is a dead one's.
_LOCK_STALE_SECONDS = 600


def enabled() -> bool:
    return os.environ.get(OFF_ENV, "").lower() not in ("off", "0", "false")


def _directory() -> str:
    # As beam_spark_runner.maven_jars.cache_base, without importing the runner.
    base = os.environ.get("BEAM_SPARK_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "beam-spark-runner"
    )
    return os.path.join(base, "test-driver-class-archives")


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(java) if java else ""


def path() -> str:
    """Where the archive of this installation's driver JVM is (or goes)."""
    # Found without importing them (this runs in pytest's controlling process).
    pyspark = os.path.dirname(importlib.util.find_spec("pyspark").origin)
    runner = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "beam_spark_runner")
    jars = sorted(glob.glob(os.path.join(pyspark, "jars", "*.jar")))
    jars += sorted(glob.glob(os.path.join(runner, "jars", "*.jar")))
    digest = hashlib.sha256()
    for entry in [_java(), *jars]:
        try:
            stat = os.stat(entry)
            digest.update(("%s\0%d\0%d\n" % (entry, stat.st_size, stat.st_mtime_ns)).encode())
        except OSError:
            digest.update(("%s\0missing\n" % entry).encode())
    return os.path.join(_directory(), digest.hexdigest()[:32] + _SUFFIX)


def jvm_options() -> tuple:
    """The options that map the archive, or () while there is none."""
    if not enabled():
        return ()
    archive = path()
    return ("-XX:SharedArchiveFile=" + archive, QUIET) if os.path.exists(archive) else ()


def add_to_submit_options(environ=os.environ) -> bool:
    """Adds `jvm_options()` to SPARK_SUBMIT_OPTS in `environ` (the drivers
    started later inherit it); whether they are there now."""
    options = jvm_options()
    current = environ.get("SPARK_SUBMIT_OPTS", "")
    if not options:
        return False
    if options[0] not in current:
        environ["SPARK_SUBMIT_OPTS"] = ("%s %s" % (current, " ".join(options))).strip()
    return True


def start_writing():
    """Starts the writer process when the archive is missing and no other
    process of this machine is writing it (None when it exists, is being
    written or is turned off); the caller waits for it."""
    if not enabled() or os.path.exists(path()):
        return None
    lock = path() + ".lock"
    os.makedirs(os.path.dirname(lock), exist_ok=True)
    try:
        if time.time() - os.path.getmtime(lock) > _LOCK_STALE_SECONDS:
            os.remove(lock)  # its writer is long gone
    except OSError:
        pass
    try:
        os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except OSError:
        return None  # another process writes it
    return subprocess.Popen(
        [sys.executable, "-m", "tests.driver_class_archive"],
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _warm_up():
    """One batch and one streaming pipeline on the runner's own session, as
    a subprocess driver runs them."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.testing.test_stream import TestStream
    from apache_beam.transforms import window

    from beam_spark_runner import SparkRunner

    for streaming in (False, True):
        options = PipelineOptions(["--streaming"] if streaming else [])
        with beam.Pipeline(runner=SparkRunner(), options=options) as p:
            if streaming:
                source = (
                    TestStream()
                    .add_elements([window.TimestampedValue(("a", 1), 1), window.TimestampedValue(("b", 2), 4)])
                    .advance_watermark_to_infinity()
                )
            else:
                source = beam.Create([("a", 1), ("b", 2)])
            (
                p
                | source
                | beam.WindowInto(window.FixedWindows(10))
                | beam.CombinePerKey(sum)
                | beam.GroupByKey()
                | beam.MapTuple(lambda k, vs: (k, list(vs)))
            )


def write() -> int:
    """Writes the archive (0), or leaves none (1)."""
    final = path()
    os.makedirs(os.path.dirname(final), exist_ok=True)
    writing = "%s.%d.writing" % (final, os.getpid())
    options = os.environ.get("SPARK_SUBMIT_OPTS", "")
    os.environ["SPARK_SUBMIT_OPTS"] = ("%s -XX:ArchiveClassesAtExit=%s %s" % (options, writing, QUIET)).strip()
    try:
        _warm_up()
        from pyspark import SparkContext

        gateway = SparkContext._gateway
        SparkContext._active_spark_context.stop()
        # The JVM writes the archive as it exits, which it does when its
        # standard input closes.
        gateway.proc.stdin.close()
        code = gateway.proc.wait(timeout=300)
        if code != 0 or os.path.getsize(writing) == 0:
            return 1
        os.replace(writing, final)
        _prune(os.path.dirname(final))
        return 0
    finally:
        for leftover in (writing, final + ".lock"):
            if os.path.exists(leftover):
                os.remove(leftover)


def _prune(directory):
    archives = sorted(glob.glob(os.path.join(directory, "*" + _SUFFIX)), key=os.path.getmtime, reverse=True)
    for stale in archives[KEEP:]:
        os.remove(stale)
    for pending in glob.glob(os.path.join(directory, "*.writing")):
        pid = pending.rsplit(".", 2)[-2]
        if pid.isdigit() and not os.path.exists("/proc/%s" % pid):
            os.remove(pending)


if __name__ == "__main__":
    sys.exit(write())
