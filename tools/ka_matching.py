#!/usr/bin/env python3
"""Matching on a task that varies, the way thesis §4.5 reports it (issue 6).

    ka_matching.py WARPGUARD REFERENCE.csv RUN.csv MDTW_PROFILE.json KA_PROFILE.json TASK

The reference was recorded with one variant of the varying move (one place, or one snap-fit pose),
or with a few taken in turn; RUN.csv repeats the task with every variant, and the windows come from
cycles whose variant is none of the reference's. The varying move is found in the joint angles (the
motion intervals of each cycle; the varying one is the move whose end pose differs most between cycles).
For windows ending 40 % and 80 % into that move in cycles whose variant differs from the
reference's, `warpguard match` gives the span each profile matched; a match is in the right phase
when its end lies in the reference's own varying move. Prints JSON: per joint the share of windows
matched to the right phase (and in how many only one of the two methods was right) and the mean
cumulative matching errors (KA-mDTW, mDTW, classic DTW of the raw window on the KA-chosen span).

The same again under "whole_move" with the window thesis §4.5 matches: a whole section of the task
in which its force acts (`warpguard match --window`), in up to 8 such cycles - for pick-and-place the
varying move itself (the part carried to its place, from the move's start to its end), for assembly
the stand at the varying pose in which the snap-fit presses (from the end of the varying move to the
start of the next). The detector's window m (30 samples by default) sees a small part of either; the
thesis's measurement vectors span such a section. Right phase: the match ends in the reference's
own section; right span ("ka_span", "mdtw_span"): the matched span also lies in that section and
covers at least half of it.

TASK is pick-and-place or assembly (any task with a snap-fit stand at the varying pose, such as the
one tools/snap_fit_poses.py writes)."""
import json, subprocess, sys

wg, ref_csv, run_csv, mdtw_profile, ka_profile, task = sys.argv[1:7]


def read(path):
    rows, header, joints = [], None, 0
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                if line.startswith("# joints:"):
                    joints = int(line.split(":")[1])
                continue
            if header is None:
                header = line.strip().split(",")
                continue
            rows.append(line.strip().split(","))
    col = {name: k for k, name in enumerate(header)}
    t = [float(r[col["t"]]) for r in rows]
    cycle = [int(r[col["cycle"]]) for r in rows]
    q = [[float(r[col["q%d" % (j + 1)]]) for r in rows] for j in range(joints)]
    return t, cycle, q, joints


def moves(t, q, lo, hi):
    """Motion intervals [a, b] of samples lo..hi-1 (joint speed above 3 % of the cycle's largest)."""
    speed = [0.0] * (hi - lo)
    for i in range(lo + 1, hi):
        dt = max(t[i] - t[i - 1], 1e-6)
        speed[i - lo] = max(abs(qj[i] - qj[i - 1]) for qj in q) / dt
    limit = 0.03 * max(speed)
    out, start, still = [], None, 0
    for k, v in enumerate(speed):
        if v > limit:
            if start is None:
                start = k
            still = 0
        elif start is not None:
            still += 1
            if still > 10:  # 10 samples at rest end a move
                if k - still - start > 25:
                    out.append((lo + start, lo + k - still))
                start, still = None, 0
    if start is not None and len(speed) - start > 25:
        out.append((lo + start, hi - 1))
    # A commanded move lasts; a contact can jolt a standing arm for a few dozen samples (the
    # UR5e-like snap-fit's click: 28 samples, which the end-pose spread below took for the varying move).
    longest = max((b - a for a, b in out), default=0)
    return [(a, b) for a, b in out if b - a >= longest / 4]


def cycles(cycle):
    bounds, k = [], 0
    while k < len(cycle):
        e = k
        while e < len(cycle) and cycle[e] == cycle[k]:
            e += 1
        bounds.append((k, e))
        k = e
    return bounds[1:-1]  # complete cycles only


rt, rc, rq, joints = read(ref_csv)
t, c, q, _ = read(run_csv)
mdtw = json.load(open(mdtw_profile))
first = mdtw["reference"]["first_sample"]
n = len(mdtw["reference"]["t"])

# The varying move: the move (by its place in the cycle) whose end pose differs most between the
# run's cycles; cycles with another number of moves are left out.
run_moves = [(lo, hi, moves(t, q, lo, hi)) for lo, hi in cycles(c)]
counts = [len(m) for _, _, m in run_moves]
usual = max(set(counts), key=counts.count)
run_moves = [x for x in run_moves if len(x[2]) == usual]


def spread(k):
    ends = [[q[j][m[k][1]] for j in range(joints)] for _, _, m in run_moves]
    return sum(max(e[j] for e in ends) - min(e[j] for e in ends) for j in range(joints))


vary = max(range(usual), key=spread)


