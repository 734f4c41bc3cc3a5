"""Percentiles for the benchmark scripts."""


def percentile(values, q):
    """Linear-interpolated percentile (q in [0, 100]) of a list; None if empty."""
    if not values:
        return None
    s = sorted(values)
    pos = (len(s) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def weighted_percentiles(pairs, qs):
    """{q: value} for (value, weight) pairs: the smallest value whose
    cumulative weight reaches q percent of the total; None if no weight."""
    pairs = sorted(pairs)
    total = sum(w for _, w in pairs)
    out = {q: None for q in qs}
    if not total:
        return out
    cum = 0.0
    targets = sorted(qs)
    ti = 0
    for value, weight in pairs:
        cum += weight
        while ti < len(targets) and cum >= total * targets[ti] / 100.0:
            out[targets[ti]] = value
            ti += 1
    for q in targets[ti:]:
        out[q] = pairs[-1][0]
    return out
