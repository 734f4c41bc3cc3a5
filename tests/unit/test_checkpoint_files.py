"""The runner's checkpoint files on the local file system, with Python's own
calls (execution/checkpoint_files.py), without Spark."""

from beam_spark_runner.execution.checkpoint_files import LocalCheckpointFiles, open_checkpoint_files


def test_local_paths_and_file_uris_use_python_calls(tmp_path):
    assert isinstance(open_checkpoint_files(None, str(tmp_path)), LocalCheckpointFiles)
    files = open_checkpoint_files(None, "file://%s" % tmp_path)
    assert isinstance(files, LocalCheckpointFiles)
    assert files.uri("beam/plan.json") == "file://%s/beam/plan.json" % tmp_path


def test_write_read_list_delete(tmp_path):
    files = LocalCheckpointFiles("file://%s" % tmp_path, str(tmp_path))
    assert files.read("beam/pending/3.json") is None and files.list("beam/pending") == []
    files.write("beam/pending/3.json", b"three")
    files.write("beam/pending/3.json", b"THREE")  # rewritten in place, atomically
    assert files.read("beam/pending/3.json") == b"THREE"
    assert files.list("beam/pending") == ["3.json"]  # no temporary file left
    files.delete("beam/pending/3.json")
    files.delete("beam/pending/3.json")  # deleting what is gone is fine
    assert files.list("beam/pending") == [] and not files.exists("beam/pending/3.json")


def test_hadoop_checksum_files_are_hidden_and_dropped_with_their_file(tmp_path):
    commits = tmp_path / "spark" / "commits"
    commits.mkdir(parents=True)
    (commits / "0").write_text("v1\n{}")
    (commits / ".0.crc").write_bytes(b"crc")
    files = LocalCheckpointFiles(str(tmp_path), str(tmp_path))
    assert files.list("spark/commits") == ["0"]
    (tmp_path / "beam").mkdir()
    (tmp_path / "beam" / "plan.json").write_text("old")
    (tmp_path / "beam" / ".plan.json.crc").write_bytes(b"crc of old")
    files.write("beam/plan.json", b"new")
    assert sorted(p.name for p in (tmp_path / "beam").iterdir()) == ["plan.json"]
