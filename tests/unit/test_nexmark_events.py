"""The Nexmark benchmark's event generator (benchmarks/nexmark_events.py):
Nexmark's mix, the same events for the same seed and index whatever
order they are made in, and lines Beam's Nexmark parser reads."""

import collections
import json
import os
import sys

from apache_beam.testing.benchmarks.nexmark import nexmark_util
from apache_beam.testing.benchmarks.nexmark.models import nexmark_model

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
import nexmark_events  # noqa: E402


def _kind(event):
    return "person" if "name" in event else "auction" if "itemName" in event else "bid"


def test_every_fifty_events_hold_one_person_three_auctions_and_forty_six_bids():
    kinds = collections.Counter(_kind(nexmark_events.event(7, i)) for i in range(5000))
    assert kinds == {"person": 100, "auction": 300, "bid": 4600}


def test_an_event_depends_only_on_its_seed_and_index():
    forward = [nexmark_events.event_json(7, i) for i in range(200)]
    backward = [nexmark_events.event_json(7, i) for i in reversed(range(200))][::-1]
    assert forward == backward
    assert forward != [nexmark_events.event_json(8, i) for i in range(200)]


def test_ids_are_consecutive_and_bids_name_auctions_and_people_that_exist():
    events = [nexmark_events.event(7, i) for i in range(20000)]
    people = [e["id"] for e in events if _kind(e) == "person"]
    auctions = [e["id"] for e in events if _kind(e) == "auction"]
    assert people == list(range(1000, 1000 + len(people)))
    assert auctions == list(range(1000, 1000 + len(auctions)))
    for e in events:
        if _kind(e) == "bid":
            assert 1000 <= e["auction"] <= max(auctions) and 1000 <= e["bidder"] <= max(people) + 1
        if _kind(e) == "auction":
            assert e["expires"] > e["dateTime"] and e["reserve"] > e["initialBid"]
            assert 10 <= e["category"] < 15


def test_event_times_advance_at_the_fixed_rate():
    times = [nexmark_events.event(7, i)["dateTime"] for i in range(0, 30000, 10000)]
    assert times == [nexmark_events.BASE_TIME_MS + s * 1000 for s in range(3)]


def test_beams_nexmark_parser_reads_every_kind():
    parsed = [next(iter(nexmark_util.ParseJsonEventFn().process(nexmark_events.event_json(7, i)))) for i in range(50)]
    kinds = collections.Counter(type(p) for p in parsed)
    assert kinds == {nexmark_model.Person: 1, nexmark_model.Auction: 3, nexmark_model.Bid: 46}
    bid = parsed[-1]
    assert bid.date_time.micros == json.loads(nexmark_events.event_json(7, 49))["dateTime"] * 1000
