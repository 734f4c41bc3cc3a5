"""Nexmark's auction events, generated the way Nexmark's generator does:
one person, three auctions and forty-six bids in every fifty events, hot
auctions, sellers and bidders, prices spread over six decades, auctions
that expire a little while after they open, event times at a fixed rate.

Every event is a pure function of (seed, event index), so a batch run can
write them to a file and a streaming source can make the same events from
their indices, and two runs (or two runners) see exactly the same input.
Events are JSON lines in the form Beam's Python Nexmark parses
(`nexmark_util.ParseJsonEventFn`).

Constants follow Nexmark's generator configuration (first ids 1000, five
categories from 10, 100 auctions in flight, hot ratios 2 for auctions and
4 for sellers and bidders, 10,000 events/s of event time); the generator
is a re-statement of that model, not Nexmark's Java code, so the events
are Nexmark-shaped rather than identical to Java's for the same seed.
"""

import json
import random

PERSON_PROPORTION = 1
AUCTION_PROPORTION = 3
BID_PROPORTION = 46
PROPORTION_DENOMINATOR = PERSON_PROPORTION + AUCTION_PROPORTION + BID_PROPORTION

FIRST_PERSON_ID = 1000
FIRST_AUCTION_ID = 1000
FIRST_CATEGORY_ID = 10
NUM_CATEGORIES = 5
NUM_IN_FLIGHT_AUCTIONS = 100
NUM_ACTIVE_PEOPLE = 1000
HOT_AUCTION_RATIO = 2
HOT_SELLER_RATIO = 4
HOT_BIDDER_RATIO = 4
# Nexmark's hot ids are multiples of this.
HOT_ID_STRIDE = 100

EVENTS_PER_SECOND = 10_000
# 2015-07-15T00:00:00Z, Nexmark's default base time.
BASE_TIME_MS = 1_436_918_400_000

_US_STATES = ("AZ", "CA", "ID", "OR", "WA", "WY")
_US_CITIES = (
    "Phoenix",
    "Los Angeles",
    "San Francisco",
    "Boise",
    "Portland",
    "Bend",
    "Redmond",
    "Seattle",
    "Kent",
    "Cheyenne",
)
_FIRST_NAMES = ("Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter")
_LAST_NAMES = ("Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris")
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def event_time_ms(index, events_per_second=EVENTS_PER_SECOND):
    """Event time of event `index`: a fixed rate from Nexmark's base time."""
    return BASE_TIME_MS + (index * 1000) // events_per_second


def _last_base0_person_id(index):
    epoch, offset = divmod(index, PROPORTION_DENOMINATOR)
    return epoch * PERSON_PROPORTION + min(offset, PERSON_PROPORTION - 1)


def _last_base0_auction_id(index):
    epoch, offset = divmod(index, PROPORTION_DENOMINATOR)
    if offset < PERSON_PROPORTION:
        # A person: the last auction was in the previous epoch.
        epoch -= 1
        offset = AUCTION_PROPORTION - 1
    elif offset >= PERSON_PROPORTION + AUCTION_PROPORTION:
        # A bid: the last auction was this epoch's last.
        offset = AUCTION_PROPORTION - 1
    else:
        offset -= PERSON_PROPORTION
    return max(epoch * AUCTION_PROPORTION + offset, 0)


def _string(rng, length):
    return "".join(rng.choice(_LETTERS) for _ in range(length))


