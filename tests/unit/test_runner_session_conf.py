"""The Spark settings of sessions the runner starts (session.py)."""

import os

from beam_spark_runner import session


def test_a_local_session_has_the_jar_on_the_drivers_class_path_and_the_forkless_local_file_system():
    conf = session.runner_spark_conf("local[2,4]")
    assert conf["spark.driver.extraClassPath"] == session.RUNNER_JAR
    assert conf["spark.hadoop.fs.file.impl"] == session.LOCAL_FILE_SYSTEM == "beamsparkrunner.fs.NioLocalFileSystem"


def test_a_cluster_session_keeps_hadoops_local_file_system():
    """Executors elsewhere start without the runner's jar on their class
    path: naming a class of it as their file system would fail them."""
    conf = session.runner_spark_conf("spark://host:7077")
    assert "spark.driver.extraClassPath" not in conf and "spark.hadoop.fs.file.impl" not in conf
    assert conf["spark.jars"] == session.RUNNER_JAR


def test_the_users_class_path_and_file_system_come_first():
    conf = session.merged_spark_conf({"spark.driver.extraClassPath": "/u/lib.jar"}, "local[*]")
    assert conf["spark.driver.extraClassPath"] == os.pathsep.join(["/u/lib.jar", session.RUNNER_JAR])
    mine = session.merged_spark_conf({"spark.hadoop.fs.file.impl": "my.LocalFs"}, "local[*]")
    assert mine["spark.hadoop.fs.file.impl"] == "my.LocalFs"
    on_cluster = session.merged_spark_conf({"spark.driver.extraClassPath": "/u/lib.jar"}, "yarn")
    assert on_cluster["spark.driver.extraClassPath"] == "/u/lib.jar"


def test_the_committed_jar_is_what_java_sources_build(tmp_path):
    """tools/build_jar.sh builds the same bytes from java/: the jar holds
    no class whose source is not committed, and no stale one."""
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    built = tmp_path / "runner.jar"
    subprocess.run(
        ["sh", os.path.join(root, "tools", "build_jar.sh")],
        env=dict(os.environ, PYTHON=sys.executable, OUT=str(built)),
        check=True,
        capture_output=True,
    )
    with open(session.RUNNER_JAR, "rb") as committed:
        assert built.read_bytes() == committed.read(), "run tools/build_jar.sh and commit the jar"


def test_sql_python_tasks_share_the_rdd_tasks_worker_daemon_unless_the_user_says_otherwise():
    """Spark SQL's simplified tracebacks give its Python workers an
    environment, hence a daemon, of their own (session.SHARED_DAEMON_KEY)."""
    assert session.runner_spark_conf("local[2]")[session.SHARED_DAEMON_KEY] == "false"
    assert session.runner_spark_conf("yarn")[session.SHARED_DAEMON_KEY] == "false"
    mine = session.merged_spark_conf({session.SHARED_DAEMON_KEY: "true"}, "local[*]")
    assert mine[session.SHARED_DAEMON_KEY] == "true"
