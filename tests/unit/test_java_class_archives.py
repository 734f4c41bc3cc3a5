"""Class-data archives for the Java harness's JVMs
(worker/java_class_archives.py): keyed by exactly what the JVM runs, put
in place whole, bounded, and never used when the user chose sharing."""

import os

import pytest

from beam_spark_runner.worker import java_class_archives


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BEAM_SPARK_CACHE_DIR", str(tmp_path))
    return tmp_path / "java-class-archives"


@pytest.fixture
def jars(tmp_path):
    paths = []
    for name in ("a.jar", "b.jar"):
        path = tmp_path / name
        path.write_bytes(b"jar " + name.encode())
        paths.append(str(path))
    return paths


def _written(archive, code=143):
    with open(archive.writing, "wb") as f:
        f.write(b"classes")
    archive.finish(code)


def test_the_first_jvm_writes_the_archive_the_next_maps(cache, jars):
    first = java_class_archives.for_jvm("/bin/sh", jars, ("-Xmx1g",))
    assert first.jvm_options == ("-XX:ArchiveClassesAtExit=" + first.writing,)
    assert not os.path.exists(first.final)
    _written(first)
    assert os.path.exists(first.final) and not os.path.exists(first.writing)
    second = java_class_archives.for_jvm("/bin/sh", jars, ("-Xmx1g",))
    assert second.jvm_options == ("-XX:SharedArchiveFile=" + first.final,) and second.writing is None


def test_a_killed_or_failed_jvm_leaves_no_archive(cache, jars):
    for code in (-9, 1, None):
        archive = java_class_archives.for_jvm("/bin/sh", jars, ())
        _written(archive, code)
        assert not os.path.exists(archive.final) and not os.path.exists(archive.writing)


@pytest.mark.parametrize(
    "change",
    ["another option", "a jar rewritten", "another jar", "another java"],
)
def test_an_archive_serves_only_what_wrote_it(cache, jars, tmp_path, change):
    _written(java_class_archives.for_jvm("/bin/sh", jars, ()))
    java, classpath, options = "/bin/sh", list(jars), ()
    if change == "another option":
        options = ("-Xmx2g",)
    elif change == "a jar rewritten":
        with open(jars[1], "ab") as f:
            f.write(b" and more")
    elif change == "another jar":
        classpath.append(str(tmp_path / "c.jar"))
    else:
        java = "/bin/true"
    assert java_class_archives.for_jvm(java, classpath, options).writing is not None


@pytest.mark.parametrize("option", ["-Xshare:off", "-XX:SharedArchiveFile=/x.jsa", "-XX:ArchiveClassesAtExit=/y"])
def test_a_user_who_chose_sharing_gets_no_archive(cache, jars, option):
    assert java_class_archives.for_jvm("/bin/sh", jars, (option,)) == java_class_archives.NO_ARCHIVE


def test_the_directory_keeps_the_archives_used_last_and_drops_stale_writes(cache, jars, tmp_path):
    cache.mkdir(parents=True)
    for n in range(java_class_archives.KEEP + 3):
        old = cache / ("%02d.jsa" % n)
        old.write_bytes(b"x")
        os.utime(old, (1000 + n, 1000 + n))
    stale = cache / "z.jsa.1.1.writing"
    stale.write_bytes(b"x")
    os.utime(stale, (1000, 1000))
    fresh = cache / "y.jsa.2.2.writing"
    fresh.write_bytes(b"x")
    os.utime(fresh, (1500, 1500))
    # Ten minutes after the stale write, under two after the fresh one.
    java_class_archives.for_jvm("/bin/sh", jars, (), clock=lambda: 1000 + 600)
    names = sorted(os.listdir(cache))
    kept = [n for n in names if n.endswith(".jsa")]
    # KEEP - 1 old ones, leaving room for the one this JVM writes.
    assert kept == ["%02d.jsa" % n for n in range(4, java_class_archives.KEEP + 3)]
    assert "z.jsa.1.1.writing" not in names and "y.jsa.2.2.writing" in names


def test_a_directory_that_cannot_be_made_means_no_archive(tmp_path, monkeypatch, jars):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("BEAM_SPARK_CACHE_DIR", str(blocker))
    assert java_class_archives.for_jvm("/bin/sh", jars, ()) == java_class_archives.NO_ARCHIVE
