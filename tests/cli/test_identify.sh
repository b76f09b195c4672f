#!/usr/bin/env bash
# Kinematic self-identification end to end, as a user runs it: the simulated controller (MuJoCo)
# runs the procedure, `warpguard identify dh` identifies, `warpguard identify check` compares the
# model with the simulator's forward kinematics over 1,000 random configurations; the TCP from six
# flange poses; `warpguard fk`.
#   test_identify.sh WARPGUARD WARPGUARD_SIM ROBOTS_DIR WORK_DIR
set -euo pipefail
wg=$1 sim=$2 robots=$3 work=$4
rm -rf "$work" && mkdir -p "$work" && cd "$work"

for robot in ur5e-like irb120-like vp6242-like; do
  "$sim" identify --robot "$robots/$robot.json" --out exact.csv --check-out check.csv --check-count 1000
  "$wg" identify dh --points exact.csv --out exact.json > exact.txt
  "$wg" identify check --model exact.json --points check.csv --max-mm 0.01 | tee -a summary.txt
  "$sim" identify --robot "$robots/$robot.json" --out noisy.csv --noise-mm 0.05 --seed 3
  "$wg" identify dh --points noisy.csv --out noisy.json > noisy.txt
  "$wg" identify check --model noisy.json --points check.csv --max-mm 0.5 | tee -a summary.txt
done

# Table 5: the VP-6242 measured with joint 3 at 90 deg, three points per joint, the flange 70 mm
# beyond the wrist centre; the tracked point 100 mm past the flange and 50 mm off the last axis.
"$sim" identify --robot "$robots/vp6242-like.json" --out table5.csv --points-per-joint 3 \
  --home 0,0,1.5707963267948966,0,0,0 --tracked-point 0.05,0,0.02
"$wg" identify dh --points table5.csv --out table5.json --flange-offset 0.07 | tee table5.txt
python3 - table5.json <<'PY'
import json, math, sys
m = json.load(open(sys.argv[1]))
a = [0, 210, 75, 0, 0, 0]; d = [280, 0, 0, 210, 0, 70]
alpha = [90, 0, -90, 90, 90, 0]; theta = [180, 90, 0, 0, 180, 0]
for k, j in enumerate(m["joints"]):
    got = (j["a"] * 1e3, j["d"] * 1e3, math.degrees(j["alpha"]), math.degrees(j["theta"]))
    want = (a[k], d[k], alpha[k], theta[k])
    for g, w, name in zip(got, want, ("a", "d", "alpha", "theta")):
        diff = (g - w + 180) % 360 - 180 if name == "theta" else g - w
        assert abs(diff) < 1e-6, f"joint {k+1} {name}: {g} != Table 5's {w}"
assert abs(m["identification"]["axes"][2]["dh_at_home"]["theta_deg"] - 90) < 1e-6, "joint 3 not measured at 90 deg"
print("Table 5 reproduced")
PY

# TCP: six flange poses with the tip at one point, 0.05 mm noise on the flange positions.
python3 - > poses.csv <<'PY'
import math, random
random.seed(4)
def rot(rx, ry, rz):  # Rz Ry Rx
    cx, sx, cy, sy, cz, sz = math.cos(rx), math.sin(rx), math.cos(ry), math.sin(ry), math.cos(rz), math.sin(rz)
    return [[cz*cy, cz*sy*sx - sz*cx, cz*sy*cx + sz*sx],
            [sz*cy, sz*sy*sx + cz*cx, sz*sy*cx - cz*sx],
            [-sy, cy*sx, cy*cx]]
tcp = (0.012, -0.021, 0.153); point = (0.45, 0.12, 0.08)
print("x,y,z,rx,ry,rz")
for k in range(6):
    a = (math.pi + random.uniform(-0.6, 0.6), random.uniform(-0.6, 0.6), random.uniform(-0.6, 0.6))
    r = rot(*a)
    p = [point[i] - sum(r[i][j] * tcp[j] for j in range(3)) + random.gauss(0, 0.05e-3) for i in range(3)]
    print(",".join(f"{v:.9f}" for v in (*p, *a)))
PY
"$wg" identify tcp --poses poses.csv --out tool.json | tee tcp.txt
python3 - tool.json <<'PY'
import json, math, sys
t = json.load(open(sys.argv[1]))
err = math.dist(t["translation"], (0.012, -0.021, 0.153))
grid = math.dist(t["identification"]["grid_search"]["tcp_m"], (0.012, -0.021, 0.153))
print(f"TCP error: least squares {err*1e3:.4f} mm, grid search {grid*1e3:.4f} mm")
assert err < 0.1e-3 and grid < 0.1e-3
PY

# fk with the identified model and tool: at home the tool frame is the model's flange plus the TCP.
"$wg" fk --model exact.json --tool tool.json --q 0,0,0.7155,0,0,0 > fk.txt
test "$(wc -l < fk.txt)" -eq 4
# Bad input is refused with the offending value named.
if "$wg" fk --model exact.json --q 0,0,abc,0,0,0 2> err.txt; then echo "fk accepted a bad --q"; exit 1; fi
grep -q "'abc' is not a number" err.txt
printf 'joint,q1,x,y,z\n1,0.1,0.2\n' > bad.csv
if "$wg" identify dh --points bad.csv --out bad.json 2> err.txt; then echo "identify accepted a short row"; exit 1; fi
grep -q "line 2: 3 fields, expected 5" err.txt
echo "identification CLI: all checks passed"
