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


def test_the_hash_is_the_one_spark_partitions_by(spark_session):
    values = list(range(-50, 200)) + [2**31 - 1, -2**31, 123456789]
    df = spark_session.createDataFrame([(v,) for v in values], "kg int")
    for n in (2, 3, 4, 16):
        got = {r.kg: r.p for r in df.selectExpr("kg", "pmod(hash(kg), %d) as p" % n).collect()}
        assert got == {v: spark_partition(v, n) for v in values}
        # And repartition(n, "kg") (as groupBy("kg") shuffles) follows it.
        placed = (df.filter(df.kg.isin(list(labels(n)))).repartition(n, "kg").rdd
                  .mapPartitionsWithIndex(lambda i, rows: [(r.kg, i) for r in rows]).collect())
        assert dict(placed) == {label: i for i, label in enumerate(labels(n))}
