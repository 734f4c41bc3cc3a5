"""The tests' driver class archive (tests/driver_class_archive.py): mapped
only once it exists whole, never when turned off, and added to
SPARK_SUBMIT_OPTS once."""

import os

from tests import driver_class_archive


def test_the_archive_is_mapped_only_once_it_exists(tmp_path, monkeypatch):
    monkeypatch.setenv("BEAM_SPARK_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(driver_class_archive.OFF_ENV, raising=False)
    archive = driver_class_archive.path()
    assert archive.startswith(str(tmp_path)) and driver_class_archive.jvm_options() == ()
    environ = {"SPARK_SUBMIT_OPTS": "-XX:TieredStopAtLevel=1"}
    assert not driver_class_archive.add_to_submit_options(environ)
    os.makedirs(os.path.dirname(archive))
    open(archive + ".4242.writing", "wb").close()  # a write in progress is not the archive
    assert driver_class_archive.jvm_options() == ()
    open(archive, "wb").close()
    assert driver_class_archive.jvm_options() == ("-XX:SharedArchiveFile=" + archive, "-Xlog:cds*=off")
    assert driver_class_archive.add_to_submit_options(environ)
    assert driver_class_archive.add_to_submit_options(environ)
    assert environ["SPARK_SUBMIT_OPTS"] == "-XX:TieredStopAtLevel=1 -XX:SharedArchiveFile=%s -Xlog:cds*=off" % archive
    monkeypatch.setenv(driver_class_archive.OFF_ENV, "off")
    assert driver_class_archive.jvm_options() == ()
    assert driver_class_archive.start_writing() is None


def test_one_writer_per_machine(tmp_path, monkeypatch):
    monkeypatch.setenv("BEAM_SPARK_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(driver_class_archive.OFF_ENV, raising=False)
    lock = driver_class_archive.path() + ".lock"
    os.makedirs(os.path.dirname(lock))
    open(lock, "wb").close()  # another process is writing it
    assert driver_class_archive.start_writing() is None
