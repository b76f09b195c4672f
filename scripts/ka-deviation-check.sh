#!/usr/bin/env bash
# KA-mDTW on the signal thesis §4.4-4.5 feeds it: the deviation a load causes (issue 6).
#
#   bash scripts/ka-deviation-check.sh [OUT_DIR]     (about 5 minutes)
#
# The thesis matches deviation signals - the current with the load minus the current of the same motion
# without it (§4.5.1; the empty run stands for an optimal model of the robot) - scaled by lever lengths.
# The benchmark suite's KA-mDTW part (docs/benchmarks.md) matches the joint torques themselves, in which
# the arm's own gravity and inertia dominate. This check records each robot's varying pick-and-place
# (reference with one place only, 40 calibration and 60 nominal cycles with every place) twice with the
# same seeds - with the part and without it (warpguard-sim --payload 0) - builds the deviation
# (tools/ka_deviation.py), calibrates an mDTW and a KA-mDTW profile on it and on the loaded torques, and
# reports for both signals how often each method matched the right phase (tools/ka_matching.py, the
# same windows and definition as the suite).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/ka-deviation}
bash scripts/install-deps.sh > /dev/null
bash scripts/build.sh > /dev/null
sim=build/samples/sim/warpguard-sim
wg=build/tools/warpguard
py=/usr/bin/python3

check_robot() {
  local robot=$1 seed=$2
  local dir="$out/$robot" r="samples/robots/$robot.json" t="samples/tasks/$robot-pick-and-place.json"
  mkdir -p "$dir"
  "$sim" identify --robot "$r" --out "$dir/points.csv" --noise-mm 0.05 --seed $((seed + 20)) > /dev/null
  "$wg" identify dh --points "$dir/points.csv" --out "$dir/model.json" > "$dir/identify.txt"
  /usr/bin/python3 tools/one_variant.py "$t" "$dir/one-variant.json"
  local part task cycles s
  for part in reference:4:one calibration:40:all nominal:60:all; do
    IFS=: read -r name cycles which <<< "$part"
    task=$t; [ "$which" = one ] && task="$dir/one-variant.json"
    s=$((seed + 21)); [ "$name" = calibration ] && s=$((seed + 22)); [ "$name" = nominal ] && s=$((seed + 23))
    "$sim" record --robot "$r" --task "$task" --cycles "$cycles" --seed $s --out "$dir/$name-loaded.csv" > /dev/null
    "$sim" record --robot "$r" --task "$task" --cycles "$cycles" --seed $s --payload 0 --out "$dir/$name-empty.csv" > /dev/null
    "$py" tools/ka_deviation.py "$dir/$name-loaded.csv" "$dir/$name-empty.csv" "$dir/$name-deviation.csv" $((s + 100)) > "$dir/$name-deviation.txt"
  done
  local signal method
  for signal in loaded deviation; do
    for method in mdtw ka-mdtw; do
      "$wg" calibrate --reference "$dir/reference-$signal.csv" --reference-cycles 2 --nominal "$dir/calibration-$signal.csv" \
        --method $method --model "$dir/model.json" --out "$dir/$signal-$method.json" > "$dir/$signal-$method.txt"
    done
    "$py" tools/ka_matching.py "$wg" "$dir/reference-$signal.csv" "$dir/nominal-$signal.csv" "$dir/$signal-mdtw.json" \
      "$dir/$signal-ka-mdtw.json" pick-and-place > "$dir/$signal-matching.json"
  done
}

check_robot ur5e-like 1000 &
check_robot irb120-like 2000 &
wait
check_robot vp6242-like 3000

"$py" - "$out" <<'PY'
import json, sys
out = sys.argv[1]
print("KA-mDTW on the load's deviation (thesis 4.5.1) and on the torques: right phase of windows 40 % and 80 %")
print("into the varying move, pick-and-place, reference with one place (files in %s)" % out)
print()
print("| robot | joint | scaled | deviation: KA-mDTW | deviation: mDTW | torque: KA-mDTW | torque: mDTW | deviation error KA-mDTW (N) | mDTW (Nm) | DTW on KA span (Nm) |")
print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
total = {"deviation": [0, 0, 0, 0, 0], "loaded": [0, 0, 0, 0, 0]}
for robot in ("ur5e-like", "irb120-like", "vp6242-like"):
    res = {s: json.load(open("%s/%s/%s-matching.json" % (out, robot, s))) for s in ("deviation", "loaded")}
    windows = len(res["deviation"]["windows"])
    for jd, jl in zip(res["deviation"]["joints"], res["loaded"]["joints"]):
        print("| %s | %d | %s | %d/%d | %d/%d | %d/%d | %d/%d | %.4g | %.4g | %.4g |" % (
            robot, jd["joint"], "yes" if jd["scaled"] else "no", jd["ka_right"], windows, jd["mdtw_right"], windows,
            jl["ka_right"], windows, jl["mdtw_right"], windows, jd["ka_cost"], jd["mdtw_cost"], jd["dtw_on_ka_span"]))
        for s, j in (("deviation", jd), ("loaded", jl)):
            if j["scaled"]:
                total[s][0] += j["ka_right"]
                total[s][1] += j["mdtw_right"]
                total[s][2] += windows
                total[s][3] += j["ka_only"]
                total[s][4] += j["mdtw_only"]
print()
for s, label in (("deviation", "the load's deviation"), ("loaded", "the torques")):
    ka, md, n, ka_only, md_only = total[s]
    print("- scaled joints, %s: right phase KA-mDTW %d/%d (%.1f %%), mDTW %d/%d (%.1f %%); KA-mDTW right where mDTW is wrong "
          "in %d windows, mDTW right where KA-mDTW is wrong in %d" % (label, ka, n, 100.0 * ka / max(n, 1), md, n,
                                                                       100.0 * md / max(n, 1), ka_only, md_only))
PY
