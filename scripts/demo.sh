#!/usr/bin/env bash
# README demo command: installs dependencies, builds everything and runs WarpGuard's main job on a
# simulated robot. Until the daemon and the MuJoCo cell exist (issues 3 and 5) this is the offline
# flow on the analytic planar arm: record a reference and nominal cycles, calibrate, then evaluate a
# run with injected collisions, and compare with the controller-side envelope method of §3.1.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh > /dev/null
out=${WARPGUARD_DEMO_DIR:-build/demo}
mkdir -p "$out"
arm=build/samples/planar_arm/warpguard-planar-arm
wg=build/tools/warpguard

echo "== 1. Recordings of the robot's task (analytic planar 3-link arm, 125 Hz irregular sampling)"
"$arm" --out "$out/reference.csv" --cycles 4 --seed 101
"$arm" --out "$out/nominal.csv" --cycles 30 --seed 102
"$arm" --out "$out/collisions.csv" --cycles 40 --seed 103 --collisions 30 --min-force 20 --max-force 300

echo; echo "== 2. Calibrate: reference = 2 complete cycles, thresholds from the held-out nominal cycles (thesis §3.2.3)"
"$wg" calibrate --reference "$out/reference.csv" --nominal "$out/nominal.csv" --out "$out/profile.json"

echo; echo "== 3. Evaluate the published mDTW detector on the nominal run and the run with collisions"
"$wg" evaluate --profile "$out/profile.json" "$out/nominal.csv" "$out/collisions.csv" --out "$out/evaluation.json"

echo; echo "== 4. The controller-side envelope method (thesis §3.1) on the same runs"
"$wg" envelope "$out/reference.csv" --out "$out/envelope.json"
"$wg" evaluate --envelope "$out/envelope.json" "$out/nominal.csv" "$out/collisions.csv" --out "$out/envelope-evaluation.json"

echo; echo "== 5. One window of the run, as the detector matched it"
"$wg" match --profile "$out/profile.json" --run "$out/collisions.csv" --index 1200 --joint 2
echo
echo "Results: $out/evaluation.json and $out/envelope-evaluation.json (every stop event, every collision)."
