#!/usr/bin/env python3
"""Writes docs/benchmarks.md from the files scripts/benchmark-suite.sh produced.

usage: benchmark_report.py SUITE_DIR OUT_MARKDOWN PLOT_DIR
Every number in the report is read from the evaluation JSON files that `warpguard evaluate` wrote.
"""
import json
import math
import os
import statistics
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROBOTS = ["ur5e-like", "irb120-like", "vp6242-like"]
VARIANTS = [("nominal", "collisions", "nominal (payload 1x, 100 %)"),
            ("override70-nominal", "override70-collisions", "speed override 70 %"),
            ("drift30-nominal", "drift30-collisions", "friction drift +30 %"),
            ("payload2x-nominal", "payload2x-collisions", "payload 2x"),
            ("turns-nominal", "turns-collisions", "speed override turned every 12 s (70–100 %)"),
            ("assembly-nominal", "assembly-collisions", "contact task: snap-fit + screwing (own profile)"),
            ("assembly-override70-nominal", "assembly-override70-collisions", "contact task at 70 % override (own profile)")]
COMMAND = "bash scripts/benchmark-suite.sh"


def load(path):
    with open(path) as f:
        return json.load(f)


def pct(a, b):
    return "-" if b == 0 else f"{100.0 * a / b:.1f} %"


def ms(v):
    return "-" if v is None else f"{1000.0 * v:.0f} ms"


def ms_exact(v):
    """To 0.1 ms: where a whole millisecond would hide a miss (15.5 ms shown as "15 ms" against <= 15 ms)."""
    return "-" if v is None else f"{1000.0 * v:.1f} ms"


