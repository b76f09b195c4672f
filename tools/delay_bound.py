#!/usr/bin/env python3
"""How fast could a detector with WarpGuard's rules stop for these collisions, if it knew the signal
the robot would have read without them? A noise-limited reference for the delay.

    delay_bound.py COLLISIONS.csv TWIN.csv EVALUATION.json [--target-cycles 1000] [--window 30]

COLLISIONS.csv is a simulated collision run (warpguard-sim record ... --contacts N), TWIN.csv the
same run recorded again without the contacts (the same command and seed, no --contacts): the cell
draws its reading noise, timing jitter and cycle rates from the seed alone, so until the first
contact the two files are identical sample for sample, and at every later sample they differ by
what the contacts did.

The bound is WarpGuard's own pair of rules in an ideal detector that knows the twin: the value
this very sample would have read without the contact. The twin carries the same noise draws as the
collision run, so reading - twin is the contact's effect alone; the ideal detector sees it through
one reading's noise: |reading - twin + e| / sd per joint, e an independent Gaussian draw of sd per
sample and joint (fixed seed; another draw moves a run's median delay by a millisecond or two), sd
the robust spread of the twin's second differences, as the detector estimates its noise level from
its reference (detector.cpp). It stops when that ratio stays over a level for two samples in a row
(the default persistence) or when its CUSUM over 1.5 (half of WarpGuard's floor of 3 sd, as its
CUSUM reference of 0.5) passes a limit. Level and limit are fitted like WarpGuard's margin and CUSUM
limit, each for half the false-stop budget (one stop per 2 x TARGET cycles), but on the noise
itself: per-cycle maxima of 20,000 simulated cycles of independent Gaussian noise, N samples per
cycle (as measured) and J joints, fixed seed; each at its quantile for that budget.

No detector can know the twin: it has the reference, recorded in other cycles, and must find the
matching sample. So WarpGuard can at best come close to this bound, and can beat it on a single
contact only where its own threshold is lower (phases where its calibration allows less than the
full noise, e.g. where the deviation from a range of matched reference values absorbs noise). The
contacts are found and judged as `warpguard evaluate` does (from the onset to the contact's end
plus the window), and each is compared with WarpGuard's result in EVALUATION.json.
Prints one JSON object: per contact kind (impacts <= 60 ms, pushes) and for all, contacts
detected and delay medians, for the bound and for WarpGuard."""
import argparse
import json
import math
import statistics
import sys

import numpy as np


def read_csv(path):
    """Header names and rows (floats) of a recording, comment lines skipped."""
    with open(path) as f:
        lines = [line for line in f if not line.startswith("#")]
    if not lines:
        raise SystemExit(f"delay_bound: {path} has no header line (expected a warpguard-sim recording)")
    header = lines[0].strip().split(",")
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        fields = line.strip().split(",")
        if len(fields) != len(header):
            raise SystemExit(f"delay_bound: {path} data line {number} has {len(fields)} fields; the header has {len(header)}")
        rows.append([float(x) for x in fields])
    return header, rows


def column(header, name, path):
    if name not in header:
        raise SystemExit(f"delay_bound: {path} has no column '{name}' (expected a warpguard-sim recording with ground truth)")
    return header.index(name)


def noise_sd(values):
    """Robust sd of white noise from second differences: MAD * 1.4826 / sqrt(6)."""
    d2 = [abs(values[k + 1] - 2 * values[k] + values[k - 1]) for k in range(1, len(values) - 1)]
    return 1.4826 * statistics.median(d2) / math.sqrt(6.0)


CUSUM_REFERENCE = 1.5  # in noise sd: 0.5 of the default detector's floor of 3 sd


