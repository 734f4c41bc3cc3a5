"""The sinks' commit contract (worker/sink_commits.py): which finalization
callbacks are commits, that a failing commit stops the others and raises,
and that a commit needing the checkpoint's files gets them only from the
execution's context."""

import dataclasses

import pytest

from beam_spark_runner.worker import sink_commits


@dataclasses.dataclass(frozen=True)
class _Recorded(sink_commits.SinkCommit):
    name: str
    log: list
    fails: bool = False

    def commit(self, context):
        self.log.append(self.name)
        if self.fails:
            raise RuntimeError("%s: the target refused the epoch" % self.name)


def test_commits_are_told_apart_from_other_callbacks_by_the_contract_each_in_order():
    log = []
    first, second = _Recorded("first", log), _Recorded("second", log)

    def plain():
        pass

    commits, others = sink_commits.split([plain, first, plain, second])
    assert commits == [first, second] and others == [plain, plain]


def test_a_failing_commit_raises_and_the_ones_after_it_do_not_run():
    log = []
    commits = [_Recorded("a", log), _Recorded("b", log, fails=True), _Recorded("c", log)]
    with pytest.raises(RuntimeError, match="b: the target refused the epoch"):
        sink_commits.run_commits(commits, sink_commits.NO_EXECUTION)
    assert log == ["a", "b"]


def test_a_commit_gets_the_checkpoints_files_from_the_context_it_runs_in(tmp_path):
    opened = []

    @dataclasses.dataclass(frozen=True)
    class ReadsCheckpoint(sink_commits.SinkCommit):
        root: str

        def commit(self, context):
            opened.append(context.open_files(self.root))

    context = sink_commits.CommitContext(lambda root: ("files of", root))
    assert sink_commits.run_commits([ReadsCheckpoint(str(tmp_path))], context) == 1
    assert opened == [("files of", str(tmp_path))]
    # Called as a plain finalization callback, outside the execution.
    with pytest.raises(RuntimeError, match="checkpoint %s" % tmp_path):
        ReadsCheckpoint(str(tmp_path))()


def test_the_runners_exactly_once_sinks_commit_through_the_contract():
    from beam_spark_runner.io.database.sink_protocol import DatabasePublication
    from beam_spark_runner.io.database.spark_glue import StagedEpochPublication
    from beam_spark_runner.worker.transactional_files import Publication

    for publication in (Publication, DatabasePublication, StagedEpochPublication):
        assert issubclass(publication, sink_commits.SinkCommit), publication.__name__


def test_no_publication_starts_a_spark_session_of_its_own():
    """A commit reads through the execution's session (its context), never
    one it finds or creates itself."""
    import pathlib

    root = pathlib.Path(sink_commits.__file__).resolve().parents[1]
    found = [
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if path.name != "session.py" and "SparkSession.builder" in path.read_text()
    ]
    assert found == []


def test_a_pending_batch_whose_commits_cannot_be_loaded_fails_naming_it():
    """A checkpoint's pending finalization naming code that is not
    installed fails the release (the record stays for a run that can
    publish it) rather than publishing nothing."""
    import pickle
    import sys
    import types

    from beam_spark_runner.execution import streaming_commits
    from beam_spark_runner.streaming.checkpoint_records import SideEffects
    from beam_spark_runner.worker.beam_internals import pickler

    module = types.ModuleType("no_such_connector")

    class Commit:
        pass

    Commit.__module__, Commit.__qualname__ = module.__name__, "Commit"
    module.Commit = Commit
    sys.modules[module.__name__] = module
    try:
        blob = pickle.dumps(("Write", pickler.dumps([Commit()])))
    finally:
        del sys.modules[module.__name__]
    effects = SideEffects(finalizers=(blob,))
    with pytest.raises(RuntimeError, match="'Write': the checkpoint holds a completed batch .*no_such_connector"):
        streaming_commits.release(effects, sink_commits.NO_EXECUTION)
