"""The runner's checkpoint files on the local file system, with Python's own
calls (execution/checkpoint_files.py), without Spark."""

import json

from beam_spark_runner.execution.checkpoint_files import LocalCheckpointFiles, open_checkpoint_files
from beam_spark_runner.execution.streaming_commits import moved_state_schemas


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


def _operator_metadata(root, operator, batch, schema_uris):
    directory = root / "spark" / "state" / str(operator) / "_metadata" / "v2"
    directory.mkdir(parents=True, exist_ok=True)
    entry = {"operatorInfo": {"operatorId": operator}, "stateStoreInfo": [{"stateSchemaFilePaths": schema_uris}]}
    (directory / str(batch)).write_text("v2\n" + json.dumps(entry))


def test_schema_files_recorded_where_the_checkpoint_no_longer_is_are_named(tmp_path):
    here = tmp_path / "checkpoint"
    schema = here / "spark" / "state" / "0" / "_stateSchema" / "default" / "0_a"
    schema.parent.mkdir(parents=True)
    schema.write_text("schema")
    files = LocalCheckpointFiles(str(here), str(here))
    _operator_metadata(here, 0, 0, ["file:%s" % schema])
    assert moved_state_schemas(files) == []  # where Spark wrote it

    gone = "file:/nonexistent/checkpoint/spark/state/1/_stateSchema/default/0_b"
    _operator_metadata(here, 1, 0, ["file:%s" % schema])
    _operator_metadata(here, 1, 3, [gone])  # only the newest entry counts
    (problem,) = moved_state_schemas(files)
    assert problem == "%s/spark/state/1/_metadata/v2/3: %s" % (here, gone)


def test_hold_records_of_a_long_run_are_pruned_in_the_checkpoint_and_the_planners_directory(tmp_path):
    """The driver writes one hold record per micro-batch, for the source
    planner (a local directory) and into the checkpoint; both keep only the
    newest HOLDS_KEPT, however many batches ran."""
    from beam_spark_runner.execution.streaming_checkpoint import HOLDS_DIR, HOLDS_KEPT, HoldFiles

    checkpoint, scratch = tmp_path / "checkpoint", tmp_path / "scratch"
    files = LocalCheckpointFiles(str(checkpoint), str(checkpoint))
    holds = HoldFiles(files)
    for batch in range(1, 501):
        holds.record(str(scratch), batch, {"format": 4, "batch": batch})
    newest = ["%d.json" % b for b in range(501 - HOLDS_KEPT, 501)]
    assert sorted(files.list(HOLDS_DIR)) == newest
    assert sorted(p.name for p in (scratch / "holds").iterdir()) == newest
    # A restarted driver's planner starts from the checkpoint's newest records.
    restored = tmp_path / "restored"
    holds.restore_into(str(restored))
    assert sorted(p.name for p in (restored / "holds").iterdir()) == newest
    assert json.loads((restored / "holds" / "500.json").read_text()) == {"format": 4, "batch": 500}
