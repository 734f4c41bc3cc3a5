"""The last line every benchmark prints: `<name> ratio=<x> target<=<y> PASS|MISS`
(or `target>=`), judged on a ratio measured against a baseline in the same
run. A run whose results failed their own checks prints MISS whatever the
ratio."""


def headline(name, ratio, target, at_most=True, results_ok=True):
    """Prints the headline; returns whether the target was met."""
    if ratio is None:
        met = False
        shown = "n/a"
    else:
        met = results_ok and (ratio <= target if at_most else ratio >= target)
        shown = "%.3f" % ratio
    print(
        "%s ratio=%s target%s%.2f %s" % (name, shown, "<=" if at_most else ">=", target, "PASS" if met else "MISS"),
        flush=True,
    )
    return met
