"""worker/gc_tuning.py: thresholds raised inside blocks and restored when the
last one closes, also when blocks close out of order (chained generators)."""

import gc

from beam_spark_runner.worker import gc_tuning


def test_thresholds_restored_after_overlapping_blocks():
    before = gc.get_threshold()
    first, second = gc_tuning.bulk_data_gc(), gc_tuning.bulk_data_gc()
    first.__enter__()
    second.__enter__()
    assert gc.get_threshold()[0] >= gc_tuning.YOUNG_THRESHOLD
    first.__exit__(None, None, None)  # the upstream generator ends first
    assert gc.get_threshold()[0] >= gc_tuning.YOUNG_THRESHOLD
    second.__exit__(None, None, None)
    assert gc.get_threshold() == before
