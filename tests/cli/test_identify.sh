#!/usr/bin/env bash
# Kinematic self-identification end to end, as a user runs it: the simulated controller (MuJoCo)
# runs the procedure, `warpguard identify dh` identifies, `warpguard identify check` compares the
# model with the simulator's forward kinematics over 1,000 random configurations; the TCP from six
# flange poses; `warpguard fk`.
#   test_identify.sh WARPGUARD WARPGUARD_SIM ROBOTS_DIR WORK_DIR
set -euo pipefail
wg=$1 sim=$2 robots=$3 work=$4
tools=$(cd "$(dirname "$0")/../../tools" && pwd)
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
# tools/snap_fit_poses.py on the identified model (issue 6): three poses for the snap-fit whose levers
# for a force along the tool's z axis differ; the levers recomputed here from `warpguard fk`.
task=$robots/../tasks/vp6242-like-assembly.json
python3 "$tools/snap_fit_poses.py" "$wg" exact.json "$robots/vp6242-like.json" "$task" lever-task.json 1 | tee lever.txt
python3 - "$wg" exact.json "$robots/vp6242-like.json" "$task" lever-task.json lever.txt <<'PY'
import json, re, subprocess, sys
wg, model, robot, task, out, printed = sys.argv[1:7]
old, new = json.load(open(task)), json.load(open(out))
steps = [s for s in new["steps"] if "move_variants" in s]
assert len(steps) == 1 and len(steps[0]["move_variants"]) == 3, steps
# Everything but the varying move's poses is the assembly task's.
assert [s for s in new["steps"] if "move_variants" not in s] == [s for s in old["steps"] if "move_variants" not in s]
limits = [j["limits"] for j in json.load(open(robot))["joints"]]
def fk(q):
    rows = subprocess.run([wg, "fk", "--model", model, "--q", ",".join(map(repr, q))], capture_output=True, text=True,
                          check=True).stdout.split("\n")
    return [float(x) for x in rows[0].split()], [[float(x) for x in r.split()] for r in rows[1:4]]
levers = []
for q in steps[0]["move_variants"]:
    assert all(lo < x < hi for x, (lo, hi) in zip(q, limits)), q
    p, r = fk(q)
    assert p[2] >= 0.1, p
    z, row = [r[0][2], r[1][2], r[2][2]], []
    for o in range(6):
        up, down = list(q), list(q)
        up[o] += 1e-4
        down[o] -= 1e-4
        row.append(sum((a - b) / 2e-4 * c for a, b, c in zip(fk(up)[0], fk(down)[0], z)))
    levers.append(row)
good = 0
for o in range(6):
    v = [l[o] for l in levers]
    a = sorted(abs(x) for x in v)
    if a[0] >= 0.05 and (min(v) > 0 or max(v) < 0) and a[0] < abs(v[0]) < a[2] and a[2] >= 1.5 * a[0]:
        good += 1
claimed = int(re.search(r"^(\d+) joints with levers", open(printed).read(), re.M).group(1))
assert good == claimed >= 1, (good, claimed, levers)
print("snap_fit_poses: %d joints' levers >= 1.5x apart, checked with fk" % good)
PY
# A task without a varying move is refused, naming the file.
python3 - "$robots/../tasks" <<'PY' > plain-task.json
import json, sys
t = json.load(open(sys.argv[1] + "/vp6242-like-assembly.json"))
for s in t["steps"]:
    if "move_variants" in s:
        s["move"] = s.pop("move_variants")[0]
print(json.dumps(t))
PY
if python3 "$tools/snap_fit_poses.py" "$wg" exact.json "$robots/vp6242-like.json" plain-task.json x.json 2> err.txt; then
  echo "snap_fit_poses accepted a task without move_variants"; exit 1
fi
grep -q "plain-task.json has no step with move_variants" err.txt

