#!/usr/bin/env python3
"""Detection delays by kind of contact, and how far the contact force had risen at the STOP.

    collision_delays.py EVALUATION.json [EVALUATION2.json ...]

Reads the collision details `warpguard evaluate` writes for recordings with ground truth. Contacts
of at most 60 ms are impacts, longer ones pushes (the simulated cell's pushes ramp up over
0.2-1 s from zero force, so their delay from the onset is mostly the time the force takes to rise;
the force at the detecting sample says how large it had become). Prints one line per kind and one
for all: collisions, detected, >= 50 N detected, delay median / p95 and the force at detection
median / p90 (percentiles interpolated as `warpguard evaluate` does)."""
import json
import math
import sys


def percentile(values, q):
    """Linear interpolation between order statistics, as `warpguard evaluate` does (docs/evaluation.md);
    None for no values."""
    values = sorted(values)
    if not values:
        return None
    pos = q * (len(values) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (pos - lo) * (values[hi] - values[lo])


def details(path):
    """Collision details of every run in an evaluation, each marked `impact` (a contact of at most
    60 ms) or not (a push). The sample period comes from the run's first and last onsets (a
    recording's clock need not start at 0)."""
    out = []
    with open(path) as f:
        runs = json.load(f)["runs"]
    for run in runs:
        cs = run.get("summary", {}).get("collision_details", [])
        if not cs:
            continue
        first, last = min(cs, key=lambda c: c["onset_index"]), max(cs, key=lambda c: c["onset_index"])
        period = (last["onset_t"] - first["onset_t"]) / max(last["onset_index"] - first["onset_index"], 1)
        out += [dict(c, impact=c["samples"] * period <= 0.06) for c in cs]
    return out


def line(label, group):
    found = [c for c in group if c["detected"]]
    big = [c for c in group if c["peak_force"] >= 50]
    delays = [1000 * c["delay"] for c in found]
    forces = [c["force_at_detection"] for c in found if "force_at_detection" in c]

    def fmt(v, unit):
        return "-" if v is None else f"{v:.0f} {unit}" if unit == "ms" else f"{v:.1f} {unit}"

    text = (f"{label}: {len(found)}/{len(group)} detected, >= 50 N {sum(c['detected'] for c in big)}/{len(big)}; "
            f"delay median {fmt(percentile(delays, 0.5), 'ms')} / p95 {fmt(percentile(delays, 0.95), 'ms')}")
    if forces:
        text += f"; contact force at detection median {fmt(percentile(forces, 0.5), 'N')} / p90 {fmt(percentile(forces, 0.9), 'N')}"
    return text


def main(paths):
    every = [c for p in paths for c in details(p)]
    if not every:
        sys.exit("no collisions with ground truth in " + ", ".join(paths))
    print(line("impacts", [c for c in every if c["impact"]]))
    print(line("pushes", [c for c in every if not c["impact"]]))
    print(line("all", every))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
