"""The hand-written PySpark side of benchmarks/batch_wordcount.py: the
SparkSession both Spark variants share (start_session), the word count with
RDDs and Python lambdas (run_pyspark), the prefixes of it that --phases
times (_pyspark_phase), and the tokenizer both it and the Beam phases use."""

import operator
import os
import re
import sys

from wordcount_config import EXAMPLES_DIR, MASTER, PARTITIONS, REPO_ROOT

# The tokenizer of examples/wordcount.py; the generated text is lowercase
# ASCII words separated by single spaces, so it agrees with str.split().
WORD_RE = re.compile(r"[\w\']+", re.UNICODE)


def _tokenize(line):
    # Character for character the call examples/wordcount.py makes (re's
    # pattern cache lookup included), so both variants run the same user code.
    return re.findall(r"[\w\']+", line, re.UNICODE)


def _format(pair):
    return "%s: %d" % pair


def run_pyspark(sc, input_path, output_dir, tokenizer):
    split = _tokenize if tokenizer == "regex" else str.split
    (
        sc.textFile(input_path)
        .flatMap(lambda line: split(line))
        .map(lambda word: (word, 1))
        .reduceByKey(operator.add, PARTITIONS)
        .map(_format)
        .saveAsTextFile(output_dir)
    )


def _pyspark_phase(sc, input_path, phase):
    lines = sc.textFile(input_path)
    if phase == "read":
        return lines.map(len).sum()
    if phase == "split":
        return lines.flatMap(_tokenize).map(len).sum()
    return lines.flatMap(_tokenize).map(lambda w: (w, 1)).reduceByKey(operator.add, PARTITIONS).values().sum()


def start_session(extra_conf=None):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("PYTHONHASHSEED", "0")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Workers import examples/wordcount.py by name if a pickle refers to it.
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (EXAMPLES_DIR, REPO_ROOT, os.environ.get("PYTHONPATH")) if p)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(MASTER)
        .appName("batch-wordcount-benchmark")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.default.parallelism", str(PARTITIONS))
        .config("spark.sql.shuffle.partitions", str(PARTITIONS))
        .config("spark.driver.memory", "2g")
        .config("spark.executorEnv.PYTHONHASHSEED", "0")
        .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
    )
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    # PySpark pickles this module's functions for the workers, and benchmarks/
    # is not on their path: ship them by value, as a script's own functions.
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    return spark
