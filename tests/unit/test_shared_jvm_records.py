"""The records of an executor's shared Java SDK harness JVMs
(worker/java_jvm_sharing.py): a record of a live JVM is read back whole;
records of dead JVMs go when another is written; a live record of another
format (another version of the runner on the same host) is neither used
nor removed."""

import json
import os
import subprocess
import sys

from beam_spark_runner.worker.java_jvm_sharing import FORMAT_VERSION, SharedJvm, SharedJvms


def _sleeper():
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def test_live_records_are_read_and_kept_dead_ones_go_and_other_formats_are_left_to_their_owners(tmp_path):
    jvms = SharedJvms(str(tmp_path))
    live, dead = _sleeper(), _sleeper()
    dead.kill()
    dead.wait()
    try:
        mine = SharedJvm("127.0.0.1:1", live.pid, live.pid, "w", "127.0.0.1:2", "token")
        with open(tmp_path / "other-live.json", "w") as f:
            json.dump({"format_version": FORMAT_VERSION + 1, "owner_pid": live.pid, "jvm_pid": live.pid}, f)
        with open(tmp_path / "other-dead.json", "w") as f:
            json.dump({"format_version": FORMAT_VERSION - 1, "owner_pid": dead.pid, "jvm_pid": dead.pid}, f)
        with jvms.locked():
            jvms.write("stale", SharedJvm("127.0.0.1:3", dead.pid, dead.pid, "x"))
            jvms.write("mine", mine)
            assert jvms.read("mine") == mine
            assert jvms.read("other-live") is None  # another format: never used
        assert sorted(n for n in os.listdir(tmp_path) if n.endswith(".json")) == ["mine.json", "other-live.json"]
    finally:
        live.kill()
        live.wait()
