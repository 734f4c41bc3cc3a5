"""Event times the broker reads take from a message's own field or
header. No Spark, no Beam."""

import datetime
from typing import Tuple


def parse_event_time(value) -> Tuple[bool, float]:
    """(ok, seconds since the epoch) of a field's text: a number of seconds,
    or an ISO-8601 time (UTC unless it says otherwise)."""
    try:
        return True, float(value)
    except (TypeError, ValueError):
        pass
    try:
        parsed = datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return False, 0.0
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.timezone.utc)
    return True, parsed.timestamp()
