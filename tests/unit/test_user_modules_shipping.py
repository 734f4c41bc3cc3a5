"""The zip of the driver's own modules goes to each SparkContext once
(execution/user_modules.py): a context started after another stopped or
died gets it again, and the zip is built once."""

from beam_spark_runner.execution import user_modules


class _Context:
    def __init__(self, application_id):
        self.applicationId = application_id
        self.added = []

    def addPyFile(self, path):
        self.added.append(path)


def test_each_spark_context_gets_the_zip_once(monkeypatch, tmp_path):
    module = tmp_path / "my_pipeline_helpers.py"
    module.write_text("X = 1\n")
    monkeypatch.setattr(user_modules, "user_module_files", lambda: {"my_pipeline_helpers.py": str(module)})
    monkeypatch.setattr(user_modules, "_shipped", {})
    monkeypatch.setattr(user_modules, "_zips", {}, raising=False)
    first, second = _Context("local-1"), _Context("local-2")

    path = user_modules.ship_user_modules(first)
    assert user_modules.ship_user_modules(first) == path and first.added == [path]
    # A new context (the first one's JVM gone): the same zip, added to it.
    assert user_modules.ship_user_modules(second) == path and second.added == [path]