def _extra(rng, length):
    return _string(rng, rng.randrange(max(1, length // 2), length + 1))


def _price(rng):
    return int(10 ** (rng.random() * 6) * 100)


def _recent_person(rng, index):
    last = _last_base0_person_id(index)
    active = min(last + 1, NUM_ACTIVE_PEOPLE)
    return FIRST_PERSON_ID + last - rng.randrange(active)


def _person(rng, index, time_ms):
    person_id = _last_base0_person_id(index) + FIRST_PERSON_ID
    return {
        "id": person_id,
        "name": "%s %s" % (rng.choice(_FIRST_NAMES), rng.choice(_LAST_NAMES)),
        "emailAddress": "%s@%s.com" % (_string(rng, 7), _string(rng, 5)),
        "creditCard": " ".join("%04d" % rng.randrange(10000) for _ in range(4)),
        "city": rng.choice(_US_CITIES),
        "state": rng.choice(_US_STATES),
        "dateTime": time_ms,
        "extra": _extra(rng, 20),
    }


def _auction(rng, index, time_ms, events_per_second):
    auction_id = _last_base0_auction_id(index) + FIRST_AUCTION_ID
    if rng.randrange(HOT_SELLER_RATIO) > 0:
        seller = (_last_base0_person_id(index) // HOT_ID_STRIDE) * HOT_ID_STRIDE + FIRST_PERSON_ID
    else:
        seller = _recent_person(rng, index)
    initial_bid = _price(rng)
    # About NUM_IN_FLIGHT_AUCTIONS auctions open at once: an auction lasts
    # as long as that many auctions take to open, on average.
    mean_length_ms = NUM_IN_FLIGHT_AUCTIONS * PROPORTION_DENOMINATOR * 1000 // (AUCTION_PROPORTION * events_per_second)
    return {
        "id": auction_id,
        "itemName": _string(rng, 10),
        "description": _string(rng, 20),
        "initialBid": initial_bid,
        "reserve": initial_bid + _price(rng),
        "dateTime": time_ms,
        "expires": time_ms + 1 + rng.randrange(2 * max(mean_length_ms, 1)),
        "seller": seller,
        "category": FIRST_CATEGORY_ID + rng.randrange(NUM_CATEGORIES),
        "extra": _extra(rng, 20),
    }


def _bid(rng, index, time_ms):
    last_auction = _last_base0_auction_id(index)
    if rng.randrange(HOT_AUCTION_RATIO) > 0:
        auction = (last_auction // HOT_ID_STRIDE) * HOT_ID_STRIDE
    else:
        auction = last_auction - rng.randrange(min(last_auction + 1, NUM_IN_FLIGHT_AUCTIONS))
    if rng.randrange(HOT_BIDDER_RATIO) > 0:
        bidder = (_last_base0_person_id(index) // HOT_ID_STRIDE) * HOT_ID_STRIDE + FIRST_PERSON_ID + 1
    else:
        bidder = _recent_person(rng, index)
    return {
        "auction": auction + FIRST_AUCTION_ID,
        "bidder": bidder,
        "price": _price(rng),
        "dateTime": time_ms,
        "extra": _extra(rng, 20),
    }


def event(seed, index, events_per_second=EVENTS_PER_SECOND):
    """Event `index` (from 0) of the stream `seed`, as a dict of Nexmark's
    JSON fields: a person, an auction or a bid by the index's place in its
    group of fifty."""
    rng = random.Random(seed * 1_000_003 + index)
    time_ms = event_time_ms(index, events_per_second)
    offset = index % PROPORTION_DENOMINATOR
    if offset < PERSON_PROPORTION:
        return _person(rng, index, time_ms)
    if offset < PERSON_PROPORTION + AUCTION_PROPORTION:
        return _auction(rng, index, time_ms, events_per_second)
    return _bid(rng, index, time_ms)


def event_json(seed, index, events_per_second=EVENTS_PER_SECOND):
    """Event `index` as the JSON line `ParseJsonEventFn` reads."""
    return json.dumps(event(seed, index, events_per_second), separators=(",", ":"))


def write_events(path, seed, count, events_per_second=EVENTS_PER_SECOND):
    """Writes events 0 .. count-1 to `path`, one JSON line each."""
    with open(path, "w") as f:
        for index in range(count):
            f.write(event_json(seed, index, events_per_second))
            f.write("\n")
