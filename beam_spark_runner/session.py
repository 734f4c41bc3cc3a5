"""Getting a SparkSession: reuse an active one (a notebook's, a test's),
otherwise create one from the options. The only place that starts Spark."""

import logging
import os
import sys

from beam_spark_runner.execution import local_python
from beam_spark_runner.execution.jvm_console import filtered_stderr
from beam_spark_runner.execution.spark_internals import active_session_or_none, set_worker_python, worker_python
from beam_spark_runner.options import parse_spark_conf

_LOG = logging.getLogger(__name__)

# The runner's JVM helpers (built from java/ by tools/build_jar.sh).
RUNNER_JAR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jars", "beam-spark-runner.jar")
# Hadoop's local file system setting permissions in the JVM rather than by
# running `chmod` once per file (java/beamsparkrunner/fs/).
LOCAL_FILE_SYSTEM = "beamsparkrunner.fs.NioLocalFileSystem"
# Spark SQL's setting whose default gives its Python workers an environment,
# hence a worker daemon, of their own (runner_spark_conf).
SHARED_DAEMON_KEY = "spark.sql.execution.pyspark.udf.simplifiedTraceback.enabled"
# The driver JVM's logging when the runner starts it (conf/log4j2.properties).
LOG4J_CONF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conf", "log4j2.properties")
_LOG4J_PROPERTY = "-Dlog4j2.configurationFile="


def ensure_python_workers_match_driver(user_conf=None):
    """Spark's Python workers run this interpreter (same Beam, same pickles)
    unless the user chose theirs: PYSPARK_PYTHON in the environment, or
    spark.pyspark.python among `user_conf` (a packed environment shipped
    with spark.archives, docs/deployment.md). Set before the SparkContext
    starts: PySpark's driver reads only the environment variable."""
    chosen = (user_conf or {}).get("spark.pyspark.python")
    if chosen and "PYSPARK_PYTHON" not in os.environ:
        os.environ["PYSPARK_PYTHON"] = chosen
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # PySpark hashes strings in workers; a fixed seed keeps that deterministic.
    os.environ.setdefault("PYTHONHASHSEED", "0")


def runner_spark_conf(master="local[*]"):
    """Spark settings of sessions the runner creates on `master` (user
    --spark_conf wins). On a local master the JVM helpers are on the
    driver's class path from its start, and `file:` paths use
    LOCAL_FILE_SYSTEM: a streaming query writes its checkpoint and state
    files with permissions, each of which Hadoop's own local file system
    (without its native library, which pyspark does not ship) sets by
    forking a `chmod` process. Elsewhere executors start without the jar
    on their class path, and their file systems are left as they are."""
    conf = {
        "spark.ui.showConsoleProgress": "false",
        "spark.executorEnv.PYTHONHASHSEED": "0",
        # What ensure_python_workers_match_driver chose (the user's, else this interpreter).
        "spark.executorEnv.PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
        # Forked Python workers start with Beam already imported.
        "spark.python.daemon.module": "beam_spark_runner.execution.spark_daemon",
        # One daemon for every Python worker of the session. Spark keeps a
        # daemon per set of worker environment variables, and its SQL Python
        # runners (a streaming query's mapInArrow and transformWithState, a
        # ReadFromSpark's conversion) add SPARK_SIMPLIFIED_TRACEBACK=1 where
        # RDD tasks (batch stages) do not: a session running both started a
        # second daemon, which imported Beam again (2-4 s of CPU) on the
        # critical path of its first streaming micro-batch. Without it a
        # failed Python task's traceback also lists PySpark's worker frames.
        SHARED_DAEMON_KEY: "false",
        # The JVM helpers: Beam metrics and watermarks in the Spark UI
        # (execution/ui_metrics.py, execution/ui_watermarks.py).
        "spark.jars": RUNNER_JAR,
    }
    if master.startswith("local"):
        conf["spark.driver.extraClassPath"] = RUNNER_JAR
        conf["spark.hadoop.fs.file.impl"] = LOCAL_FILE_SYSTEM
    return conf


def merged_spark_conf(user_conf, master="local[*]"):
    """The runner's settings on `master` updated by the user's; a user's
    `spark.jars` (and `spark.driver.extraClassPath`) keeps the runner's jar
    beside its own, and the driver's log4j configuration is the runner's
    unless the user's `spark.driver.extraJavaOptions` names one."""
    conf = runner_spark_conf(master)
    user_conf = dict(user_conf)
    jars = user_conf.pop("spark.jars", None)
    class_path = user_conf.pop("spark.driver.extraClassPath", None)
    conf.update(user_conf)
    if jars:
        conf["spark.jars"] = "%s,%s" % (jars, RUNNER_JAR)
    if class_path:
        ours = conf.get("spark.driver.extraClassPath")
        conf["spark.driver.extraClassPath"] = os.pathsep.join(path for path in (class_path, ours) if path)
    java_options = conf.get("spark.driver.extraJavaOptions", "")
    if _LOG4J_PROPERTY not in java_options:
        conf["spark.driver.extraJavaOptions"] = ("%s %sfile:%s" % (java_options, _LOG4J_PROPERTY, LOG4J_CONF)).strip()
    return conf


