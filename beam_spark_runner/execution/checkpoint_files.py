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
checkpoint file managers do. Reached through py4j on the driver only.
"""

import posixpath

BEAM_DIR = "beam"
SPARK_DIR = "spark"


def join(root, *parts):
    """`root` (a path or URI) joined with relative parts, '/'-separated."""
    return posixpath.join(root.rstrip("/") or "/", *parts)


class CheckpointFiles:
    """Reads and writes files under one checkpoint URI (driver side)."""

    def __init__(self, spark, root):
        self.root = root
        jvm = spark.sparkContext._jvm
        self._jvm = jvm
        self._Path = jvm.org.apache.hadoop.fs.Path
        self._fs = self._Path(root).getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())

    def uri(self, relative):
        return join(self.root, relative)

    def _path(self, relative):
        return self._Path(self.uri(relative))

    def exists(self, relative):
        return bool(self._fs.exists(self._path(relative)))

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
