"""README.md's options table is the one tools/options_table.py renders from
the runner's options: a new or changed option fails here until the table is
regenerated (python tools/options_table.py --write)."""

import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _tool():
    spec = importlib.util.spec_from_file_location("options_table", os.path.join(ROOT, "tools", "options_table.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_holds_the_generated_options_table():
    tool = _tool()
    with open(tool.README) as f:
        table = tool.readme_table(f.read())
    assert table is not None, "README.md lost its options table markers"
    assert table == tool.render(), "README.md's options table is stale: run python tools/options_table.py --write"


def test_every_runner_option_has_a_row():
    import argparse

    from beam_spark_runner.job_service.pipeline_options import declared_actions
    from beam_spark_runner.options import SparkRunnerOptions

    parser = argparse.ArgumentParser(add_help=False)
    SparkRunnerOptions._add_argparse_args(parser)
    rendered = _tool().render()
    for action in declared_actions(parser):
        assert "| `--%s` |" % action.dest in rendered
