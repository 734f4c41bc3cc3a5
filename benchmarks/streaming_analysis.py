"""The numbers of one Beam run of benchmarks/streaming.py (analyze_beam):
its busy and whole-run rates and whether it was saturated, its micro-batch
durations, the event-to-output latency of its sampled events, the delay of
its on-time panes and, per pair of consecutive GroupByKeys, the watermark
lag in micro-batches (_stage_lags); and one throughput round's ratio of
Beam to native (_round)."""

from stats import percentile
from streaming_config import WINDOW_S, _warmup_of
from streaming_report import _fmt


def analyze_beam(label, offered, seconds, submitted, ended, cpu, counters, ticks, batches, lines, groups, verbose):
    events = counters.get("events", 0)
    tick = ticks[0] if ticks else None
    gen_start = tick.min / 1000.0 if tick and tick.count else None
    gen_end = tick.max / 1000.0 if tick and tick.count else None
    warm_until = (gen_start or submitted) + _warmup_of(seconds)

    # Per-batch wall durations (between consecutive batch-end logs) and events.
    rows = []
    prev_t, prev_events = submitted, 0
    for b in batches:
        ev = b["events"] if b["events"] is not None else prev_events
        rows.append(
            {
                "batch": b["batch"],
                "start": prev_t,
                "end": b["t"],
                "dur": b["t"] - prev_t,
                "events": ev - prev_events,
                "tick_max_s": b["tick_max_s"],
                "times": b["times"],
            }
        )
        prev_t, prev_events = b["t"], ev
    event_rows = [r for r in rows if r["batch"] and r["batch"] > 1 and r["events"] > 0 and r["end"] >= warm_until]
    busy = sum(r["dur"] for r in event_rows)
    steady_events = sum(r["events"] for r in event_rows)
    durations = [
        r["dur"]
        for r in rows
        if r["batch"] and r["batch"] > 1 and r["end"] >= warm_until and (gen_end is None or r["start"] <= gen_end)
    ]
    # A PeriodicImpulse catches up every tick that came due before it runs, so a
    # pipeline that keeps up processes (offered rate x batch duration) events
    # per batch: its busy rate is the offered rate. A busy rate clearly below
    # the offered rate means batches grow: the pipeline is saturated.
    busy_rate = steady_events / busy if busy else None
    batch_events_p50 = percentile([r["events"] for r in event_rows], 50)
    saturated = busy_rate is not None and busy_rate < 0.9 * offered
    batch_p50 = percentile(durations, 50)

    # Latency of sampled events: first output - generation time.
    first_out, gen_of = {}, {}
    on_time = []
    last_count = {}
    for parts in lines:
        if parts[0] == "P":
            s, gen, out = int(parts[1]), float(parts[2]), float(parts[3])
            gen_of[s] = gen
            if s not in first_out or out < first_out[s]:
                first_out[s] = out
        elif parts[0] == "W":
            on_time.append((int(parts[1]) / 1e6, float(parts[2])))
        elif parts[0] == "C":
            k = (int(parts[1]), int(parts[2]))
            index, count = int(parts[3]), int(parts[4])
            if k not in last_count or index > last_count[k][0]:
                last_count[k] = (index, count)
    lat = [first_out[s] - gen_of[s] for s in first_out if gen_of[s] >= warm_until]
    on_time_delay = [out - end for end, out in on_time if end >= warm_until]
    counted = sum(c for _, c in last_count.values()) if last_count else None

    # Watermark lag between consecutive GroupByKeys, in micro-batches.
    stage_lags = _stage_lags(rows, groups, warm_until, gen_end)

    out = {
        "label": label,
        "offered_per_s": offered,
        "events": events,
        "groups": len(groups),
        "wall_s": ended - submitted,
        "gen_s": (gen_end - gen_start) if gen_start is not None else None,
        "events_per_s_busy": busy_rate,
        "batch_events_p50": batch_events_p50,
        "events_per_s_run": events / (ended - submitted) if ended > submitted else None,
        "batches": len(rows),
        "first_batch_s": rows[0]["dur"] if rows else None,
        "batch_p50_s": batch_p50,
        "batch_p99_s": percentile(durations, 99),
        "saturated": saturated,
        "tail_s": ended - gen_end if gen_end else None,
        "probes": len(lat),
        "probes_total": len(gen_of),
        "e2o_p50_s": percentile(lat, 50),
        "e2o_p99_s": percentile(lat, 99),
        "on_time_p50_s": percentile(on_time_delay, 50),
        "on_time_p99_s": percentile(on_time_delay, 99),
        "panes": {k[len("panes_") :]: v for k, v in counters.items() if k.startswith("panes_")},
        "counted_events": counted,
        "stage_lags": stage_lags,
        "cpu": cpu,
    }
    if verbose:
        print("  per batch (%s): batch, wall s, events, events/s, newest tick processed s before batch end" % label)
        for r in rows:
            print(
                "    %3s %6.2f %8d %9.0f %7s"
                % (
                    r["batch"],
                    r["dur"],
                    r["events"],
                    r["events"] / r["dur"] if r["dur"] else 0,
                    _fmt(r["end"] - r["tick_max_s"] if r["tick_max_s"] else None),
                )
            )
    return out


def _round(beam, native):
    """One throughput round: (Beam events/s, native rows/s, native rows per batch, ratio)."""
    b, n = beam["events_per_s_busy"], native["rows_per_s"]
    return (b, n, native["rows_per_batch"], b / n if b and n else None)


def _stage_lags(rows, groups, warm_until, gen_end):
    """For each window end W reached during the steady part of the run, the
    first batch in which each GroupByKey's input watermark is >= W; returns
    per pair of consecutive GroupByKeys the list of batch differences."""
    timed = [(r["batch"], r["times"]) for r in rows if r["times"]]
    if len(groups) < 2 or not timed:
        return []
    first_w = (int(warm_until) // WINDOW_S + 1) * WINDOW_S
    last_w = int(gen_end or 0) // WINDOW_S * WINDOW_S
    lags = [[] for _ in groups[1:]]
    for w in range(first_w, last_w + 1, WINDOW_S):
        micros = w * 1_000_000
        reached = []
        for g in groups:
            batch = next((b for b, t in timed if t["input_watermarks"].get(g, -(2**63)) >= micros), None)
            reached.append(batch)
        if None in reached:
            continue
        for i in range(len(groups) - 1):
            lags[i].append(reached[i + 1] - reached[i])
    return lags
