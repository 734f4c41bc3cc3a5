"""One formatter configuration for the whole repository (ruff.toml): the
tree stays formatted with it."""

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_the_tree_is_formatted_with_the_repository_configuration():
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "--config", "ruff.toml", "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, "run `ruff format .`:\n" + result.stdout + result.stderr