# The arm's own dynamics (issue 6): fitted on a dry run of the IRB120-like pick-and-place (no part), the
# deviation of a run with the part is the part's torque; the truth is the same run without the part
# (same seed: the same motion and reading noise). The IRB120-like reports Nm.
rt=$robots/irb120-like.json task=$robots/../tasks/irb120-like-pick-and-place.json
"$sim" record --robot "$rt" --task "$task" --cycles 8 --seed 71 --payload 0 --out dry.csv > /dev/null
"$sim" record --robot "$rt" --task "$task" --cycles 3 --seed 72 --out loaded.csv > /dev/null
"$sim" record --robot "$rt" --task "$task" --cycles 3 --seed 72 --payload 0 --out twin.csv > /dev/null
"$sim" identify --robot "$rt" --out irb-points.csv --noise-mm 0.05 --seed 5
"$wg" identify dh --points irb-points.csv --out irb.json > /dev/null
"$wg" identify dynamics --dry-run dry.csv --model irb.json --out arm.json | tee arm.txt
grep -q "one parameter set for all joints (Nm)" arm.txt
# The task turns the wrist with the base: the fit cannot tell joints 1 and 6 apart, and says so; with
# an excitation run (each joint alone, tools/excitation_task.py) it can, and the warning is gone.
grep -q "warning: joints 1 and 6 move together in every run (velocity correlation 1.000)" arm.txt
python3 "$tools/excitation_task.py" "$task" "$rt" excitation.json
python3 - excitation.json "$task" <<'PY'
import json, sys
exc, task = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
centre = [s["move"] for s in task["steps"] if "move" in s][0]
moves = [s["move"] for s in exc["steps"]]
# every other move is the centre; the others differ from it in exactly one joint, by 0.4 rad
assert all(m == centre for m in moves[0::2]), moves
for m in moves[1::2]:
    diff = [abs(a - b) for a, b in zip(m, centre)]
    assert sum(d > 0 for d in diff) == 1 and abs(max(diff) - 0.4) < 1e-12, (m, centre)
assert len(moves[1::2]) == 2 * len(centre), len(moves)
PY
"$sim" record --robot "$rt" --task excitation.json --cycles 3 --seed 73 --payload 0 --out excitation.csv > /dev/null
"$wg" identify dynamics --dry-run dry.csv --dry-run excitation.csv --model irb.json --out arm-excited.json > arm-excited.txt
if grep -q "move together" arm-excited.txt; then cat arm-excited.txt; echo "the excitation run left dependent joints"; exit 1; fi
if python3 "$tools/excitation_task.py" "$task" "$rt" x.json --amplitude 0 2> err.txt; then echo "excitation_task accepted amplitude 0"; exit 1; fi
grep -q "amplitude is 0 rad; expected > 0" err.txt
"$wg" deviation --arm arm.json loaded.csv --out deviation.csv --no-payload | tee deviation.txt
python3 - loaded.csv twin.csv deviation.csv <<'PY'
import math, sys
def read(path):
    rows = [l.rstrip("\n").split(",") for l in open(path) if not l.startswith("#")]
    return rows[0], rows[1:]
(cols, loaded), (_, twin), (dcols, dev) = read(sys.argv[1]), read(sys.argv[2]), read(sys.argv[3])
assert "payload" in cols and "payload" not in dcols, (cols, dcols)
for j in (2, 3):
    c, d = cols.index("tau%d" % j), dcols.index("tau%d" % j)
    truth = [float(a[c]) - float(b[c]) for a, b in zip(loaded, twin)]
    err = [float(x[d]) - t for x, t in zip(dev, truth)]
    rms = lambda v: math.sqrt(sum(x * x for x in v) / len(v))
    print("joint %d: the part's torque rms %.3f Nm, the deviation's error rms %.3f Nm" % (j, rms(truth), rms(err)))
    assert rms(err) < 0.25 * rms(truth)
PY
# As the detector computes it (--causal: derivatives from past samples only), with the estimator
# identify dynamics chose on the dry run: the error stays close to the offline one's.
grep -q "in operation (no look-ahead): velocities and accelerations from a polynomial of order" arm.txt
"$wg" deviation --arm arm.json loaded.csv --out causal.csv --no-payload --causal > /dev/null
python3 - loaded.csv twin.csv deviation.csv causal.csv <<'PY'
import math, sys
def read(path):
    rows = [l.rstrip("\n").split(",") for l in open(path) if not l.startswith("#")]
    return rows[0], rows[1:]
(cols, loaded), (_, twin), (dcols, dev), (ccols, causal) = (read(p) for p in sys.argv[1:5])
rms = lambda v: math.sqrt(sum(x * x for x in v) / len(v))
for j in (2, 3):
    c, d = cols.index("tau%d" % j), dcols.index("tau%d" % j)
    truth = [float(a[c]) - float(b[c]) for a, b in zip(loaded, twin)]
    offline = rms([float(x[d]) - t for x, t in zip(dev, truth)])
    online = rms([float(x[d]) - t for x, t in zip(causal, truth)])
    print("joint %d: the deviation's error rms offline %.3f Nm, causal %.3f Nm" % (j, offline, online))
    assert online < 1.2 * offline and online < 0.25 * rms(truth)
PY
# A profile on the deviation: calibrate --arm keeps the arm model in the profile, and evaluate feeds
# it the recorded torques (the published detector: 3 nominal cycles are enough for it).
"$sim" record --robot "$rt" --task "$task" --cycles 3 --seed 73 --out loaded2.csv > /dev/null
"$wg" calibrate --reference loaded.csv --reference-cycles 2 --nominal loaded2.csv --detector published --arm arm.json \
  --out arm-profile.json > calibrate.txt
