"""Key-group state blobs are stored compressed and restore exactly."""

import pickle

from beam_spark_runner.streaming import state_blobs


def _group_by_key_like_blob(keys=5000):
    snapshot = (
        (
            (1_700_000_050_000_000, 1_700_000_060_000_000),
            [b"\x06\x02\x01\x01\x06\x00"],
            None,
            1,
            1,
            False,
            {"early/count:n": 1, "late:late": True},
            None,
            [],
        ),
    )
    return pickle.dumps(
        {
            "wm": 1,
            "pt": 2,
            "keys": {b"k%d" % i: pickle.dumps(snapshot) for i in range(keys)},
            "wake": {b"k%d" % i: (i, 2**63 - 1, None) for i in range(keys)},
        }
    )


def test_a_large_repetitive_blob_round_trips_much_smaller():
    blob = _group_by_key_like_blob()
    stored = state_blobs.pack(blob)
    assert state_blobs.unpack(stored) == blob
    assert len(stored) * 10 < len(blob)


def test_small_and_empty_blobs_round_trip():
    for blob in (b"", pickle.dumps({"pt": 0})):
        assert state_blobs.unpack(state_blobs.pack(blob)) == blob


def test_a_blob_stored_before_compression_restores_as_is():
    legacy = pickle.dumps({"wm": 5, "keys": {}})
    assert state_blobs.unpack(legacy) == legacy
