"""Key-group labels against Spark itself: the hash streaming/key_groups.py
computes is the one Spark partitions a streaming query's rows by."""

from beam_spark_runner.streaming.key_groups import labels, spark_partition


def test_the_hash_is_the_one_spark_partitions_by(spark_session):
    values = list(range(-50, 200)) + [2**31 - 1, -(2**31), 123456789]
    df = spark_session.createDataFrame([(v,) for v in values], "kg int")
    for n in (2, 3, 4, 16):
        got = {r.kg: r.p for r in df.selectExpr("kg", "pmod(hash(kg), %d) as p" % n).collect()}
        assert got == {v: spark_partition(v, n) for v in values}
        # And repartition(n, "kg") (as groupBy("kg") shuffles) follows it.
        placed = (
            df.filter(df.kg.isin(list(labels(n))))
            .repartition(n, "kg")
            .rdd.mapPartitionsWithIndex(lambda i, rows: [(r.kg, i) for r in rows])
            .collect()
        )
        assert dict(placed) == {label: i for i, label in enumerate(labels(n))}
