#!/usr/bin/env python3
"""Matching on a task that varies, the way thesis §4.5 reports it (issue 6).

    ka_matching.py WARPGUARD REFERENCE.csv RUN.csv MDTW_PROFILE.json KA_PROFILE.json TASK

The reference was recorded with one variant of the varying move (one place, or one snap-fit pose);
RUN.csv repeats the task with every variant. The varying move is found in the joint angles (the
motion intervals of each cycle; the varying one is the move whose end pose differs most between cycles).
For windows ending 40 % and 80 % into that move in cycles whose variant differs from the
reference's, `warpguard match` gives the span each profile matched; a match is in the right phase
when its end lies in the reference's own varying move. Prints JSON: per joint the share of windows
matched to the right phase (and in how many only one of the two methods was right) and the mean
cumulative matching errors (KA-mDTW, mDTW, classic DTW of the raw window on the KA-chosen span)."""
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
    return out


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
ref_moves = []
for lo, hi in cycles(rc):
    if lo >= first and hi <= first + n + 1:
        m = moves(rt, rq, lo, hi)
        if len(m) == usual:
            ref_moves.append((m[vary][0] - first, m[vary][1] - first))
if not ref_moves:
    sys.exit("the reference's cycles do not have the run's %d moves" % usual)
ref_end_pose = [rq[j][ref_moves[0][1] + first] for j in range(joints)]

windows = []
for lo, hi, m in run_moves:
    mv = m[vary]
    pose = [q[j][mv[1]] for j in range(joints)]
    if max(abs(a - b) for a, b in zip(pose, ref_end_pose)) < 0.02:
        continue  # the reference's own variant
    for f in (0.4, 0.8):
        windows.append(mv[0] + int(f * (mv[1] - mv[0])))
    if len(windows) >= 8:
        break


def match(profile, index):
    p = subprocess.run([wg, "match", "--profile", profile, "--run", run_csv, "--index", str(index), "--json"],
                       capture_output=True, text=True, check=True)
    return json.loads(p.stdout)["joints"]


def right_phase(end):
    return any(a <= end <= b + 5 for a, b in ref_moves)


# ka_only / mdtw_only: windows in which one method found the right phase and the other did not.
rows = [{"joint": j, "ka_right": 0, "mdtw_right": 0, "ka_only": 0, "mdtw_only": 0, "ka_cost": 0.0, "mdtw_cost": 0.0,
         "dtw_on_ka_span": 0.0} for j in range(1, joints + 1)]
for index in windows:
    ka, md = match(ka_profile, index), match(mdtw_profile, index)
    for row, k, m in zip(rows, ka, md):
        ka_right, mdtw_right = right_phase(k["reference_end"]), right_phase(m["reference_end"])
        row["ka_right"] += ka_right
        row["mdtw_right"] += mdtw_right
        row["ka_only"] += ka_right and not mdtw_right
        row["mdtw_only"] += mdtw_right and not ka_right
        row["ka_cost"] += k["cost"] / len(windows)
        row["mdtw_cost"] += m["cost"] / len(windows)
        row["dtw_on_ka_span"] += k["dtw_cost_on_span"] / len(windows)
ka_profile_doc = json.load(open(ka_profile))
scaled = ka_profile_doc["kinematics"].get("scaled_joints", list(range(1, joints + 1)))
for row in rows:
    row["scaled"] = row["joint"] in scaled
print(json.dumps({"task": task, "varying_move": vary + 1, "moves_per_cycle": usual, "reference_varying_moves": ref_moves,
                  "windows": windows, "joints": rows}, indent=1))
