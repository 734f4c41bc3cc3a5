"""The streaming query's row layout (streaming/rows.py): KEYED rows carry
many elements of one keyed destination, key-group and seq, and give them
back in order; typed destinations in the rows' dest column."""

import pytest

from beam_spark_runner.streaming import rows as R


def _entries(n, size=3):
    return [(b"k%d" % (i % 7), bytes([i % 251]) * size) for i in range(n)]


def _flat(entries):
    return [part for entry in entries for part in entry]


def test_keyed_rows_give_back_their_elements_with_keys_in_order():
    entries = _entries(1000)
    (row,) = R.keyed("group:g", 5, 3, _flat(entries))
    assert (row.kind, row.dest, row.kg, row.key, row.seq) == (R.KEYED, "group:g", 5, None, 3)
    assert R.keyed_entries(row.payload) == entries
    unpacked = R.unpacked([row])
    assert unpacked == [R.QueryRow(R.DATA, "group:g", 5, k, e, 3, None) for k, e in entries]
    assert R.element_count([row]) == 1000


def test_keyed_rows_are_cut_at_the_byte_limit_and_keep_the_order(monkeypatch):
    monkeypatch.setattr(R, "KEYED_ROW_BYTES", 100)
    entries = _entries(50, size=20) + [(b"big", b"x" * 500)] + _entries(3)
    rows = R.keyed("d", 0, 0, _flat(entries))
    assert len(rows) > 10
    for row in rows:
        held = R.keyed_entries(row.payload)
        assert len(held) == 1 or sum(len(k) + len(e) for k, e in held) <= 100
    assert [e for r in rows for e in R.keyed_entries(r.payload)] == entries
    assert R.element_count(rows) == len(entries)


def test_empty_keys_and_elements_survive():
    entries = [(b"", b""), (b"k", b""), (b"", b"v")]
    (row,) = R.keyed("d", 1, 0, _flat(entries))
    assert R.keyed_entries(row.payload) == entries


def test_unpacked_keeps_other_rows_and_types_spark_tuples():
    block = R.data("stage", b"block", 2)
    control = tuple(R.control("op", 0, 7, [[0, 1, 2]]))  # as a plain tuple, the way Spark hands rows
    keyed = R.keyed("d", 0, 2, [b"a", b"1", b"b", b"2"])
    out = R.unpacked([block, control] + keyed)
    assert out[0] is block
    assert out[1] == control and type(out[1]) is R.QueryRow and out[1].batch == 7
    assert [(r.key, r.payload) for r in out[2:]] == [(b"a", b"1"), (b"b", b"2")]
    assert R.element_count(out) == 3  # the block counts once, as before


def test_keyed_rows_stay_with_their_key_group_at_the_source():
    rows = R.keyed("d", 3, 0, [b"a", b"1"]) + [R.data("s", b"x", 0)] + R.keyed("d", 2, 1, [b"b", b"2"])
    parts = R.input_partitions(rows, 2)
    assert rows[0] in parts[1] and rows[2] in parts[0]


def test_reports_round_trip():
    row = R.report("op", 1, 4, 10, None, 99)
    assert R.parse_report(row.payload) == R.Report(hold=10, event_hold=None, wake=99)


def test_no_entries_no_rows():
    assert R.keyed("d", 0, 0, []) == []


def test_destinations_are_written_as_the_rows_dest_column_holds_them_and_read_back():
    from beam_spark_runner.plans import BufferKind, BufferRef, Dest, DestKind

    group = BufferRef(BufferKind.GROUP, "G")
    pcoll = BufferRef(BufferKind.MATERIALIZE, "pc")
    cases = {
        Dest.written_to(group): "gbk:G",  # a GroupByKey's input
        Dest.read_from(group): "group:G",  # its output, as its readers read it
        Dest.written_to(pcoll): "materialize:pc",
        Dest.impulse("stage_1"): "impulse:stage_1",
    }
    for dest, text in cases.items():
        assert R.dest_text(dest) == text and R.parse_dest(text) == dest
    assert Dest.read_from(pcoll) == Dest(DestKind.MATERIALIZED, "pc")
    assert sorted(cases) == sorted(cases, key=lambda d: (d.kind.value, d.name))
    with pytest.raises(ValueError):
        R.parse_dest("status")
