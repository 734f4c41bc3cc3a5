"""The exactly-once file sink's publication (worker/transactional_files.py),
without Spark: a pane's staged files become its final files once, whatever
the number of attempts and wherever an attempt stopped."""

import os

import pytest
from apache_beam.io.filesystems import FileSystems

from beam_spark_runner.worker.transactional_files import (
    Move,
    Publication,
    PublicationError,
    _balanced_chunks,
    pane_dir,
    staged_name,
)


def _window(tmp_path):
    return str(tmp_path / "beam-temp-window")


def _pane(tmp_path, pane=0, shards=3, stale_glob=None):
    staging = tmp_path / os.path.basename(pane_dir(_window(tmp_path), pane))
    staging.mkdir(exist_ok=True)
    moves = []
    for shard in range(shards):
        staged = staging / staged_name(shard)
        staged.write_text("pane %d shard %d" % (pane, shard) + chr(10))
        moves.append(Move(str(staged), str(tmp_path / "out" / ("part-%d-%d" % (pane, shard)))))
    return Publication("write", _window(tmp_path), pane, tuple(moves), stale_glob)


def _published(tmp_path):
    out = tmp_path / "out"
    return sorted((p.name, p.read_text()) for p in out.iterdir()) if out.exists() else []


def test_publishes_each_staged_file_under_its_final_name(tmp_path):
    _pane(tmp_path)()
    assert _published(tmp_path) == [("part-0-%d" % s, "pane 0 shard %d\n" % s) for s in range(3)]


def test_a_second_call_changes_nothing(tmp_path):
    publication = _pane(tmp_path)
    publication()
    before = _published(tmp_path)
    publication()  # a restart that finishes a commit already finished
    assert _published(tmp_path) == before


def test_finishes_a_publication_interrupted_half_way(tmp_path):
    publication = _pane(tmp_path)
    first = publication.moves[0]
    os.makedirs(os.path.dirname(first.final))
    FileSystems.rename([first.staged], [first.final])  # the crash came after one rename
    publication()
    assert [name for name, _ in _published(tmp_path)] == ["part-0-0", "part-0-1", "part-0-2"]


def test_a_file_neither_staged_nor_published_is_an_error_naming_it(tmp_path):
    publication = _pane(tmp_path)
    os.remove(publication.moves[1].staged)
    with pytest.raises(PublicationError, match="staged.*-p0/shard-1.*part-0-1"):
        publication()


def test_replaces_a_final_file_left_by_an_earlier_run(tmp_path):
    publication = _pane(tmp_path, shards=1)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "part-0-0").write_text("old\n")
    publication()
    assert _published(tmp_path) == [("part-0-0", "pane 0 shard 0\n")]


def test_stale_files_of_the_window_are_deleted_but_never_its_own(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "part-0-9").write_text("from an earlier run with more shards\n")
    publication = _pane(tmp_path, shards=2, stale_glob=str(tmp_path / "out" / "part-0-*"))
    first = publication.moves[0]
    FileSystems.rename([first.staged], [first.final])
    publication()
    assert [name for name, _ in _published(tmp_path)] == ["part-0-0", "part-0-1"]


def _staging_dirs(tmp_path):
    return sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("beam-temp-window"))


def test_the_pane_staging_directory_goes_with_what_aborted_attempts_left_there(tmp_path):
    publication = _pane(tmp_path, pane=1, shards=1)
    (tmp_path / "beam-temp-window-p1" / staged_name(5)).write_text("an aborted attempt's extra shard")
    publication()
    assert _staging_dirs(tmp_path) == []
    assert [name for name, _ in _published(tmp_path)] == ["part-1-0"]


def test_earlier_panes_left_by_aborted_attempts_go_later_ones_stay(tmp_path):
    publication = _pane(tmp_path, pane=2, shards=1)
    for pane in (0, 1, 3):  # 0, 1: aborted attempts' panes; 3: a later pane being written
        (tmp_path / ("beam-temp-window-p%d" % pane)).mkdir()
        (tmp_path / ("beam-temp-window-p%d" % pane) / staged_name(0)).write_text("x")
    publication()
    assert _staging_dirs(tmp_path) == ["beam-temp-window-p3"]


def test_balanced_chunks_keep_order_and_sizes_within_one():
    chunks = _balanced_chunks(list(range(7)), 3)
    assert chunks == [[0, 1, 2], [3, 4], [5, 6]]
    assert _balanced_chunks([1], 3) == [[1], [], []]
