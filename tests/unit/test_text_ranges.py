"""worker/files.py reads text records exactly as Beam's _TextSource does, for
every way a file can be cut into byte ranges."""

import gzip
import os

import pytest
from apache_beam.coders import coders
from apache_beam.io.filesystem import CompressionTypes

from beam_spark_runner.translation.native_io_overrides import TextReadConfig
from beam_spark_runner.worker import files

# Beam's rules: records end at \n; a \r right before it belongs to the
# separator; a lone \r is data; the last record may lack a newline; empty
# lines are records.
CONTENT = "alpha\r\nbeta\n\nγάμμα δ\r\nlone\rcarriage\n\r\nlast no newline"
EXPECTED = ["alpha", "beta", "", "γάμμα δ", "lone\rcarriage", "", "last no newline"]


def _config(path, coder=None):
    return TextReadConfig(str(path), CompressionTypes.AUTO, coder or coders.StrUtf8Coder())


def _read(config, ranges):
    return list(files.read_text_ranges(config, ranges))


def test_whole_file(tmp_path):
    path = tmp_path / "f.txt"
    path.write_bytes(CONTENT.encode("utf-8"))
    assert _read(_config(path), [(str(path), 0, path.stat().st_size, "uncompressed")]) == EXPECTED


@pytest.mark.parametrize(
    "content,expected",
    [
        (CONTENT, EXPECTED),
        (CONTENT + "\n", EXPECTED),  # trailing newline: no empty last record
        ("x\ny\r\n", ["x", "y"]),
        ("\n\n", ["", ""]),
    ],
)
def test_every_cut_point_yields_each_record_once(tmp_path, content, expected):
    path = tmp_path / "f.txt"
    data = content.encode("utf-8")
    path.write_bytes(data)
    config = _config(path)
    for cut in range(len(data) + 1):
        records = _read(config, [(str(path), 0, cut, "uncompressed")]) + _read(
            config, [(str(path), cut, len(data), "uncompressed")]
        )
        assert records == expected, "cut at byte %d" % cut


def test_three_way_cuts(tmp_path):
    path = tmp_path / "f.txt"
    data = CONTENT.encode("utf-8")
    path.write_bytes(data)
    config = _config(path)
    for a in range(len(data) + 1):
        for b in range(a, len(data) + 1, 3):
            records = []
            for start, stop in ((0, a), (a, b), (b, len(data))):
                records += _read(config, [(str(path), start, stop, "uncompressed")])
            assert records == EXPECTED, (a, b)


def test_small_read_chunks_do_not_change_records(tmp_path, monkeypatch):
    path = tmp_path / "f.txt"
    path.write_bytes(CONTENT.encode("utf-8"))
    monkeypatch.setattr(files, "READ_CHUNK_BYTES", 3)
    size = path.stat().st_size
    for cut in range(size + 1):
        config = _config(path)
        assert _read(config, [(str(path), 0, cut, "uncompressed"), (str(path), cut, size, "uncompressed")]) == EXPECTED


def test_other_coders_decode_each_record(tmp_path):
    path = tmp_path / "f.txt"
    path.write_bytes(b"a\r\nbc\n")
    assert _read(_config(path, coders.BytesCoder()), [(str(path), 0, 6, "uncompressed")]) == [b"a", b"bc"]


def test_invalid_utf8_fails_like_beams_coder(tmp_path):
    path = tmp_path / "f.txt"
    path.write_bytes(b"ok\n\xff\xfe\n")
    with pytest.raises(UnicodeDecodeError):
        _read(_config(path), [(str(path), 0, 6, "uncompressed")])


def test_plan_balances_ranges_and_reads_compressed_files_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "MIN_RANGE_BYTES", 10)
    big = tmp_path / "a.txt"
    big.write_bytes(b"0123456789\n" * 10)  # 110 bytes
    small = tmp_path / "b.txt"
    small.write_bytes(b"x\n")
    (tmp_path / "empty.txt").write_bytes(b"")
    with gzip.open(tmp_path / "c.txt.gz", "wb") as f:
        f.write(b"zipped\r\nlines")
    config = TextReadConfig(os.path.join(str(tmp_path), "*"), CompressionTypes.AUTO, coders.StrUtf8Coder())
    partitions = files.plan_text_ranges(config, 2)
    assert len(partitions) == 2
    flat = [r for p in partitions for r in p]
    assert all(r[0].endswith((".txt", ".gz")) for r in flat)
    assert not any(r[0].endswith("empty.txt") for r in flat)
    gz = [r for r in flat if r[0].endswith(".gz")]
    assert gz and gz[0][1:3] == (0, files.UNBOUNDED) and gz[0][3] == CompressionTypes.GZIP
    loads = [sum(min(stop, os.path.getsize(path)) - start for path, start, stop, _ in p) for p in partitions]
    assert max(loads) - min(loads) <= 10, loads
    records = sorted(v for p in partitions for v in files.read_text_ranges(config, p))
    assert records == sorted(["0123456789"] * 10 + ["x", "zipped", "lines"])


def test_no_matching_file_reads_nothing(tmp_path):
    config = TextReadConfig(str(tmp_path / "none*"), CompressionTypes.AUTO, coders.StrUtf8Coder())
    assert files.plan_text_ranges(config, 4) == []
