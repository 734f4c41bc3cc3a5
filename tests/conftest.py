"""Test-process setup: one SparkSession for the whole process (the README's
test command runs two such processes, pytest-xdist), started by the first
test that needs it (integration, conformance and fault tests: their
conftest.py asks for it; unit and core tests never start Spark).

SparkRunner reuses an active SparkSession, so every pipeline a test runs
shares this one (JVM start-up is paid once per test process).
"""

import logging
import os
import subprocess
import tempfile
import threading
import time

import pytest

from tests import driver_class_archive

# Retries failed tasks, like the runner's default master (local[*,4]): the
# fault-injection tests (tests/faults/) need it.
SPARK_MASTER = os.environ.get("BEAM_SPARK_TEST_MASTER", "local[2,4]")

# The suite's Spark drivers run with the JVM's first JIT compiler only.
# spark-submit adds SPARK_SUBMIT_OPTS to every driver JVM it starts: this
# process's session and the drivers of the pipelines, notebooks and examples
# tests run in subprocesses (they inherit it). Most of those live a minute
# or two, where C2's compilations cost more CPU than they save: on 2 cores
# two driver-crash tests took 121 s instead of 159 s, a file of seven
# streaming tests 58 s instead of 77 s, a 3-minute file in one session the
# same either way. Only the tests' JVMs: the runner sets nothing of the kind.
JIT_OPTION = "-XX:TieredStopAtLevel=1"
if JIT_OPTION not in os.environ.get("SPARK_SUBMIT_OPTS", ""):
    os.environ["SPARK_SUBMIT_OPTS"] = ("%s %s" % (os.environ.get("SPARK_SUBMIT_OPTS", ""), JIT_OPTION)).strip()
# And they map the class archive of the driver JVM once it exists.
_ARCHIVE_IN_USE = driver_class_archive.add_to_submit_options()


def _start_session():
    from beam_spark_runner.execution import local_python
    from beam_spark_runner.session import ensure_python_workers_match_driver, runner_spark_conf

    ensure_python_workers_match_driver()
    local_python.use_for_local_master(SPARK_MASTER)  # as the runner's own sessions
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    for key, value in runner_spark_conf(SPARK_MASTER).items():
        builder = builder.config(key, value)
    return (
        builder.master(SPARK_MASTER)
        .appName("beam-spark-runner-tests")
        .config("spark.ui.enabled", "true")
        .config("spark.ui.port", "0")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        # One session runs hundreds of streaming queries, each micro-batch
        # a SQL execution whose plan the UI keeps: with Spark's default
        # retention (1000 executions) the driver's 1 GiB heap filled up
        # late in the suite (OutOfMemoryError serializing a task).
        .config("spark.sql.ui.retainedExecutions", "50")
        .config("spark.ui.retainedJobs", "200")
        .config("spark.ui.retainedStages", "200")
        .config("spark.sql.streaming.ui.retainedQueries", "20")
        .config("spark.sql.streaming.ui.retainedProgressUpdates", "20")
        .config("spark.default.parallelism", "2")
        # Tables tests write with saveAsTable live here, not in the checkout.
        .config("spark.sql.warehouse.dir", tempfile.mkdtemp(prefix="beam-spark-test-warehouse-"))
        # As the job server's session: concurrent runs share the executors
        # (tests/integration/test_job_service.py runs two jobs at once).
        .config("spark.scheduler.mode", "FAIR")
        .getOrCreate()
    )


@pytest.fixture(scope="session")
def spark_session():
    if os.environ.get("BEAM_SPARK_NO_SESSION"):
        yield None
        return
    # The first process of a run that needs Spark writes the drivers' class
    # archive once per installation (tests/driver_class_archive.py); the
    # drivers started after it map it.
    writer = driver_class_archive.start_writing()
    session = _start_session()
    session.sparkContext.setLogLevel("ERROR")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    yield session
    session.stop()
    if writer is not None:
        try:
            writer.wait(timeout=300)
        except subprocess.TimeoutExpired:
            writer.kill()


def pytest_addoption(parser):
    from tests import services

    services.add_options(parser)


# Test files that take a minute or more each (driver kills and restarts,
# notebooks, runs of many micro-batches, real-time idling, clusters): marked
# `slow`, so `-m "not slow"` is a fast inner loop; CI runs everything.
SLOW_FILES = (
    "tests/faults/",
    "tests/integration/test_notebooks.py",
    "tests/integration/test_long_run_bounded.py",
    "tests/integration/test_streaming_idle.py",
    "tests/integration/test_standalone_cluster.py",
    "tests/integration/test_cluster_dependencies.py",
    "tests/integration/test_console.py",
    "tests/integration/test_large_groups.py",
    # Maven builds the Java example and fetches Beam Java's jars, once.
    "tests/integration/test_java_pipelines.py",
    "tests/integration/test_cross_language_kafka.py",
)


