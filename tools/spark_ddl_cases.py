"""Spark's own answers for the DDL schema cases the runner's parser
(beam_spark_runner/io/spark/ddl.py) is checked against.

For each case's `ddl` in tests/data/spark_ddl_cases.json it records
`schema`, the StructType (JSON form) `StructType.fromDDL` gives, and
`file_schema`, the schema a Parquet read with it reports (what a file
source's rows have), or `refused` when Spark refuses the text. Run it
after adding a case, or to see what a new Spark says:

    .venv/bin/python tools/spark_ddl_cases.py [--check]

`--check` writes nothing and exits 1 when Spark's answers differ from the
file's (tests/integration/test_spark_ddl.py runs the same comparison).
"""

import argparse
import json
import os
import sys
import tempfile

CASES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "spark_ddl_cases.json")


def spark_answer(spark, ddl, parquet_path):
    """What Spark makes of `ddl`: {"schema", "file_schema"} or {"refused": True}."""
    from pyspark.sql.types import StructType

    try:
        schema = StructType.fromDDL(ddl)
    except Exception:  # noqa: BLE001 -- Spark's parse errors come in several classes
        return {"refused": True}
    if not isinstance(schema, StructType):
        return {"refused": True}
    answer = {"schema": schema.jsonValue()}
    try:
        answer["file_schema"] = spark.read.schema(schema).parquet(parquet_path).schema.jsonValue()
    except Exception:  # noqa: BLE001
        answer["file_schema"] = None  # Spark's file sources refuse it (char, varchar)
    return answer


def answers(spark, cases):
    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, "one_row")
        spark.range(1).write.parquet(path)
        return [dict({"ddl": case["ddl"]}, **spark_answer(spark, case["ddl"], path)) for case in cases]


def load():
    with open(CASES) as f:
        return json.load(f)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the file; write nothing")
    args = parser.parse_args(argv)
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.master("local[1]").getOrCreate()
    cases = load()
    found = answers(spark, cases)
    if args.check:
        differ = [new["ddl"] for new, old in zip(found, cases) if new != old]
        for ddl in differ:
            print("Spark's answer differs for %r" % ddl)
        return 1 if differ else 0
    with open(CASES, "w") as f:
        json.dump(found, f, indent=1, sort_keys=True)
        f.write("\n")
    print("%d cases written to %s" % (len(found), os.path.relpath(CASES)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