grep -q "matched signal: the deviation from the arm model arm.json" calibrate.txt
python3 -c 'import json, sys; p = json.load(open(sys.argv[1])); assert p["arm_model"]["format"] == "warpguard-arm-dynamics"' arm-profile.json
"$wg" evaluate --profile arm-profile.json loaded2.csv --out arm-evaluation.json > /dev/null
python3 -c 'import json, sys; e = json.load(open(sys.argv[1])); assert e["totals"]["clean_cycles"] >= 2, e["totals"]' arm-evaluation.json
# Refused with the offending value named: a signal in another unit, a file that is not an arm model.
sed 's/^# unit: Nm/# unit: percent/' loaded.csv > percent.csv
if "$wg" deviation --arm arm.json percent.csv --out x.csv 2> err.txt; then echo "deviation accepted percent for an Nm model"; exit 1; fi
grep -q "the recording's signal is 'torque' in 'percent'; the arm model was fitted to a torque in 'Nm'" err.txt
if "$wg" deviation --arm irb.json loaded.csv --out x.csv 2> err.txt; then echo "deviation accepted a kinematic model as an arm model"; exit 1; fi
grep -q "not an arm model" err.txt
if "$wg" calibrate --reference percent.csv --reference-cycles 2 --nominal percent.csv --detector published --arm arm.json \
  --out x.json 2> err.txt; then echo "calibrate accepted percent for an Nm arm model"; exit 1; fi
grep -q "percent.csv: the recording's signal is 'torque' in 'percent'" err.txt

# Without a dry run, the default detector with the kinematic model fits the arm model on the nominal
# recordings themselves, each less its declared part; --no-arm matches the signal as recorded.
"$sim" record --robot "$rt" --task "$task" --cycles 11 --seed 74 --out nominal11.csv > /dev/null
"$wg" calibrate --reference loaded.csv --reference-cycles 2 --nominal nominal11.csv --model irb.json --out own-arm.json > own-arm.txt
grep -q "matched signal: the deviation from the arm model fitted on [0-9]* samples of the nominal recordings (each recording less its declared payload's torque" own-arm.txt
"$wg" calibrate --reference loaded.csv --reference-cycles 2 --nominal nominal11.csv --model irb.json --no-arm --out no-arm.json > no-arm.txt
if grep -q "matched signal" no-arm.txt; then cat no-arm.txt; echo "--no-arm still matched a deviation"; exit 1; fi
python3 -c 'import json, sys; assert "arm_model" in json.load(open(sys.argv[1])) and "arm_model" not in json.load(open(sys.argv[2]))' \
  own-arm.json no-arm.json
if "$wg" calibrate --reference loaded.csv --nominal nominal11.csv --model irb.json --no-arm --arm arm.json --out x.json 2> err.txt; then
  echo "calibrate accepted --no-arm with --arm"; exit 1
fi
grep -q "excludes" err.txt
# The default takes the declared part's torque off with the payload model; --keep-payload matches it
# as part of the signal, as KA-mDTW always does (its lever lengths scale the part's force), and
# takes off only a part heavier or lighter than the reference's.
grep -q "declared payload: fitted" own-arm.txt || { cat own-arm.txt; echo "the default fitted no payload model"; exit 1; }
"$wg" calibrate --reference loaded.csv --reference-cycles 2 --nominal nominal11.csv --model irb.json --keep-payload --out kept.json > kept.txt
grep -q "declared payload: not taken off (--keep-payload)" kept.txt || { cat kept.txt; echo "--keep-payload took the part off"; exit 1; }
"$wg" calibrate --reference loaded.csv --reference-cycles 2 --nominal nominal11.csv --model irb.json --method ka-mdtw --out ka.json > ka.txt
grep -q "declared payload: not taken off: KA-mDTW" ka.txt || { cat ka.txt; echo "KA-mDTW took the part off"; exit 1; }
grep -q "matched signal: the deviation from the arm model fitted on" ka.txt || { cat ka.txt; echo "KA-mDTW fitted no arm model"; exit 1; }
# Both still model a part of another mass than the reference's, by its difference only.
grep -q "taken off by its difference" kept.txt || { cat kept.txt; echo "--keep-payload models no heavier part"; exit 1; }
grep -q "taken off by its difference" ka.txt || { cat ka.txt; echo "KA-mDTW models no heavier part"; exit 1; }
python3 -c 'import json, sys; p = [json.load(open(f))["payload_model"] for f in sys.argv[1:]]; assert [q["beyond_reference_part"] for q in p] == [False, True, True], p' \
  own-arm.json kept.json ka.json

echo "identification CLI: all checks passed"
