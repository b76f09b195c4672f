#!/usr/bin/env python3
"""A snap-fit at poses that change the joints' lever lengths (issue 6, thesis §4.5.2).

    snap_fit_poses.py WARPGUARD MODEL.json ROBOT.json ASSEMBLY_TASK.json OUT_TASK.json [SEED]

The suite's assembly task presses at three poses close together: the equivalent lever lengths of the
snap-fit's force (along the tool's z axis) differ from the reference pose's by at most about 20 % on
every joint whose lever reaches 5 cm, so the presses' deviations have nearly the same scale at every
pose and there is little for KA-mDTW's scaling to undo. In
the thesis's snap-fit the measurement and the reference were "similar only in shape but not in
scale". This writes the assembly task again with three other poses for its varying move, chosen from
random joint configurations around the task's own (each joint within ±0.5 rad, inside the robot's
limits, tool point at least 0.1 m above the base) by their lever lengths alone:

- a joint's signed lever for a force along the tool's z axis is (dp/dq_o) · z_tool, p the tool point,
  from `warpguard fk` on the identified MODEL (central differences, 1e-4 rad);
- a joint counts when its lever keeps its sign and stays at >= 5 cm in all three poses, the first
  pose's (the reference's) lies between the other two, and the largest is >= 1.5 times the smallest;
- the triple with the most such joints wins, ties by the sum of the logs of their ratios.

No recording is looked at. Prints the chosen poses and their levers."""
import json, math, random, subprocess, sys

if len(sys.argv) not in (6, 7):
    sys.exit(__doc__)
wg, model, robot_path, task_path, out_path = sys.argv[1:6]
seed = int(sys.argv[6]) if len(sys.argv) == 7 else 1
robot = json.load(open(robot_path))
task = json.load(open(task_path))
limits = [j["limits"] for j in robot["joints"]]
step = next((s for s in task["steps"] if "move_variants" in s), None)
if step is None:
    sys.exit("snap_fit_poses: %s has no step with move_variants (expected the assembly task)" % task_path)


def fk(q):
    out = subprocess.run([wg, "fk", "--model", model, "--q", ",".join("%.9f" % x for x in q)],
                         capture_output=True, text=True, check=True).stdout.split("\n")
    return [float(x) for x in out[0].split()], [[float(x) for x in line.split()] for line in out[1:4]]


def levers(q):
    p, r = fk(q)
    z = [r[0][2], r[1][2], r[2][2]]
    h, out = 1e-4, []
    for o in range(len(q)):
        up, down = list(q), list(q)
        up[o] += h
        down[o] -= h
        pu, pd = fk(up)[0], fk(down)[0]
        out.append(sum((pu[k] - pd[k]) / (2 * h) * z[k] for k in range(3)))
    return p, out


rng = random.Random(seed)
pool = []
while len(pool) < 80:
    base = step["move_variants"][rng.randrange(len(step["move_variants"]))]
    q = [min(max(b + rng.uniform(-0.5, 0.5), lo + 0.05), hi - 0.05) for b, (lo, hi) in zip(base, limits)]
    p, lev = levers(q)
    if p[2] >= 0.1:
        pool.append((q, lev))


def score(triple):
    good, total = 0, 0.0
    for o in range(len(triple[0][1])):
        v = [lev[o] for _, lev in triple]
        if min(abs(x) for x in v) < 0.05 or not (all(x > 0 for x in v) or all(x < 0 for x in v)):
            continue
        a = sorted(abs(x) for x in v)
        if a[0] < abs(v[0]) < a[2] and a[2] >= 1.5 * a[0]:
            good += 1
            total += math.log(a[2] / a[0])
    return good, total


best, best_score = None, (-1, 0.0)
for i in range(len(pool)):
    for j in range(len(pool)):
        for k in range(j + 1, len(pool)):
            if i in (j, k):
                continue
            s = score((pool[i], pool[j], pool[k]))
            if s > best_score:
                best, best_score = (pool[i], pool[j], pool[k]), s
step["move_variants"] = [[round(x, 3) for x in q] for q, _ in best]
task["name"] = task["name"] + "-lever-poses"
task["description"] = ("The assembly task with the snap-fit at three poses chosen by tools/snap_fit_poses.py (seed %d) so "
                       "that %d joints' lever lengths differ by >= 1.5x between them" % (seed, best_score[0]))
json.dump(task, open(out_path, "w"), indent=1)
for q, lev in best:
    print("pose [%s]  levers (m) %s" % (", ".join("%.3f" % x for x in q), " ".join("%+.3f" % x for x in lev)))
print("%d joints with levers >= 1.5x apart, the reference's in the middle (sum of log ratios %.2f)" % best_score)