def percentile(sorted_values, q):
    """Linear interpolation between order statistics, as `warpguard evaluate` does (docs/evaluation.md)."""
    pos = q * (len(sorted_values) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (pos - lo) * (sorted_values[hi] - sorted_values[lo])


def rules(totals):
    return {r["rule"]: r for r in totals["by_rule"]}


def variant(suite, robot, nominal, collisions, suffix):
    """One detector's results on a variant: the nominal run's totals and the collision run's combined rule."""
    nom = load(f"{suite}/{robot}/{nominal}{suffix}.evaluation.json")["totals"]
    return nom, rules(load(f"{suite}/{robot}/{collisions}{suffix}.evaluation.json")["totals"])["combined"]


def headline(suite, robot, nominal, collisions, suffix):
    """One detector's headline numbers on a variant: false stops per 1,000 nominal cycles, collisions
    >= 50 N and all (detected, collisions), delay median and p95 (s)."""
    nom, comb = variant(suite, robot, nominal, collisions, suffix)
    big = [b for b in comb["by_peak_force"] if b["low"] >= 50]
    return {"fs": per_thousand(nom),
            "big": (sum(b["detected"] for b in big), sum(b["collisions"] for b in big)),
            "all": (comb["detected"], comb["collisions"]),
            "delay": (comb["delay_median"], comb["delay_p95"])}


def delay_bound(suite, robot, collisions):
    """The ideal detector of scripts/delay-bound-check.sh on a collision run (it knows the run recorded
    again without its contacts and applies WarpGuard's rules through one reading's noise), or None
    when the check has not been run on this run's current evaluation."""
    path = f"{suite}/{robot}/{collisions}.delay-bound.json"
    evaluation = f"{suite}/{robot}/{collisions}.phase.evaluation.json"
    if not os.path.exists(path) or os.path.getmtime(path) < os.path.getmtime(evaluation):
        return None
    return load(path)


def per_thousand(nom):
    """False stop events per 1,000 clean cycles of a nominal run."""
    return 1000.0 * nom["false_stop_events"] / max(nom["clean_cycles"], 1)


def matching_table(suite, part, label, unit, signal="", rows_too=True):
    """The per-joint matching table of tools/ka_matching.py's results and its totals over the scaled
    joints; part(result) -> (per-joint rows, windows per joint). signal: "" (the torques) or "arm-"
    (the deviation from the arm model); rows_too False: the totals only."""
    out = ["| robot | task | joint | scaled | right phase KA-mDTW | right phase mDTW | error KA-mDTW | error mDTW | DTW on KA span |",
           "|---|---|---:|---|---:|---:|---:|---:|---:|"] if rows_too else []
    totals = {}
    for robot in ROBOTS:
        for task in ("pick-and-place", "assembly"):
            rows, w = part(load(f"{suite}/{robot}/ka/{task}-{signal}matching.json"))
            for row in rows:
                if rows_too:
                    out.append(f"| {robot} | {task} | {row['joint']} | {'yes' if row['scaled'] else 'no'} | "
                               f"{row['ka_right']}/{w} | {row['mdtw_right']}/{w} | {row['ka_cost']:.4g} | {row['mdtw_cost']:.4g} | "
                               f"{row['dtw_on_ka_span']:.4g} |")
                if row["scaled"]:
                    t = totals.setdefault(task, [0, 0, 0, 0, 0])
                    t[0] += row["ka_right"]; t[1] += row["mdtw_right"]; t[2] += w
                    t[3] += row["ka_only"]; t[4] += row["mdtw_only"]
    if rows_too:
        out.append("")
    for task, (k, p, w, ko, po) in totals.items():
        out.append(f"- {task}, {label}scaled joints of all robots: right phase KA-mDTW {k}/{w} ({pct(k, w)}), mDTW {p}/{w} "
                   f"({pct(p, w)}); KA-mDTW right where mDTW is wrong in {ko} {unit}, mDTW right where KA-mDTW is wrong in {po}.")
    return out


def references_section(suite):
    """Two reference methods on the same runs as the default (scripts/benchmark-suite.sh, run_references):
    thesis 3.1's envelope method and the model-based residual."""
    if not all(os.path.exists(f"{suite}/{r}/assembly-override70-collisions.{m}.evaluation.json")
               for r in ROBOTS for m in ("envelope", "residual")):
        return []
    shapes = []
    for robot in ROBOTS:
        for limits, task in (("envelope", "pick-and-place"), ("assembly-envelope", "contact task")):
            e = load(f"{suite}/{robot}/{limits}.json")
            shapes.append(f"{robot} {task} N = {e['period']}, s = {e['shift']}")
    r = load(f"{suite}/{ROBOTS[0]}/residual.json")
    out = ["## Two reference methods on the same runs", "",
           "Both derive their limits from the same calibration cycles the detectors are calibrated on and run",
           "over the same recordings (`warpguard evaluate --envelope` / `--residual`):", "",
           "- **The envelope method** of thesis §3.1, the controller-side check (`warpguard envelope`,",
           "  docs/algorithms.md; what `warpguard export-envelope` writes for a controller with no PC attached). It",
           "  indexes one representative cycle of N samples by the samples since the cycle began and widens it by",
           "  the shift s that aligns the other cycles to it: on these tasks, whose cycles place the part at",
           "  changing places (the contact task: snap-fits at changing poses), s comes to nearly half the cycle or",
           "  more (" + "; ".join(shapes) + "),",
           "  so the envelope spans most of what a joint does anywhere in its cycle.",
           "- **The model-based residual** (`warpguard residual`, core/include/warpguard/model_residual.hpp): the",
           "  signal less what the default profile's own arm model expects (velocities and accelerations from past",
           "  samples only, as in operation) and less the declared payload's torque, against one static band per",
           "  joint: the calibration cycles' least and largest residual widened by "
           f"{100 * r['widening']:g} % of the band's half-width on",
           f"  each side, STOP after {r['persistence']} samples outside in a row (the literature's collision-free max/min",
           "  widened by 5–10 %, and a 2-sample persistence; research/model-based-methods.md). No matching: the",
           "  band is the same at every moment of the cycle. It needs a signed torque and an arm model, which the",
           "  suite's arms have.", "",
           "Each cell: envelope · residual · **default**. Regenerate: `WARPGUARD_REFERENCES_ONLY=1 bash",
           "scripts/benchmark-suite.sh --reuse` (after the suite).", "",
           "| robot | variant | false stops / 1,000 cycles | detected ≥ 50 N | detected, all | delay median / p95 |",
           "|---|---|---:|---:|---:|---:|"]
    for robot in ROBOTS:
        for nominal, collisions, label in VARIANTS:
            cells = []
            for suffix in (".envelope", ".residual", ".phase"):
                h = headline(suite, robot, nominal, collisions, suffix)
                cells.append((f"{h['fs']:.1f}" if suffix == ".phase" else f"{h['fs']:.0f}",
                              pct(*h["big"]) + ("" if suffix != ".phase" else f" ({h['big'][0]}/{h['big'][1]})"),
                              pct(*h["all"]), f"{ms(h['delay'][0])} / {ms(h['delay'][1])}"))
            joined = [" · ".join(c[k] for c in cells[:2]) + f" · **{cells[2][k]}**" for k in range(4)]
            out.append(f"| {robot} | {label} | {' | '.join(joined)} |")
    out.append("")
    return out


def ka_section(suite):
    """Issue 6: KA-mDTW against mDTW on tasks that vary (scripts/benchmark-suite.sh, run_ka)."""
    if not all(os.path.exists(f"{suite}/{r}/ka/pick-and-place-matching.json") for r in ROBOTS):
        return []
    out = ["## KA-mDTW on tasks that vary (thesis §4.4–4.5)", "",
           "The reference is recorded with **one** variant of the varying move — one place of the pick-and-place",
           "(carrying the part), one pose of the snap-fit (assembly) — and the task then runs with all of them",
           "(40 calibration, 60 nominal and 50 collision cycles, every variant). The kinematic model is each",
           "robot's own, identified by the procedure on the simulated controller (`warpguard-sim identify`,",
           "0.05 mm noise, `warpguard identify dh`); the force direction is the payload's weight (base frame,",
           "0, 0, −1). Joints about whose axis that force has no lever (vertical axes) are matched unscaled",
           "(calibration picks them; `--ka-joints` overrides). Both methods use the default detector calibrated",
           "on the same cycles as a user would calibrate them (`warpguard calibrate --model`, with `--method",
           "ka-mdtw` for KA-mDTW): each matches the deviation from the arm model fitted on the calibration",
           "recordings (docs/detection.md, *The arm model from the calibration recordings*); the recordings",
           "declare the payload, and mDTW takes the part's torque off with the payload model (docs/detection.md,",
           "*Declared payload*) while KA-mDTW keeps it: the part's weight is the force whose lever lengths it",
           "scales (thesis §4.5.1). Regenerate: `WARPGUARD_KA_ONLY=1 bash scripts/benchmark-suite.sh --reuse`.", "",
           "Matching, as §4.5 reports it: windows ending 40 % and 80 % into the varying move of 4 cycles whose",
           "variant differs from the reference's (`tools/ka_matching.py`, `warpguard match`); right phase = the",
           "matched span ends inside the reference's own varying move. Cumulative matching error d(m, end): KA-mDTW",
           "(in N: torque / lever), mDTW (in Nm) and classic DTW of the raw window on the span KA-mDTW chose (Nm).", ""]
    out += matching_table(suite, lambda m: (m["joints"], len(m["windows"])), "", "windows")
    out += ["", "The same with the window §4.5 matches: a whole section of the task in which its force acts, in up to 8",
            "cycles whose variant differs from the reference's (`warpguard match --window`): for pick-and-place the",
            "varying move itself, from its start to its end; for the assembly the stand at the varying pose, in which",
            "the snap-fit presses (from the end of the varying move to the start of the next). The detector's window",
            "of 30 samples sees a small part of either. Right phase = the match ends in the reference's own section.",
            "Cumulative matching errors as above, for the whole section.", ""]
    out += matching_table(suite, lambda m: (m["whole_move"]["joints"], len(m["whole_move"]["moves"])), "whole sections, ",
                          "sections")
    out += ["", "**Both on the same signal, as thesis §4.5.1 compares them**: the deviation from the arm's own",
            "dynamics with the part's torque left in (the run without the load is the arm's model, the difference",
            "is the task's force). A dry run of the task — the same program with no part and nothing pressed, 20",
            "cycles with every variant — gives each robot's arm model (`warpguard identify dynamics`); both methods",
            "are calibrated again with it (`warpguard calibrate --arm`, mDTW with `--keep-payload`), so the",
            "reference, the thresholds and every window are the recordings less what the arm model expects, with",
            "velocities and accelerations fitted to the newest few samples as in operation, and the two differ only",
            "in KA-mDTW's scaling. Same windows and definitions as above:", ""]
    out += matching_table(suite, lambda m: (m["joints"], len(m["windows"])), "detector's window, ", "windows", "arm-", False)
    out += matching_table(suite, lambda m: (m["whole_move"]["joints"], len(m["whole_move"]["moves"])), "whole sections, ",
                          "sections", "arm-", False)
    out += ["", "Detection on the varying task, same detector, same calibration cycles: false stop events per 1,000",
            "nominal cycles, collisions ≥ 50 N detected, all detected, delay median / p95. The first two rows of",
            "each task: the defaults, as above; \"dry-run arm, part kept\": both on the same signal, as above.", "",
            "| robot | task | method | false stops / 1,000 cycles | detected ≥ 50 N | detected, all | delay median / p95 |",
            "|---|---|---|---:|---:|---:|---:|"]
    for robot in ROBOTS:
        for task in ("pick-and-place", "assembly"):
            for method, label in (("mdtw", "mDTW"), ("ka", "KA-mDTW"), ("arm-mdtw", "mDTW, dry-run arm, part kept"),
                                  ("arm-ka", "KA-mDTW, dry-run arm, part kept")):
                nom = load(f"{suite}/{robot}/ka/{task}-nominal.{method}.evaluation.json")["totals"]
                comb = rules(load(f"{suite}/{robot}/ka/{task}-collisions.{method}.evaluation.json")["totals"])["combined"]
                big = [b for b in comb["by_peak_force"] if b["low"] >= 50]
                fs = per_thousand(nom)
                bd, bc = sum(b["detected"] for b in big), sum(b["collisions"] for b in big)
                out.append(f"| {robot} | {task} | {label} | {fs:.0f} | {pct(bd, bc)} ({bd}/{bc}) | "
                           f"{pct(comb['detected'], comb['collisions'])} | {ms(comb['delay_median'])} / {ms(comb['delay_p95'])} |")
    out.append("")
    return out


def main():
    suite, out_md, plot_dir = sys.argv[1:4]
    os.makedirs(plot_dir, exist_ok=True)
    lines = ["# Benchmarks on the simulated cell", "",
             "Every number on this page is printed by one command (about an hour on the 2-core machine;",
             "`--reuse` keeps the recordings and only calibrates and evaluates again):", "",
             f"    {COMMAND}", "",
             "It records, for each robot of `samples/robots/` doing its pick-and-place task (`samples/tasks/`):",
             "a reference (7 cycles; 3 are cut into the profile), 100 calibration cycles, 200 held-out nominal",
             "cycles, 100 cycles with one collision each (20–300 N log-uniform, links 2–6, half impacts of",
             "10–50 ms and half pushes ramping over 0.2–1 s, random phase, point and direction), and the",
             "variants below (50 nominal + 50 collision cycles each; the assembly task 100 + 50 with its own",
             "reference and 50 calibration cycles, and 50 + 50 at 70 % override judged by that same profile: the",
             "moves slow down, the presses and waits keep their durations). Every recording carries the payload the task program declares",
             "(column `payload`; *payload 2x*: a part twice as heavy, declared as such; *speed override turned*:",
             "every 12 s of the run the override goes to the next of 70, 100, 85, 70, 90, 100, 75, 100, 80, 95 %,",
             "followed smoothly by the controller, docs/simulator.md). It calibrates two",
             "detectors on each robot's own calibration",
             "cycles (`warpguard calibrate --detector ...`) and evaluates every recording with both",
             "(`warpguard evaluate`): the **published detector** (thesis §3.2.3: mDTW, window m = 30, θ1 = 3σ,",
             "θ2 = 1.2 × max) and the **phase-aware detector**, WarpGuard's default ([detection.md](detection.md)).",
             "Given each robot's kinematic model (identified by the procedure on the simulated controller), the",
             "default matches the deviation from the arm's own dynamics, fitted on the same calibration cycles less",
             "their declared payload (detection.md, *The arm model from the calibration recordings*); the KA-mDTW",
             "section below compares both methods as calibrated by default and on one same signal.",
             "Definitions: [evaluation.md](evaluation.md).",
             ""]

    # Issue 8: the default against the published detector, side by side.
    lines += ["## The default (phase-aware) detector against the published one", "",
              "Per robot and variant: false stop events per 1,000 nominal cycles (nominal run of the variant),",
              "collisions with peak force ≥ 50 N detected, all collisions detected, detection delay median / p95",
              "(collision run; from the contact's own onset, which lies between two samples, to the sample whose",
              "decision is STOP). Each cell: published → phase-aware. Targets for the default: ≤ 1 false stop per",
              "1,000 nominal cycles, ≥ 99 % of collisions ≥ 50 N, median delay ≤ 15 ms.", "",
              "| robot | variant | false stops / 1,000 cycles | detected ≥ 50 N | detected, all | delay median / p95 |",
              "|---|---|---:|---:|---:|---:|"]
    target_rows = []
    for robot in ROBOTS:
        for nominal, collisions, label in VARIANTS:
            a, b = (headline(suite, robot, nominal, collisions, suffix) for suffix in ("", ".phase"))
            lines.append(f"| {robot} | {label} | {a['fs']:.0f} → **{b['fs']:.1f}** | "
                         f"{pct(*a['big'])} → **{pct(*b['big'])}** ({b['big'][0]}/{b['big'][1]}) | "
                         f"{pct(*a['all'])} → **{pct(*b['all'])}** | "
                         f"{ms(a['delay'][0])} / {ms(a['delay'][1])} → **{ms(b['delay'][0])} / {ms(b['delay'][1])}** |")
            target_rows.append((robot, label, b, delay_bound(suite, robot, collisions)))
    lines.append("")
    met = lambda r: (r["fs"] <= 1.0, r["big"][1] == 0 or r["big"][0] >= 0.99 * r["big"][1],
                     # (to the microsecond: a delay is a difference of time stamps, 15 ms can read 15.000000000015)
                     r["delay"][0] is not None and round(r["delay"][0] * 1e6) <= 15000)
    misses = []
    bounds = [bound for *_, bound in target_rows if bound is not None]
    for robot, label, r, bound in target_rows:
        fs_ok, det_ok, delay_ok = met(r)
        if not fs_ok:
            misses.append(f"{robot}, {label}: {r['fs']:.1f} false stops per 1,000 cycles (target ≤ 1)")
        if not det_ok:
            ideal = "" if bound is None else f"; the ideal detector: {bound['all']['bound']['detected_ge50']}/{bound['all']['contacts_ge50']}"
            misses.append(f"{robot}, {label}: {pct(*r['big'])} of collisions ≥ 50 N detected (target ≥ 99 %{ideal})")
        if not delay_ok:
            ideal = "" if bound is None else f"; the ideal detector: {ms(bound['all']['bound']['median_ms'] / 1000.0)}"
            misses.append(f"{robot}, {label}: median delay {ms_exact(r['delay'][0])} (target ≤ 15 ms{ideal})")
    lines += [f"Regenerate: `{COMMAND} --reuse` (per-bin numbers and both detectors' delays in the table",
              "*Every variant* below, with the command for a single row).", ""]
    lines += ["Targets not met by the default, by how much (reasons in [detection.md](detection.md)):", ""]
    lines += [f"- {m}" for m in misses] if misses else ["- none"]
    lines.append("")
    if bounds:
        # Pooled over the runs the check has seen: each its own detected contacts and their median.
        def pooled(who):
            k = 0 if who == "bound" else 1
            delays = sorted(d[k] for b in bounds for d in b["delays"] if d[k] is not None)
            return len(delays), sum(b["all"]["contacts"] for b in bounds), statistics.median(delays) if delays else None
        def earlier_impacts():
            per_robot = {}
            for robot, _, _, b in target_rows:
                if b is None or b["impacts"]["bound"]["median_ms"] is None or b["impacts"]["warpguard"]["median_ms"] is None:
                    continue
                # Whole milliseconds, as the tables print them.
                earlier = round(b["impacts"]["warpguard"]["median_ms"], 3) < round(b["impacts"]["bound"]["median_ms"], 3)
                runs = per_robot.setdefault(robot, [0, 0])
                runs[0] += earlier
                runs[1] += 1
            return ", ".join(f"{k} of {n} runs on the {robot}" for robot, (k, n) in per_robot.items())
        lines += ["*The ideal detector* (`bash scripts/delay-bound-check.sh`, run by the suite after the evaluations;",
                  "detection.md, *How far the target is from what the noise allows*): WarpGuard's own rules, its",
                  "level and CUSUM limit fitted for the same false-stop budget, applied to the contact's effect alone",
                  "(the run less its twin recorded without contacts) through one reading's noise. No detector can know",
                  "the twin; where it misses a target too, these rules cannot reach it from the torque alone on these",
                  "contacts. The default also reads the arm's motion through its arm model (a contact that slows the arm",
                  "shows in the angles before the controller's torque answers it), so it can be earlier: its impacts'",
                  f"median is under the ideal detector's in {earlier_impacts()}. Over the {len(bounds)} collision runs "
                  f"the ideal detector found {pooled('bound')[0]} of "
                  f"{pooled('bound')[1]} contacts,",
                  f"median delay {ms(pooled('bound')[2])}; the default {pooled('warpguard')[0]}, "
                  f"{ms(pooled('warpguard')[2])}.", ""]
    lines += references_section(suite)
    lines += ka_section(suite)
    lines += ["The tables below are the published detector's, kept as the baseline.", ""]

    # Table 3 form.
    lines += ["## The published method in the thesis's Table 3 form", "",
              "Nominal cycles flagged (held-out nominal run) and collisions detected (collision run), per rule alone",
              "and combined. The thesis reports 0.27 / 1.07 / 1.34 % flagged and 94.4 / 82.5 / 100 % detected offline.", "",
              "| robot | rule | nominal cycles flagged | collisions detected | detection delay median / p95 |",
              "|---|---|---:|---:|---:|"]
    for robot in ROBOTS:
        nom = load(f"{suite}/{robot}/nominal.evaluation.json")["totals"]
        col = load(f"{suite}/{robot}/collisions.evaluation.json")["totals"]
        rn, rc = rules(nom), rules(col)
        for name in ["rule 1", "rule 2", "combined"]:
            lines.append(f"| {robot} | {name} | {pct(rn[name]['clean_cycles_flagged'], nom['clean_cycles'])} "
                         f"({rn[name]['clean_cycles_flagged']} of {nom['clean_cycles']}) | "
                         f"{pct(rc[name]['detected'], rc[name]['collisions'])} ({rc[name]['detected']} of {rc[name]['collisions']}) | "
                         f"{ms(rc[name]['delay_median'])} / {ms(rc[name]['delay_p95'])} |")
    lines.append("")

    # Variants: false stops per 1000 cycles, detection by force bin, delays - both detectors.
    lines += ["## Every variant: false stops, detection by peak force, delay", "",
              "False stop events per 1,000 nominal cycles (the nominal run of the variant); collisions detected per",
              "peak-force bin; detection delay from contact onset to the first STOP (collision run). Each cell:",
              "published → **phase-aware (default)**.", "",
              "| robot | variant | false stops / 1,000 cycles | < 50 N | 50–100 N | 100–200 N | ≥ 200 N | all | delay median / p95 |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for robot in ROBOTS:
        for nominal, collisions, label in VARIANTS:
            (na, ca), (nb, cb) = (variant(suite, robot, nominal, collisions, suffix) for suffix in ["", ".phase"])
            bins = " | ".join(f"{pct(a['detected'], a['collisions'])} → **{pct(b['detected'], b['collisions'])}** "
                              f"({b['detected']}/{b['collisions']})"
                              for a, b in zip(ca["by_peak_force"], cb["by_peak_force"]))
            lines.append(f"| {robot} | {label} | {per_thousand(na):.0f} → **{per_thousand(nb):.1f}** | {bins} | "
                         f"{pct(ca['detected'], ca['collisions'])} → **{pct(cb['detected'], cb['collisions'])}** | "
                         f"{ms(ca['delay_median'])} / {ms(ca['delay_p95'])} → **{ms(cb['delay_median'])} / {ms(cb['delay_p95'])}** |")
    lines += ["", f"Regenerate: `{COMMAND} --reuse`; one row by hand, e.g. `build/tools/warpguard evaluate --profile",
              "build/benchmarks/ur5e-like/profile-phase.json build/benchmarks/ur5e-like/payload2x-collisions.csv`",
              "(`profile.json` for the published detector; the assembly rows use `assembly-profile*.json`).", ""]

    # The median delay by kind of contact: impacts last 10-50 ms, pushes ramp over 0.2-1 s.
    lines += ["### Detection delay of the default by kind of contact", "",
              "Contacts of at most 60 ms are the impacts, longer ones the pushes that ramp up over 0.2–1 s (their",
              "force is small when they begin, so the delay is the time the force takes to rise above the phase's",
              "nominal range). Median / p95 delay of the detected ones, and how many were detected, per kind;",
              "then the contact force at the first STOP of the detected pushes, median / p95 (from the simulator's",
              "contact, `force_at_detection` in the evaluation), against the median peak force of all pushes: how",
              "far a push had got when the robot was told to stop.", "",
              "| robot | variant | impacts | pushes | pushes: force at the stop | pushes: peak force |",
              "|---|---|---:|---:|---:|---:|"]
    for robot in ROBOTS:
        for nominal, collisions, label in VARIANTS:
            col = load(f"{suite}/{robot}/{collisions}.phase.evaluation.json")
            details = [c for run in col["runs"] for c in run.get("summary", {}).get("collision_details", [])]
            # The sample period, from the first and last onsets (the recording's clock need not start at 0).
            first, last = min(details, key=lambda c: c["onset_index"]), max(details, key=lambda c: c["onset_index"])
            period = (last["onset_t"] - first["onset_t"]) / max(last["onset_index"] - first["onset_index"], 1)
            cells = []
            for short in (True, False):
                group = [c for c in details if (c["samples"] * period <= 0.06) == short]
                delays = sorted(c["delay"] for c in group if c["detected"])
                if delays:
                    cells.append(f"{ms(percentile(delays, 0.5))} / {ms(percentile(delays, 0.95))} ({len(delays)}/{len(group)})")
                else:
                    cells.append(f"- (0/{len(group)})")
            pushes = [c for c in details if c["samples"] * period > 0.06]
            forces = sorted(c["force_at_detection"] for c in pushes if c["detected"])
            peaks = sorted(c["peak_force"] for c in pushes)
            cells.append(f"{percentile(forces, 0.5):.0f} N / {percentile(forces, 0.95):.0f} N" if forces else "-")
            cells.append(f"{percentile(peaks, 0.5):.0f} N" if peaks else "-")
            lines.append(f"| {robot} | {label} | {' | '.join(cells)} |")
    lines.append("")

    # Sensitivity curves per rule, from the peak-force bins of the collision runs.
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, rule in zip(axes, ["rule 2", "combined"]):
        for robot in ROBOTS:
            col = load(f"{suite}/{robot}/collisions.evaluation.json")["totals"]
            bins = rules(col)[rule]["by_peak_force"]
            xs = [math.sqrt(max(b["low"], 20.0) * (b["high"] if b["high"] else 300.0)) for b in bins]
            ys = [100.0 * b["detected"] / b["collisions"] if b["collisions"] else float("nan") for b in bins]
            ax.plot(xs, ys, marker="o", label=robot)
        ax.set_xscale("log")
        ax.set_xlabel("peak contact force [N] (bins < 50, 50-100, 100-200, >= 200)")
        ax.set_ylim(0, 105)
        ax.grid(True, which="both", alpha=0.3)
        ax.set_title(f"published detector, {rule}")
    axes[0].set_ylabel("collisions detected [%]")
    axes[1].legend()
    fig.tight_layout()
    fig.savefig(f"{plot_dir}/sensitivity.png", dpi=110)
    plt.close(fig)

    # One matched window: the stop event furthest over its threshold in the first robot's collision run.
    window_robot = robot = ROBOTS[0]
    run = load(f"{suite}/{robot}/collisions.evaluation.json")["runs"][0]
    event = max(run["stop_events"], key=lambda e: e["value"] / e["threshold"] if e["threshold"] > 0 else 0.0)
    index, joint = event["index"], event["joint"]
    match = json.loads(subprocess.check_output(
        ["build/tools/warpguard", "match", "--profile", f"{suite}/{robot}/profile.json", "--run",
         f"{suite}/{robot}/collisions.csv", "--index", str(index), "--joint", str(joint), "--path", "--json"]))
    path = match["path"]
    unit = load(f"{suite}/{robot}/profile.json")["unit"]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(range(len(path)), [p[2] for p in path], label="measurement window a(i)", color="tab:red")
    ax.plot(range(len(path)), [p[3] for p in path], label="matched reference b(j)", color="tab:blue")
    th = match["rule1"]["threshold"]
    ax.fill_between(range(len(path)), [p[3] - th for p in path], [p[3] + th for p in path], color="tab:blue", alpha=0.15,
                    label="rule 1 threshold band")
    ax.set_xlabel("step along the warping path")
    ax.set_ylabel(f"joint {joint} torque [{unit}]")
    ax.set_title(f"{robot}, joint {joint}, sample {index}: reference {match['reference_start']}..{match['reference_end']}, "
                 f"rule 1 {match['rule1']['value']:.1f} > {th:.2f}", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(f"{plot_dir}/matched-window.png", dpi=110)
    plt.close(fig)

    # What a stop is worth in newtons: a rigid box in the tool's path, with and without a stop after
    # the published detector's median delay on that robot's collision run.
    lines += ["## What a stop is worth", "",
              "A rigid box is lowered into the tool's path 1.5 s into cycle 2 (`warpguard-sim record --obstacle-at`; it",
              "comes down over 0.3 s until 0.6 s before the tool gets there, no further while it touches the arm); the",
              "contact force comes from MuJoCo's contact model. The same run again, braking to a stop (150 ms along",
              "the path) after the first contact plus the default detector's median delay on the collision run.",
              "The peaks come from the simulator (every physics step, the whole recording). A stopped arm holds its",
              "pose with its servo's integral action, and the box, lowered again once the arm has been free of it for",
              "0.2 s, rests on it: the contact force then creeps for the rest of the recording. So the table also",
              "gives, from the recording (sampled at the robot's rate), the peak from the first contact until the arm",
              "stands plus 50 ms, and the force at the recording's end (the rest of cycle 2, held stopped):", "",
              "| robot | peak contact force without a stop | with a stop | with a stop, until the arm stands | with a stop, at the end | stop after first contact |",
              "|---|---:|---:|---:|---:|---:|"]
    def csv_rows(path):  # a recording's header and samples, split at the commas
        with open(path) as f:
            return [l.strip().split(",") for l in f if not l.startswith("#")]

    def peak_force(out):  # the simulator's "peak contact force X N"
        return float(out.split("peak contact force ")[1].split(" N")[0])

    for robot in ROBOTS:
        col = load(f"{suite}/{robot}/collisions.phase.evaluation.json")["totals"]
        delay = rules(col)["combined"]["delay_median"] or 0.0
        base = ["build/samples/sim/warpguard-sim", "record", "--robot", f"samples/robots/{robot}.json", "--task",
                f"samples/tasks/{robot}-pick-and-place.json", "--cycles", "2", "--seed", "77"]
        subprocess.check_output(base + ["--out", f"{suite}/{robot}/obstacle-free.csv"], text=True)
        # Cycle 2 starts where the cycle counter first reads 2 (robot clock - 0.2 s = sim time).
        first_cycle2 = first_contact = None
        rows = csv_rows(f"{suite}/{robot}/obstacle-free.csv")
        header = rows[0]
        for r in rows[1:]:
            if first_cycle2 is None and r[header.index("cycle")] == "2":
                first_cycle2 = float(r[0]) - 0.2
        hit_time = first_cycle2 + 1.5
        out = subprocess.check_output(base + ["--obstacle-at", f"{hit_time}", "--out", f"{suite}/{robot}/obstacle.csv"], text=True)
        without = peak_force(out)
        rows = csv_rows(f"{suite}/{robot}/obstacle.csv")
        ci = rows[0].index("contact")
        # The contact's own onset: its first sample less the contact's age there (0 in older files).
        ai = rows[0].index("contact_age") if "contact_age" in rows[0] else None
        first_contact = next(float(r[0]) - 0.2 - (float(r[ai]) if ai is not None else 0.0) for r in rows[1:] if r[ci] == "1")
        out = subprocess.check_output(base + ["--obstacle-at", f"{hit_time}", "--stop-at", f"{first_contact + delay}",
                                             "--out", f"{suite}/{robot}/obstacle-stopped.csv"], text=True)
        with_stop = peak_force(out)
        rows = csv_rows(f"{suite}/{robot}/obstacle-stopped.csv")
        fi = rows[0].index("contact_force")
        braked = first_contact + delay + 0.15 + 0.05  # the simulator's brake time (CellOptions::brake_time) and 50 ms
        while_braking = max((float(r[fi]) for r in rows[1:] if first_contact <= float(r[0]) - 0.2 <= braked), default=0.0)
        at_end = float(rows[-1][fi])
        lines.append(f"| {robot} | {without:.0f} N | {with_stop:.0f} N | {while_braking:.0f} N | {at_end:.0f} N | {1000 * delay:.1f} ms |")
    lines += ["", "Without a stop the arm keeps following its program into the rigid box, its motors up to their peak torque (3x rated);",
              "a stop after the first contact limits what follows it.", ""]

    rel = os.path.relpath(plot_dir, os.path.dirname(out_md))
    lines += ["## Sensitivity", "", f"![detection rate by peak force]({rel}/sensitivity.png)", "",
              "## A matched window", "",
              f"The stop event furthest over its threshold in {window_robot}'s collision run (sample {index}, joint {joint}),",
              "along the warping path, with the rule-1 band around the matched reference:", "", f"![matched window]({rel}/matched-window.png)", "",
              "## Reading these numbers", "",
              "The published recipe flags most clean cycles: the matched deviations are heavy-tailed, so 3σ is",
              "exceeded somewhere in nearly every cycle, and a fixed per-joint threshold ignores that the variance",
              "changes along the cycle (thesis §2.2). The phase-aware default ([detection.md](detection.md)) sets",
              "its thresholds per phase from the largest nominal deviations there and fits its margin to the",
              "per-cycle maxima of held-out calibration cycles.", ""]
    with open(out_md, "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