def fit_levels(samples_per_cycle, joints, cycles_per_stop, simulated=20000, seed=20261126):
    """Persistence level and CUSUM limit (noise sd units) that Gaussian noise alone passes once
    per `cycles_per_stop` cycles each, from per-cycle maxima of simulated cycles."""
    rng = np.random.default_rng(seed)
    series = simulated * joints
    prev = np.zeros(series)
    held = np.zeros(series)  # per series: largest min(|x_t|, |x_t-1|)
    cusum = np.zeros(series)
    top = np.zeros(series)
    for step in range(int(round(samples_per_cycle))):
        x = np.abs(rng.standard_normal(series))
        if step > 0:
            np.maximum(held, np.minimum(x, prev), out=held)
        prev = x
        cusum = np.maximum(0.0, cusum + x - CUSUM_REFERENCE)
        np.maximum(top, cusum, out=top)
    held = held.reshape(simulated, joints).max(axis=1)
    top = top.reshape(simulated, joints).max(axis=1)
    q = 1.0 - 1.0 / cycles_per_stop
    return float(np.quantile(held, q)), float(np.quantile(top, q))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("collisions")
    ap.add_argument("twin")
    ap.add_argument("evaluation")
    ap.add_argument("--target-cycles", type=float, default=1000.0)
    ap.add_argument("--window", type=int, default=30, help="samples after a contact's end still counted as its detection")
    a = ap.parse_args()
    if not a.target_cycles > 1:
        raise SystemExit(f"delay_bound: --target-cycles must be > 1, got {a.target_cycles}")

    hc, c = read_csv(a.collisions)
    ht, tw = read_csv(a.twin)
    joints = [name for name in hc if name.startswith("tau")]
    if [name for name in ht if name.startswith("tau")] != joints:
        raise SystemExit(f"delay_bound: {a.twin} has other joints than {a.collisions}")
    n = min(len(c), len(tw))
    t_col = column(hc, "t", a.collisions)
    seq_c, seq_t = column(hc, "seq", a.collisions), column(ht, "seq", a.twin)
    cycle_c = column(hc, "cycle", a.collisions)
    contact, force = column(hc, "contact", a.collisions), column(hc, "contact_force", a.collisions)
    # The contact's own onset, before its first sample by its age (recordings since 2026-11-27), as
    # `warpguard evaluate` takes it.
    age = hc.index("contact_age") if "contact_age" in hc else None
    tau_c = [column(hc, name, a.collisions) for name in joints]
    tau_t = [column(ht, name, a.twin) for name in joints]
    first = next((i for i in range(n) if c[i][contact] > 0), n)
    for i in range(n):
        if c[i][seq_c] != tw[i][seq_t] or (i < first and any(c[i][x] != tw[i][y] for x, y in zip(tau_c, tau_t))):
            raise SystemExit(f"delay_bound: {a.twin} is not the twin of {a.collisions}: they differ at sample {i}, "
                             f"in {'sequence number' if c[i][seq_c] != tw[i][seq_t] else 'a joint signal'} (the first contact is at sample "
                             f"{first}); record it with the same command and seed, without --contacts")

    sd = [noise_sd([row[y] for row in tw[:n]]) for y in tau_t]
    cycles = len({row[cycle_c] for row in c[:n]})
    per_cycle = n / max(cycles, 1)
    level, limit = fit_levels(per_cycle, len(joints), 2.0 * a.target_cycles)
    # The twin's reading carries the same noise draws as the collision run's, so their difference is
    # the contacts' effect alone; the ideal detector reads it through one reading's noise (an
    # independent Gaussian draw per sample and joint, fixed seed).
    noise = np.random.default_rng(7).standard_normal((n, len(joints)))
    ratio = [[abs(c[i][x] - tw[i][y] + e * s) / s for x, y, s, e in zip(tau_c, tau_t, sd, noise[i])] for i in range(n)]

    with open(a.evaluation) as f:
        evaluation = json.load(f)
    ours = {}
    for run in evaluation.get("runs", []):
        for d in run.get("summary", {}).get("collision_details", []):
            ours[d["onset_index"]] = d

    contacts = []
    i = 0
    while i < n:
        if c[i][contact] > 0 and (i == 0 or c[i - 1][contact] == 0):
            k = i
            while k < n and c[k][contact] > 0:
                k += 1
            until = min(n, k + a.window)
            bound = None
            # The CUSUM runs from 200 samples before the onset (the noise's own accumulation); a
            # stop before the onset is the noise's, and restarts it.
            cusum = [0.0] * len(joints)
            for s in range(max(0, i - 200), until):
                cusum = [max(0.0, u + r - CUSUM_REFERENCE) for u, r in zip(cusum, ratio[s])]
                held = s > i and any(min(r, q) > level for r, q in zip(ratio[s], ratio[s - 1]))
                if s < i:
                    if max(cusum) > limit:
                        cusum = [0.0] * len(joints)
                    continue
                if held or max(cusum) > limit:
                    bound = c[s][t_col] - c[i][t_col] + (c[i][age] if age is not None else 0.0)
                    break
            kind = "impact" if c[k - 1][t_col] - c[i][t_col] <= 0.060 else "push"
            mine = ours.get(i)
            if mine is None:
                raise SystemExit(f"delay_bound: {a.evaluation} has no contact with onset at sample {i}; "
                                 f"evaluate {a.collisions} with `warpguard evaluate` first")
            contacts.append({"kind": kind, "peak": max(row[force] for row in c[i:k]), "bound": bound,
                             "warpguard": mine["delay"] if mine["detected"] else None})
            i = k
        else:
            i += 1

    def summary(selected):
        ge50 = [x for x in selected if x["peak"] >= 50]
        out = {"contacts": len(selected), "contacts_ge50": len(ge50)}
        for who in ("bound", "warpguard"):
            delays = [x[who] for x in selected if x[who] is not None]
            out[who] = {"detected": len(delays), "median_ms": 1000 * statistics.median(delays) if delays else None,
                        "detected_ge50": sum(1 for x in ge50 if x[who] is not None)}
        return out

    result = {"level": level, "cusum_reference": CUSUM_REFERENCE, "cusum_limit": limit, "noise_sd": sd,
              "samples_per_cycle": per_cycle, "target_cycles": a.target_cycles,
              "impacts": summary([x for x in contacts if x["kind"] == "impact"]),
              "pushes": summary([x for x in contacts if x["kind"] == "push"]),
              "all": summary(contacts),
              "delays": [[x["bound"], x["warpguard"]] for x in contacts]}
    json.dump(result, sys.stdout)
    print()


if __name__ == "__main__":
    main()
