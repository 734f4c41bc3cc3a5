"""execution/state_store_calls.py against Spark's state store: calls on
many keys at once (pipelined over PySpark's state socket) store, read and
remove what the public one-call-at-a-time MapState API sees, and the
pipelined path is the one in use (a PySpark release that moves the private
pieces it needs fails here instead of silently slowing every batch)."""

import json


def test_pipelined_map_calls_agree_with_the_public_api(spark_session, tmp_path):
    from pyspark.sql import Row
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    class Probe(StatefulProcessor):
        def init(self, handle):
            from beam_spark_runner.execution.state_store_calls import KEY_SCHEMA, VALUE_SCHEMA, MapTable

            self.state = handle.getMapState("probe", KEY_SCHEMA, VALUE_SCHEMA)
            self.table = MapTable(self.state, "probe")

        def handleInputRows(self, key, rows, timerValues):
            list(rows)
            table, state = self.table, self.state
            items = [(b"k%04d" % i, b"v%d" % i * 3) for i in range(300)]
            table.put_many(items)
            wanted = [k for k, _ in items] + [b"missing-%d" % i for i in range(5)]
            got = table.get_many(wanted)
            public = [None if state.getValue((k,)) is None else bytes(state.getValue((k,))[0]) for k in wanted[::50]]
            table.remove_many([k for k, _ in items[:100]])
            after = table.get_many([k for k, _ in items[95:105]])
            report = {
                "pipelined": table._wire is not None,
                "got": got == [v for _, v in items] + [None] * 5,
                "public": public == got[::50],
                "after": after == [None] * 5 + [v for _, v in items[100:105]],
                "count": sum(1 for _ in state.keys()),
            }
            yield Row(kg=key[0], report=json.dumps(report))

        def close(self):
            pass

    provider = "spark.sql.streaming.stateStore.providerClass"
    saved = spark_session.conf.get(provider, None)
    # transformWithState needs RocksDB (the runner sets it per query too).
    spark_session.conf.set(provider, "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
    source = tmp_path / "in"
    source.mkdir()
    (source / "one.json").write_text('{"kg": 1}\n')
    query = (
        spark_session.readStream.schema("kg int")
        .json(str(source))
        .groupBy("kg")
        .transformWithState(Probe(), "kg int, report string", "Append", "None")
        .writeStream.format("memory")
        .queryName("state_store_calls_probe")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(300)
        (row,) = spark_session.sql("select report from state_store_calls_probe").collect()
    finally:
        query.stop()
        if saved is None:
            spark_session.conf.unset(provider)
        else:
            spark_session.conf.set(provider, saved)
    assert json.loads(row.report) == {"pipelined": True, "got": True, "public": True, "after": True, "count": 200}