def section(m, hi):
    """The whole section thesis 4.5 matches, in a cycle whose moves are m (its samples end before hi):
    where the task's force acts. Pick-and-place: the varying move itself, carrying the part to its
    place. Assembly: the stand at the varying pose, in which the snap-fit presses (from the end of the
    varying move to the start of the next one)."""
    if task != "assembly":
        return m[vary]
    return (m[vary][1] + 1, m[vary + 1][0] - 1 if vary + 1 < len(m) else hi - 1)


ref_moves, ref_sections = [], []
for lo, hi in cycles(rc):
    if lo >= first and hi <= first + n + 1:
        m = moves(rt, rq, lo, hi)
        if len(m) == usual:
            ref_moves.append((m[vary][0] - first, m[vary][1] - first))
            a, b = section(m, hi)
            ref_sections.append((a - first, b - first))
if not ref_moves:
    sys.exit("the reference's cycles do not have the run's %d moves" % usual)
# The reference's variants (one pose, or several taken in turn): a run's cycle is another variant
# when its varying move ends away from every one of them.
ref_end_poses = [[rq[j][b + first] for j in range(joints)] for _, b in ref_moves]

other_moves, other_sections = [], []  # of each cycle whose variant is not the reference's
for lo, hi, m in run_moves:
    mv = m[vary]
    pose = [q[j][mv[1]] for j in range(joints)]
    if all(max(abs(a - b) for a, b in zip(pose, ref_pose)) >= 0.02 for ref_pose in ref_end_poses):
        other_moves.append(mv)
        other_sections.append(section(m, hi))
windows = []
for mv in other_moves[:4]:
    for f in (0.4, 0.8):
        windows.append(mv[0] + int(f * (mv[1] - mv[0])))


def match(profile, index, window=None):
    """Every joint's match of the window ending at `index` (a list of increasing indices: one replay,
    a list of answers)."""
    several = isinstance(index, list)
    cmd = [wg, "match", "--profile", profile, "--run", run_csv, "--json",
           "--index", ",".join(str(i) for i in index) if several else str(index)]
    if window is not None:
        cmd += ["--window", str(window)]
    p = subprocess.run(cmd, capture_output=True, text=True, check=True)
    doc = json.loads(p.stdout)
    if several:
        return [d["joints"] for d in (doc if isinstance(doc, list) else [doc])]
    return doc["joints"]


def right_phase(end, spans=ref_moves):
    return any(a <= end <= b + 5 for a, b in spans)


# ka_only / mdtw_only: windows in which one method found the right phase and the other did not.
ka_profile_doc = json.load(open(ka_profile))
scaled = ka_profile_doc["kinematics"].get("scaled_joints", list(range(1, joints + 1)))


def covers(match, spans):
    """The matched span lies in one of `spans` (5 samples' slack) and covers at least half of it: the
    whole section was recognised, not matched to a few samples of it (thesis §4.5.2: mDTW matched the
    whole snap-fit to the one reference sample closest in value, its peak)."""
    a, b = match["reference_start"], match["reference_end"]
    return any(lo - 5 <= a and b <= hi + 5 and b - a + 1 >= (hi - lo + 1) / 2 for lo, hi in spans)


def tally(matches, spans=ref_moves):
    """Per joint, over (KA-mDTW joints, mDTW joints) pairs of the same window; right phase: the
    match ends in one of the reference's `spans`; right span: it also `covers` one."""
    rows = [{"joint": j, "ka_right": 0, "mdtw_right": 0, "ka_only": 0, "mdtw_only": 0, "ka_span": 0, "mdtw_span": 0,
             "ka_cost": 0.0, "mdtw_cost": 0.0, "dtw_on_ka_span": 0.0, "scaled": j in scaled} for j in range(1, joints + 1)]
    for ka, md in matches:
        for row, k, m in zip(rows, ka, md):
            ka_right, mdtw_right = right_phase(k["reference_end"], spans), right_phase(m["reference_end"], spans)
            row["ka_span"] += covers(k, spans)
            row["mdtw_span"] += covers(m, spans)
            row["ka_right"] += ka_right
            row["mdtw_right"] += mdtw_right
            row["ka_only"] += ka_right and not mdtw_right
            row["mdtw_only"] += mdtw_right and not ka_right
            row["ka_cost"] += k["cost"] / len(matches)
            row["mdtw_cost"] += m["cost"] / len(matches)
            row["dtw_on_ka_span"] += k["dtw_cost_on_span"] / len(matches)
    return rows


rows = tally(list(zip(match(ka_profile, windows), match(mdtw_profile, windows))))
whole = other_sections[:8]
whole_rows = tally([(match(ka_profile, b, b - a + 1), match(mdtw_profile, b, b - a + 1)) for a, b in whole], ref_sections)
print(json.dumps({"task": task, "varying_move": vary + 1, "moves_per_cycle": usual, "reference_varying_moves": ref_moves,
                  "windows": windows, "joints": rows,
                  "whole_move": {"section": "the varying move" if task != "assembly" else "the stand at the varying pose",
                                 "reference_sections": ref_sections, "moves": whole,
                                 "window_lengths": [b - a + 1 for a, b in whole], "joints": whole_rows}},
                 indent=1))
