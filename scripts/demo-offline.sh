#!/usr/bin/env bash
# The offline demo (scripts/demo.sh is the live one): installs dependencies, builds everything and runs WarpGuard's main job on the
# built-in simulated cell (MuJoCo, a UR5e-like arm doing pick-and-place with a 1.5 kg part placed
# at three changing places). Offline: record a reference and
# nominal cycles, calibrate the published detector, evaluate a run with injected collisions, and
# compare with the controller-side envelope method of thesis §3.1.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh > /dev/null
out=${WARPGUARD_DEMO_DIR:-build/demo}
mkdir -p "$out"
sim=build/samples/sim/warpguard-sim
wg=build/tools/warpguard
robot=samples/robots/ur5e-like.json
task=samples/tasks/ur5e-like-pick-and-place.json

echo "== 1. The simulated cell records the robot's task (background task at ~250 Hz, irregular)"
"$sim" record --robot "$robot" --task "$task" --cycles 7 --seed 101 --out "$out/reference.csv"
"$sim" record --robot "$robot" --task "$task" --cycles 30 --seed 102 --out "$out/nominal.csv"
"$sim" record --robot "$robot" --task "$task" --cycles 40 --seed 103 --contacts 30 --min-force 20 --max-force 300 \
  --out "$out/collisions.csv"

echo; echo "== 2. Calibrate: reference = 3 complete cycles (one per place pose), thresholds from the nominal run (thesis §3.2.3)"
"$wg" calibrate --reference "$out/reference.csv" --reference-cycles 3 --nominal "$out/nominal.csv" --out "$out/profile.json"

echo; echo "== 3. Evaluate the published mDTW detector on the nominal run and on the run with collisions"
"$wg" evaluate --profile "$out/profile.json" "$out/nominal.csv" "$out/collisions.csv" --out "$out/evaluation.json"

echo; echo "== 4. The controller-side envelope method (thesis §3.1) on the same runs"
"$wg" envelope "$out/reference.csv" --out "$out/envelope.json"
"$wg" evaluate --envelope "$out/envelope.json" "$out/nominal.csv" "$out/collisions.csv" --out "$out/envelope-evaluation.json"

echo; echo "== 5. One window of the run, as the detector matched it"
"$wg" match --profile "$out/profile.json" --run "$out/collisions.csv" --index 3000 --joint 2
echo
echo "Every stop event and every collision: $out/evaluation.json and $out/envelope-evaluation.json."
echo "The published thresholds (3 sigma, 1.2 x max) stop far too often on clean cycles; issue 8 replaces them."
