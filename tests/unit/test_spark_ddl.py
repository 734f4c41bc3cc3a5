"""The runner's DDL schema parser (io/spark/ddl.py) gives what Spark gives:
every case of tests/data/spark_ddl_cases.json (Spark's own answers, which
tests/integration/test_spark_ddl.py checks against the Spark installed)."""

import json
import os

import pytest

from beam_spark_runner.io.spark.ddl import DDLError, as_nullable, parse_ddl

with open(os.path.join(os.path.dirname(__file__), "..", "data", "spark_ddl_cases.json")) as f:
    CASES = json.load(f)

# What Spark reads and this parser refuses, pointing at a pyspark StructType:
# types and clauses no Beam row holds, and a schema with no column.
NOT_READ_HERE = {
    "i interval day to second": "type 'interval'",
    "v variant": "type 'variant'",
    "a string collate utf8_lcase": "COLLATE",
    "": "the text ends",
}


def _id(case):
    return case["ddl"] or "(empty)"


@pytest.mark.parametrize("case", [c for c in CASES if not c.get("refused") and c["ddl"] not in NOT_READ_HERE], ids=_id)
def test_a_schema_spark_reads_parses_to_the_same_struct(case):
    assert parse_ddl(case["ddl"]) == case["schema"]


@pytest.mark.parametrize("case", [c for c in CASES if c.get("file_schema") and c["ddl"] not in NOT_READ_HERE], ids=_id)
def test_a_file_source_reads_the_schema_made_nullable(case):
    assert as_nullable(parse_ddl(case["ddl"])) == case["file_schema"]


@pytest.mark.parametrize("case", [c for c in CASES if c.get("refused")], ids=_id)
def test_a_schema_spark_refuses_is_refused(case):
    with pytest.raises(DDLError):
        parse_ddl(case["ddl"])


@pytest.mark.parametrize("ddl", sorted(NOT_READ_HERE))
def test_what_is_not_read_here_is_refused_by_name(ddl):
    assert not next(c for c in CASES if c["ddl"] == ddl).get("refused")
    with pytest.raises(DDLError, match=NOT_READ_HERE[ddl]):
        parse_ddl(ddl)


def test_errors_say_where():
    with pytest.raises(DDLError, match=r"column 'int' \(position 0\) has no type"):
        parse_ddl("int")
    with pytest.raises(DDLError, match=r"unexpected 'b' at position 6"):
        parse_ddl("a int b string")
    with pytest.raises(DDLError, match=r"decimal\(40,2\) at position 2"):
        parse_ddl("a decimal(40, 2)")
