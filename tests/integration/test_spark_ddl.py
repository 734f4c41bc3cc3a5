"""The DDL cases the runner's parser is checked against
(tests/data/spark_ddl_cases.json) are what the test environment's Spark
(the pinned PySpark) answers: a release that parses a case differently, or
reads a file source with another schema, fails here, naming the case
(rerun tools/spark_ddl_cases.py and look at the parser:
beam_spark_runner/io/spark/ddl.py). Older releases differ in what they
refuse: PySpark 4.0 refuses the comment 'it''s', which the parser reads as
"it's", as 4.3 does."""

import importlib.util
import os

_TOOL = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "spark_ddl_cases.py")
_spec = importlib.util.spec_from_file_location("spark_ddl_cases", _TOOL)
spark_ddl_cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(spark_ddl_cases)
CASES = spark_ddl_cases.load()


def test_the_recorded_answers_are_the_installed_sparks(spark_session):
    found = spark_ddl_cases.answers(spark_session, CASES)
    differ = {old["ddl"]: (old, new) for old, new in zip(CASES, found) if old != new}
    assert not differ, "Spark answers these DDL cases differently from tests/data/spark_ddl_cases.json: %s" % differ
    assert len(found) == len(CASES) > 30
