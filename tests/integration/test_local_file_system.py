"""`file:` paths of a local session the runner starts go through
beamsparkrunner.fs.NioLocalFileSystem (java/beamsparkrunner/fs/): Hadoop's
local file system, with permissions set in the JVM instead of by a `chmod`
process per file."""

import os
import stat

from beam_spark_runner.session import LOCAL_FILE_SYSTEM


def _file_system(spark, path):
    jvm = spark.sparkContext._jvm
    return jvm.org.apache.hadoop.fs.Path("file://%s" % path).getFileSystem(
        spark.sparkContext._jsc.hadoopConfiguration()
    )


def test_the_sessions_local_file_system_is_the_runners(spark_session, tmp_path):
    fs = _file_system(spark_session, tmp_path)
    assert fs.getClass().getName() == LOCAL_FILE_SYSTEM
    assert fs.getRawFileSystem().getClass().getName() == "beamsparkrunner.fs.NioRawLocalFileSystem"


def test_files_and_directories_get_the_permissions_asked_for(spark_session, tmp_path):
    jvm = spark_session.sparkContext._jvm
    fs = _file_system(spark_session, tmp_path)
    Path, FsPermission = jvm.org.apache.hadoop.fs.Path, jvm.org.apache.hadoop.fs.permission.FsPermission
    directory = str(tmp_path / "d")
    assert fs.mkdirs(Path("file://%s" % directory), FsPermission.createImmutable(0o750))
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o750
    target = Path("file://%s/f" % directory)
    out = fs.create(target, True)
    out.write(b"x")
    out.close()
    for mode in (0o640, 0o604, 0o751, 0o000, 0o777):
        fs.setPermission(target, FsPermission.createImmutable(mode))
        assert stat.S_IMODE(os.stat(os.path.join(directory, "f")).st_mode) == mode, oct(mode)
    assert fs.getFileStatus(target).getPermission().toShort() == 0o777