def _quiet_local_address(master):
    """A local master needs no address other machines reach: bound to the
    loopback, Spark does not warn that the host name resolves to it (the
    user's SPARK_LOCAL_IP wins)."""
    if master.startswith("local") and "SPARK_LOCAL_IP" not in os.environ:
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"


class RunConf:
    """The --spark_conf entries a run set on an active session, and their
    previous values: `restore()` puts them back when the run ends."""

    def __init__(self, spark=None, previous=None):
        self._spark = spark
        self._previous = previous or {}

    def restore(self):
        previous, self._previous = self._previous, {}
        for key, value in previous.items():
            if value is None:
                self._spark.conf.unset(key)
            else:
                self._spark.conf.set(key, value)


def get_or_create_session(spark_options, explicit=(), session=None):
    """(session, RunConf). An active session (a notebook's, a test's) is
    reused: --spark_conf entries Spark lets a running session change are set
    for the run and restored after it; the options that cannot apply to it
    (other static settings, --spark_master, --spark_app_name given
    explicitly) are named in one warning. Otherwise a session is created from
    the options. `explicit`: the options the user gave (not defaults);
    `session`: the session to use instead of the active one."""
    ensure_python_workers_match_driver(parse_spark_conf(spark_options.spark_conf))
    active, jvm_gone = (session, False) if session is not None else active_session_or_none()
    if jvm_gone:
        _LOG.warning(
            "Spark's driver JVM is gone (it ended, e.g. on an OutOfMemoryError, or was killed): this run "
            "starts a new SparkSession"
        )
    if active is not None:
        return active, _apply_to_active(active, spark_options, explicit)
    conf = merged_spark_conf(parse_spark_conf(spark_options.spark_conf), spark_options.spark_master)
    return new_session(spark_options.spark_master, spark_options.spark_app_name, conf), RunConf()


def new_session(master, app_name, conf):
    """A SparkSession the runner starts: `conf` (merged_spark_conf's),
    Spark's console noise left out (execution/jvm_console.py); on a local
    master its Python processes start through execution/local_python.py's
    launcher."""
    from pyspark.sql import SparkSession

    local_python.use_for_local_master(master)
    conf = dict(conf)
    if conf.get("spark.executorEnv.PYSPARK_PYTHON") == sys.executable:
        conf["spark.executorEnv.PYSPARK_PYTHON"] = os.environ["PYSPARK_PYTHON"]
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    _quiet_local_address(master)
    with filtered_stderr():
        session = builder.getOrCreate()
    _LOG.info("Started Spark (%s); its UI: %s", master, session.sparkContext.uiWebUrl)
    return session


def _workers_run_this_interpreter(context):
    """A local session started without a Python chosen for its workers (a
    notebook's `SparkSession.builder...getOrCreate()` with PYSPARK_PYTHON
    unset) runs them with PySpark's default, `python3` on the PATH, which in
    a Jupyter kernel or an unactivated virtualenv is another interpreter,
    without this runner or the user's packages: every task then fails with
    ModuleNotFoundError. Such a session's workers run this interpreter
    instead (they run on this machine). PySpark reads the interpreter from
    `SparkContext.pythonExec` (public, undocumented) each time it wraps a
    Python function; a session whose workers' Python the user chose
    (PYSPARK_PYTHON, spark.pyspark.python) or that runs on a cluster is
    left alone."""
    python = os.environ.get("PYSPARK_PYTHON")
    chosen = python not in (None, sys.executable) and not local_python.is_launcher(python)
    if worker_python(context) != "python3" or chosen or not context.master.startswith("local"):
        return
    if context.getConf().get("spark.pyspark.python", None) is not None:
        return
    set_worker_python(context, sys.executable)
    _LOG.info("The active local SparkSession's Python workers will run %s (the driver's interpreter)", sys.executable)


def _apply_to_active(spark, spark_options, explicit):
    _workers_run_this_interpreter(spark.sparkContext)
    previous, cannot = {}, []
    for key, value in parse_spark_conf(spark_options.spark_conf).items():
        current = spark.conf.get(key, None)
        if current == value:
            continue
        if spark.conf.isModifiable(key):
            previous[key] = current
            spark.conf.set(key, value)
        else:
            cannot.append("--spark_conf %s=%s (the session has %s)" % (key, value, current))
    context = spark.sparkContext
    if "spark_master" in explicit and spark_options.spark_master != context.master:
        cannot.append("--spark_master=%s (the session's master is %s)" % (spark_options.spark_master, context.master))
    if "spark_app_name" in explicit and spark_options.spark_app_name != context.appName:
        cannot.append("--spark_app_name=%s (the session's is %s)" % (spark_options.spark_app_name, context.appName))
    if cannot:
        _LOG.warning(
            "SparkRunner reuses the active SparkSession; these options cannot apply to it (they are "
            "fixed when a session starts: stop it, or set them where it is created): %s",
            "; ".join(cannot),
        )
    if previous:
        _LOG.info("SparkRunner sets %s on the active SparkSession for this run", ", ".join(sorted(previous)))
    return RunConf(spark, previous)
