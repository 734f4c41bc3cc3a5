"""Key-group labels: each key-group of a streaming query lands in its own
Spark shuffle partition (streaming/key_groups.py)."""

import pytest

from beam_spark_runner.streaming import rows as R
from beam_spark_runner.streaming.key_groups import labels, spark_partition


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 16, 64])
def test_each_key_group_gets_its_own_partition(n):
    assert sorted(spark_partition(label, n) for label in labels(n)) == list(range(n))
    assert [spark_partition(label, n) for label in labels(n)] == list(range(n))


def test_plain_indexes_would_share_partitions():
    # Why labels exist: with 2 partitions, key-groups 0 and 1 both hash to 1.
    assert spark_partition(0, 2) == spark_partition(1, 2) == 1


def test_keys_are_spread_over_the_labels():
    seen = {R.key_group(b"key-%d" % i, 4) for i in range(200)}
    assert seen == set(labels(4))
