#!/usr/bin/env python3
"""The deviation a load causes, as thesis §4.5.1 feeds KA-mDTW (issue 6).

    ka_deviation.py LOADED.csv EMPTY.csv OUT.csv SEED

LOADED.csv and EMPTY.csv are warpguard-sim recordings of the same task with the same seed, once with
the grasped part and once without it (`--payload 0`): the same timing and the same motion (checked:
the time stamps must agree and the joint angles are reported). OUT.csv is LOADED.csv with every
joint signal replaced by loaded - empty: the torque of the load alone, "the deviation caused by the
contact task force, which was not included in the nominal dynamic model of the robot" (thesis §4.5.1,
where the empty run stands for an optimal model of the robot).

Both runs share the seed, so their reading noise is the same and cancels in the difference. A real
deviation is the difference of two independent readings: independent Gaussian noise of sqrt(2) x the
reading noise is added, the reading noise per joint measured in LOADED.csv from successive samples in
which no joint angle changes (sd of their difference / sqrt(2)). The payload column is set to 0: the
load is unknown to the detector, as in the thesis."""
import random
import statistics
import sys


def read(path):
    head, rows = [], []
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                head.append(line)
            else:
                rows.append(line.rstrip("\n").split(","))
    if not rows:
        sys.exit("ka_deviation: %s has no header row (expected a warpguard-sim recording)" % path)
    return head, rows[0], rows[1:]


def main():
    if len(sys.argv) != 5:
        sys.exit("usage: ka_deviation.py LOADED.csv EMPTY.csv OUT.csv SEED")
    loaded, empty, out, seed = sys.argv[1:5]
    random.seed(int(seed))
    head, cols, a = read(loaded)
    _, cols_b, b = read(empty)
    if cols != cols_b:
        sys.exit("ka_deviation: the two recordings have different columns: %s vs %s" % (cols, cols_b))
    if len(a) != len(b):
        sys.exit("ka_deviation: %s has %d samples, %s has %d (expected the same task, cycles and seed)" % (loaded, len(a), empty, len(b)))
    col = {name: k for k, name in enumerate(cols)}
    joints = sum(1 for name in cols if name.startswith("tau"))
    taus = [col["tau%d" % (j + 1)] for j in range(joints)]
    qs = [col["q%d" % (j + 1)] for j in range(joints)]
    noise = []
    for k in taus:
        d = [float(r1[k]) - float(r0[k]) for r0, r1 in zip(a, a[1:]) if all(r0[q] == r1[q] for q in qs)]
        noise.append(statistics.pstdev(d) / 2 ** 0.5 if len(d) > 10 else 0.0)
    dq = 0.0
    with open(out, "w") as f:
        f.writelines(head)
        f.write(",".join(cols) + "\n")
        for ra, rb in zip(a, b):
            if ra[col["t"]] != rb[col["t"]]:
                sys.exit("ka_deviation: time stamps differ (%s vs %s): not the same seed" % (ra[col["t"]], rb[col["t"]]))
            dq = max(dq, max(abs(float(ra[q]) - float(rb[q])) for q in qs))
            r = list(ra)
            for k, s in zip(taus, noise):
                r[k] = repr(float(ra[k]) - float(rb[k]) + random.gauss(0.0, s * 2 ** 0.5))
            r[col["payload"]] = "0"
            f.write(",".join(r) + "\n")
    print("%s: %d samples; reading noise per joint %s; largest joint angle difference between the runs %.2g rad"
          % (out, len(a), " ".join("%.3g" % s for s in noise), dq))


main()