# Test files whose single tests take minutes (Beam Java's ValidatesRunner
# slices): handed out first, so that neither test process is left alone
# with one of them at the end of a run while the other idles.
FIRST_FILES = (
    "tests/integration/test_java_validates_runner.py",
    "tests/integration/test_java_validates_runner_streaming.py",
)


def pytest_configure(config):
    if not hasattr(config, "workerinput"):  # the controlling process, not an xdist worker
        threading.Thread(target=_watch_machine, name="machine-watch", daemon=True).start()
    # The order pytest_collection_modifyitems sets is the schedule: without
    # this, pytest-xdist re-sorts the files by their number of tests.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_runtest_setup(item):
    """Once the drivers' class archive exists, the drivers this process
    starts map it (subprocesses inherit SPARK_SUBMIT_OPTS)."""
    global _ARCHIVE_IN_USE
    if not _ARCHIVE_IN_USE:
        _ARCHIVE_IN_USE = driver_class_archive.add_to_submit_options()


def pytest_collection_modifyitems(config, items):
    """Marks the slow files' tests (`-m "not slow"` leaves them out) and
    orders the files: FIRST_FILES, then the rest by their number of tests,
    most first (pytest-xdist's own order, which hands the slow files, with
    few tests each, out late: handing them out first made the suite slower
    on 2 cores, as they then all ran at once, competing for the cores)."""
    root = str(config.rootpath) + os.sep
    by_file = {}
    for item in items:
        path = str(item.path).replace(root, "", 1)
        if path.startswith(SLOW_FILES + FIRST_FILES):
            item.add_marker(pytest.mark.slow)
        by_file.setdefault(path, []).append(item)
    first = [f for f in FIRST_FILES if f in by_file]
    rest = sorted((f for f in by_file if f not in FIRST_FILES), key=lambda f: -len(by_file[f]))
    items[:] = [item for f in first + rest for item in by_file[f]]


# The least memory available and temporary space free seen during the run
# (MB), sampled by the controlling process (_watch_machine).
_LOWEST = {}


def _watch_machine():
    while True:
        _sample()
        time.sleep(5)


def _sample():
    """(memory available, temporary space free) now, counted in _LOWEST."""
    memory, disk = _available()
    _LOWEST["memory"] = min(memory, _LOWEST.get("memory", memory))
    _LOWEST["disk"] = min(disk, _LOWEST.get("disk", disk))
    return memory, disk


def pytest_terminal_summary(terminalreporter, exitstatus):
    """After a run with failures, what the machine had left beside them: a
    run that failed for want of memory or disk says so in its own output."""
    if exitstatus != 0:
        terminalreporter.write_line(machine_state())


def _available():
    """(memory available, free space in the temporary directory), in MB."""
    memory = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                memory = int(line.split()[1]) // 1024
    stat = os.statvfs(tempfile.gettempdir())
    return memory, stat.f_bavail * stat.f_frsize // 2**20


def machine_state():
    """Memory available and the temporary directory's free space, now and
    at their lowest in the run, and the Java processes running (Spark's,
    services', Beam's Java SDK harnesses)."""
    memory, disk = _sample()
    java = harnesses = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue  # gone since listed
        if argv and os.path.basename(argv[0]) == b"java":
            java += 1
            harnesses += b"org.apache.beam.fn.harness.FnHarness" in argv
    return (
        "machine at the end: %d MB of memory available (lowest in the run %d MB); %d MB free in %s (lowest %d MB); "
        "%d Java processes (%d Beam Java SDK harnesses)"
        % (
            memory,
            _LOWEST["memory"],
            disk,
            tempfile.gettempdir(),
            _LOWEST["disk"],
            java,
            harnesses,
        )
    )


@pytest.fixture
def postgresql_url(request):
    from tests import services

    return services.require(request, services.POSTGRESQL)


@pytest.fixture
def mariadb_url(request):
    from tests import services

    return services.require(request, services.MARIADB)


@pytest.fixture(params=["postgresql", "mariadb"])
def database_url(request):
    from tests import services

    return services.require(request, services.POSTGRESQL if request.param == "postgresql" else services.MARIADB)
