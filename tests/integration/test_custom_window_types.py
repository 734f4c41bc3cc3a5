"""A merging WindowFn with a window type of its own (Beam's Nexmark
`AuctionOrBidWindowFn`: an IntervalWindow subclass with its own coder) sees
its own windows wherever the runner calls it, batch and streaming, on the
runner's plain path and in Beam's SDK harness."""

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.benchmarks.nexmark import nexmark_util
from apache_beam.testing.benchmarks.nexmark.models import nexmark_model as nm
from apache_beam.testing.benchmarks.nexmark.queries import winning_bids
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms import window
from apache_beam.utils.timestamp import Timestamp

from beam_spark_runner import SparkRunner


def _ts(ms):
    return Timestamp.of(ms / 1000.0)


def _events():
    return [
        nm.Auction(1000, "item", "desc", 100, 500, _ts(1000), _ts(20000), 1000, 10, ""),
        nm.Bid(1000, 1001, 600, _ts(2000), ""),
        nm.Bid(1000, 1002, 900, _ts(3000), ""),
    ]


@pytest.mark.parametrize("streaming", [False, True], ids=["batch", "streaming"])
@pytest.mark.parametrize("harness", [False, True], ids=["plain", "sdk_harness"])
def test_winning_bids_over_its_own_window_type(streaming, harness):
    nexmark_util.setup_coder()
    args = (["--streaming"] if streaming else []) + (["--sdk_harness_only"] if harness else [])
    with beam.Pipeline(runner=SparkRunner(), options=PipelineOptions(args)) as p:
        if streaming:
            stream = TestStream()
            for event in _events():
                stream = stream.add_elements([window.TimestampedValue(event, event.date_time)])
            events = p | stream.advance_watermark_to_infinity()
        else:
            events = p | beam.Create(_events()) | beam.Map(lambda e: window.TimestampedValue(e, e.date_time))
        winners = events | winning_bids.WinningBids() | beam.Map(lambda ab: (ab.auction.id, ab.bid.price))
        assert_that(winners, equal_to([(1000, 900)]))
