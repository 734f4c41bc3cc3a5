"""The runner's own files of a streaming run, kept under the checkpoint URI
through Hadoop's FileSystem: the same file system, configuration and
credentials Spark uses for its offset and commit logs, so a checkpoint on
HDFS, S3A, ABFS, ... holds everything a restarted driver needs, and a driver
started elsewhere with only the checkpoint URI resumes.

Layout under the checkpoint URI:

    spark/            Spark's checkpoint (offsets, commits, state)
    beam/plan.json    the plan fingerprint (streaming/plan_fingerprint.py)
    beam/holds/<n>.json  the hold reports of batch n (a few recent ones)

Writes go to a temporary file renamed into place, as Spark's own
checkpoint file managers do. Reached through py4j on the driver only,
except for a checkpoint on the local file system (a path, or a `file:`
URI): there Python's own calls do the same (rename(2) is atomic), about 50x
faster than a py4j round trip per Hadoop call (measured by
benchmarks/checkpointing.py: 24 ms of the coordinator's time per batch).
"""

import os
import posixpath
import shutil
import urllib.parse

from beam_spark_runner.execution import spark_internals

BEAM_DIR = "beam"
SPARK_DIR = "spark"


def join(root, *parts):
    """`root` (a path or URI) joined with relative parts, '/'-separated."""
    return posixpath.join(root.rstrip("/") or "/", *parts)


def is_local(root):
    """Whether `root` is a local path or a `file:` URI."""
    parsed = urllib.parse.urlparse(root)
    return parsed.scheme == "file" or (parsed.scheme == "" and not root.startswith("//"))


def open_checkpoint_files(spark, root):
    """The runner's files under the checkpoint `root`: `LocalCheckpointFiles`
    for a local path or `file:` URI (`spark` may be None), else
    `CheckpointFiles` (Hadoop)."""
    if is_local(root):
        parsed = urllib.parse.urlparse(root)
        return LocalCheckpointFiles(root, parsed.path if parsed.scheme == "file" else root)
    return CheckpointFiles(spark, root)


class LocalCheckpointFiles:
    """`CheckpointFiles` on the local file system, with Python's own calls.
    Hadoop's checksum files (`.<name>.crc`, written by Spark and by runners
    before this one) are never listed, and removed with their file."""

    def __init__(self, root, path):
        self.root = root
        self._dir = os.path.abspath(path)

    def uri(self, relative):
        return join(self.root, relative)

    def _path(self, relative):
        return os.path.join(self._dir, *relative.split("/"))

    def exists(self, relative):
        return os.path.exists(self._path(relative))

    @staticmethod
    def exists_at(uri):
        """Whether the file an absolute path or `file:` URI names exists
        (True for a URI of another file system: not checked here)."""
        parsed = urllib.parse.urlparse(uri)
        if parsed.scheme == "file":
            return os.path.exists(parsed.path)
        return os.path.exists(uri) if parsed.scheme == "" else True

    def read(self, relative):
        try:
            with open(self._path(relative), "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def write(self, relative, data: bytes):
        path = self._path(relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        self._drop_checksum(path)

    def delete(self, relative):
        path = self._path(relative)
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.remove(path)
            except FileNotFoundError:
                pass
        self._drop_checksum(path)

    def list(self, relative):
        try:
            names = os.listdir(self._path(relative))
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(n for n in names if not (n.startswith(".") and n.endswith(".crc")))

    @staticmethod
    def _drop_checksum(path):
        # A checksum Hadoop wrote for an earlier version of the file no
        # longer matches it.
        head, name = os.path.split(path)
        try:
            os.remove(os.path.join(head, "." + name + ".crc"))
        except FileNotFoundError:
            pass


class CheckpointFiles:
    """Reads and writes files under one checkpoint URI (driver side)."""

    def __init__(self, spark, root):
        self.root = root
        jvm = spark_internals.jvm(spark.sparkContext)
        self._jvm = jvm
        self._Path = jvm.org.apache.hadoop.fs.Path
        hadoop_conf = spark_internals.java_spark_context(spark.sparkContext).hadoopConfiguration()
        self._fs = self._Path(root).getFileSystem(hadoop_conf)

    def uri(self, relative):
        return join(self.root, relative)

    def _path(self, relative):
        return self._Path(self.uri(relative))

    def exists(self, relative):
        return bool(self._fs.exists(self._path(relative)))

    def exists_at(self, uri):
        """Whether the file an absolute URI names exists, on its own file system."""
        path = self._Path(uri)
        return bool(path.getFileSystem(self._fs.getConf()).exists(path))

    def read(self, relative):
        """The file's bytes, or None if it does not exist."""
        path = self._path(relative)
        if not self._fs.exists(path):
            return None
        stream = self._fs.open(path)
        try:
            return bytes(self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
        finally:
            stream.close()

    def write(self, relative, data: bytes):
        """Writes `data` atomically: readers see the old file or the new one."""
        path = self._path(relative)
        tmp = self._Path(self.uri(relative) + ".tmp")
        out = self._fs.create(tmp, True)
        try:
            out.write(bytearray(data))
        finally:
            out.close()
        if self._fs.rename(tmp, path):
            return
        # HDFS-like file systems refuse to rename onto an existing file. The
        # runner rewrites a file only for a batch that has not committed yet
        # (a replay), which nothing reads before the batch commits.
        self._fs.delete(path, False)
        if not self._fs.rename(tmp, path):
            raise IOError("could not rename %s to %s" % (tmp.toString(), path.toString()))

    def delete(self, relative):
        self._fs.delete(self._path(relative), True)

    def list(self, relative):
        """Names of the files directly under a directory ([] if absent)."""
        path = self._path(relative)
        if not self._fs.exists(path):
            return []
        return sorted(status.getPath().getName() for status in self._fs.listStatus(path))
