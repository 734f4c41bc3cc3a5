"""io/database/sink_protocol.db_rows: what the database sink hands the
client for each value, in the table's column order, whatever the row's
own field order, with its polarity."""

import typing

import triggers
from beam_spark_runner.io.database.sink_protocol import DatabaseWriteConfig, db_rows
from beam_spark_runner.worker import spark_rows


class Total(typing.NamedTuple):
    user: str
    start: int
    total: int


class Reordered(typing.NamedTuple):
    total: int
    user: str
    start: int


def _config(url="postgresql://u@h/db"):
    return DatabaseWriteConfig(url, "t", (), spark_rows.spark_schema_of(Total), "sink")


def test_rows_of_the_tables_own_type_go_as_they_are_retractions_flagged():
    a, b = Total("a", 0, 1), Total("b", 10, 2)
    pairs = list(db_rows(_config(), [a, triggers.Retraction(b), a]))
    assert pairs == [(False, ("a", 0, 1)), (True, ("b", 10, 2)), (False, ("a", 0, 1))]
    assert pairs[0][1] is a  # no copy of a row already in column order


def test_rows_whose_fields_are_in_another_order_are_put_in_column_order():
    pairs = list(db_rows(_config(), [Reordered(1, "a", 0), triggers.Retraction(Reordered(2, "b", 10))]))
    assert pairs == [(False, ("a", 0, 1)), (True, ("b", 10, 2))]
    assert all(type(row) is tuple for _, row in pairs)


def test_a_mix_of_row_types_in_one_epoch_keeps_each_in_column_order():
    values = [Total("a", 0, 1), Reordered(2, "b", 10), Total("c", 20, 3)]
    assert [row for _, row in db_rows(_config("mysql://root@h/db"), values)] == [
        ("a", 0, 1),
        ("b", 10, 2),
        ("c", 20, 3),
    ]
