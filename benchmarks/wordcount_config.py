"""The settings of benchmarks/batch_wordcount.py that its modules share: the
repository's and examples' directories, the Spark master and the shuffle
partitions of both Spark variants."""

import os

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES_DIR = os.path.join(REPO_ROOT, "examples")
MASTER = "local[2]"
PARTITIONS = 2  # shuffle partitions of both Spark variants (= cores of local[2])
