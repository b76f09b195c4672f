#!/usr/bin/env bash
# Checks WarpGuard on a robot and task it was not tuned on, exactly as a user would set it up:
# records on the simulated cell like the benchmark suite does (reference, calibration cycles,
# held-out nominal cycles, collision cycles), identifies the robot's kinematics with the procedure
# on the simulated controller, calibrates with the same `warpguard calibrate` command as the suite
# (the reference cycles chosen automatically), evaluates, and prints false stops, detections and delays
# (beside them the model-based residual's, a reference method, where the profile has an arm model).
#
#   bash scripts/held-out-check.sh [--reuse] [--variants] [--bound] [--arm] [--turns [--reported]] ROBOT.json TASK.json [OUT_DIR]
#   (about 20 minutes; --variants: about 10 more; --bound: about 1 more; --arm: about 10 more;
#   --turns: about 3 more)
#
# The robots and tasks in samples/held-out/ are for this: see samples/held-out/README.md.
# --reuse keeps recordings already in OUT_DIR and only identifies, calibrates and evaluates again.
# --variants also runs the task at speed override 80 % and with friction drift +30 % (100 nominal
# and 50 collision cycles each), judged by the same profile: disturbances calibration never saw.
# --bound also records the collision run's twin (the same command and seed without the contacts)
# and prints the noise-limited reference for the delay beside the default detector
# (tools/delay_bound.py, as scripts/delay-bound-check.sh does for the suite).
# --arm also records a dry run of the task (no part, presses of 1e-9 N; 20 cycles), fits the arm's own
# dynamics on it (warpguard identify dynamics), calibrates the default detector again on the deviation
# from them (warpguard calibrate --arm) and evaluates the same runs with it (and the --variants runs).
# --turns also runs the task with the speed override turned every 12 s (scripts/override-turns-check.sh
# on this check's profiles, 100 nominal and 51 collision cycles, files in OUT_DIR/turns); with
# --reported the robot reports its override with every sample (files in OUT_DIR/turns-reported).
set -euo pipefail
cd "$(dirname "$0")/.."
reuse=0 variants=0 bound=0 arm=0 turns=0 reported=0
while [ "${1:-}" = "--reuse" ] || [ "${1:-}" = "--variants" ] || [ "${1:-}" = "--bound" ] || [ "${1:-}" = "--arm" ] ||
      [ "${1:-}" = "--turns" ] || [ "${1:-}" = "--reported" ]; do
  [ "$1" = "--reuse" ] && reuse=1
  [ "$1" = "--variants" ] && variants=1
  [ "$1" = "--bound" ] && bound=1
  [ "$1" = "--arm" ] && arm=1
  [ "$1" = "--turns" ] && turns=1
  [ "$1" = "--reported" ] && reported=1
  shift
done
if [ $# -lt 2 ]; then
  echo "usage: bash scripts/held-out-check.sh [--reuse] [--variants] [--bound] [--arm] [--turns [--reported]] ROBOT.json TASK.json [OUT_DIR]" >&2
  exit 2
fi
robot=$1 task=$2
for f in "$robot" "$task"; do
  [ -s "$f" ] || { echo "held-out-check: '$f' is not a readable file (expected a robot description and a task program)" >&2; exit 2; }
done
name=$(basename "$robot" .json)
out=${3:-build/held-out/$name}
bash scripts/install-deps.sh > /dev/null
bash scripts/build.sh > /dev/null
sim=build/samples/sim/warpguard-sim
wg=build/tools/warpguard
mkdir -p "$out"

. scripts/record-helper.sh
recording() { record "$1" --robot "$robot" --task "$task" "${@:2}" > /dev/null; }

# The same counts and seeds' pattern as the suite's pick-and-place runs (scripts/benchmark-suite.sh).
seed=7000
recording "$out/reference.csv" --cycles 7 --seed $((seed + 1)) &
recording "$out/calibration.csv" --cycles 100 --seed $((seed + 2)) &
wait
recording "$out/nominal.csv" --cycles 200 --seed $((seed + 3)) &
recording "$out/collisions.csv" --cycles 101 --seed $((seed + 4)) --contacts 100 &
wait
"$sim" identify --robot "$robot" --out "$out/points.csv" --noise-mm 0.05 --seed $((seed + 20)) > /dev/null
"$wg" identify dh --points "$out/points.csv" --out "$out/model.json" > "$out/identify.txt"
"$wg" calibrate --reference "$out/reference.csv" --nominal "$out/calibration.csv" --detector phase-aware \
  --model "$out/model.json" --out "$out/profile-phase.json" > "$out/profile-phase.txt"
"$wg" calibrate --reference "$out/reference.csv" --nominal "$out/calibration.csv" --detector published \
  --out "$out/profile.json" > "$out/profile.txt"
for variant in nominal collisions; do
  "$wg" evaluate --profile "$out/profile-phase.json" "$out/$variant.csv" --out "$out/$variant.phase.evaluation.json" > /dev/null &
  "$wg" evaluate --profile "$out/profile.json" "$out/$variant.csv" --out "$out/$variant.evaluation.json" > /dev/null &
  wait
done

echo "held-out check: $robot, $task (files in $out)"
grep -i -E "reference|warning" "$out/profile-phase.txt" | head -5 || true
/usr/bin/python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
for label, suffix in (("default (phase-aware)", ".phase"), ("published", "")):
    nom = json.load(open(f"{out}/nominal{suffix}.evaluation.json"))["totals"]
    col = {r["rule"]: r for r in json.load(open(f"{out}/collisions{suffix}.evaluation.json"))["totals"]["by_rule"]}["combined"]
    per_k = 1000.0 * nom["false_stop_events"] / max(nom["clean_cycles"], 1)
    def name(b):
        return f">= {b['low']:g} N" if b["high"] is None else f"{b['low']:g}-{b['high']:g} N"
    bins = ", ".join(f"{name(b)} {b['detected']}/{b['collisions']}" for b in col["by_peak_force"])
    print(f"{label}: false stop events {nom['false_stop_events']} in {nom['clean_cycles']} nominal cycles "
          f"({per_k:.1f} per 1,000); collisions detected {col['detected']}/{col['collisions']} ({bins})")
PY
echo "default detector, by kind of contact (tools/collision_delays.py):"
/usr/bin/python3 tools/collision_delays.py "$out/collisions.phase.evaluation.json"

# The model-based residual for comparison (a reference method, docs/algorithms.md), where the default
# profile has an arm model (a signed torque): its own arm and payload models against a static band.
if /usr/bin/python3 -c "import json, sys; sys.exit(0 if json.load(open(sys.argv[1])).get('arm_model') else 1)" "$out/profile-phase.json"; then
  "$wg" residual "$out/calibration.csv" --profile "$out/profile-phase.json" --out "$out/residual.json" > "$out/residual.txt"
  for variant in nominal collisions; do
    "$wg" evaluate --residual "$out/residual.json" "$out/$variant.csv" --out "$out/$variant.residual.evaluation.json" > /dev/null
  done
  /usr/bin/python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
nom = json.load(open(f"{out}/nominal.residual.evaluation.json"))["totals"]
col = {r["rule"]: r for r in json.load(open(f"{out}/collisions.residual.evaluation.json"))["totals"]["by_rule"]}["combined"]
big = [b for b in col["by_peak_force"] if b["low"] >= 50]
ms = lambda v: "-" if v is None else f"{1000 * v:.0f} ms"
print(f"model-based residual (reference): false stop events {nom['false_stop_events']} in {nom['clean_cycles']} nominal cycles; "
      f"collisions detected {col['detected']}/{col['collisions']}, >= 50 N {sum(b['detected'] for b in big)}/"
      f"{sum(b['collisions'] for b in big)}; delay median {ms(col['delay_median'])} p95 {ms(col['delay_p95'])}")
PY
else
  echo "model-based residual (reference): not run, the profile has no arm model (the signal is not a signed torque)"
fi

if [ "$variants" = 1 ]; then
  recording "$out/override80-nominal.csv" --cycles 100 --seed $((seed + 13)) --override 0.8 &
  recording "$out/drift30-nominal.csv" --cycles 100 --seed $((seed + 13)) --drift 0.3 &
  wait
  recording "$out/override80-collisions.csv" --cycles 51 --seed $((seed + 14)) --override 0.8 --contacts 50 &
  recording "$out/drift30-collisions.csv" --cycles 51 --seed $((seed + 14)) --drift 0.3 --contacts 50 &
  wait
  for variant in override80 drift30; do
    "$wg" evaluate --profile "$out/profile-phase.json" "$out/$variant-nominal.csv" --out "$out/$variant-nominal.phase.evaluation.json" > /dev/null &
    "$wg" evaluate --profile "$out/profile-phase.json" "$out/$variant-collisions.csv" --out "$out/$variant-collisions.phase.evaluation.json" > /dev/null &
    wait
  done
  /usr/bin/python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
for variant, label in (("override80", "speed override 80 %"), ("drift30", "friction drift +30 %")):
    nom = json.load(open(f"{out}/{variant}-nominal.phase.evaluation.json"))["totals"]
    col = json.load(open(f"{out}/{variant}-collisions.phase.evaluation.json"))["runs"][0]["summary"]
    big = [c for c in col["collision_details"] if c["peak_force"] >= 50]
    print(f"default (phase-aware), {label}: false stop events {nom['false_stop_events']} in {nom['clean_cycles']} nominal "
          f"cycles; collisions >= 50 N detected {sum(c['detected'] for c in big)}/{len(big)}, all {col['detected']}/{col['collisions']}")
PY
fi

if [ "$arm" = 1 ]; then
  /usr/bin/python3 tools/dry_task.py "$task" "$out/dry-task.json"
  record "$out/dry.csv" --robot "$robot" --task "$out/dry-task.json" --cycles 20 --seed $((seed + 30)) --payload 0 > /dev/null
  "$wg" identify dynamics --dry-run "$out/dry.csv" --model "$out/model.json" --out "$out/arm.json" > "$out/arm.txt"
  "$wg" calibrate --reference "$out/reference.csv" --nominal "$out/calibration.csv" --detector phase-aware \
    --model "$out/model.json" --arm "$out/arm.json" --out "$out/profile-arm.json" > "$out/profile-arm.txt"
  runs="nominal collisions"
  [ "$variants" = 1 ] && runs="$runs override80-nominal override80-collisions drift30-nominal drift30-collisions"
  for variant in $runs; do
    "$wg" evaluate --profile "$out/profile-arm.json" "$out/$variant.csv" --out "$out/$variant.arm.evaluation.json" > /dev/null
  done
  /usr/bin/python3 - "$out" "$runs" <<'PY'
import json, os, sys
out, runs = sys.argv[1], sys.argv[2].split()
for prefix in sorted({r[:-len("nominal")] for r in runs if r.endswith("nominal")}):
    for label, suffix in (("torque", "phase"), ("arm deviation", "arm")):
        nom = json.load(open(f"{out}/{prefix}nominal.{suffix}.evaluation.json"))["totals"]
        col = {r["rule"]: r for r in json.load(open(f"{out}/{prefix}collisions.{suffix}.evaluation.json"))["totals"]["by_rule"]}["combined"]
        big = [b for b in col["by_peak_force"] if b["low"] >= 50]
        ms = lambda v: "-" if v is None else f"{1000 * v:.0f} ms"
        print(f"default (phase-aware) on the {label}, {prefix or 'nominal-'}: false stop events {nom['false_stop_events']} in "
              f"{nom['clean_cycles']} nominal cycles; collisions >= 50 N detected {sum(b['detected'] for b in big)}/"
              f"{sum(b['collisions'] for b in big)}, all {col['detected']}/{col['collisions']}, delay median {ms(col['delay_median'])} "
              f"p95 {ms(col['delay_p95'])}")
PY
fi

if [ "$bound" = 1 ]; then
  python_module numpy python3-numpy
  # The twin repeats the collision run's recording above without --contacts (keep them the same).
  recording "$out/collisions.twin.csv" --cycles 101 --seed $((seed + 4))
  /usr/bin/python3 tools/delay_bound.py "$out/collisions.csv" "$out/collisions.twin.csv" \
    "$out/collisions.phase.evaluation.json" > "$out/collisions.delay-bound.json"
  /usr/bin/python3 - "$out/collisions.delay-bound.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
def cell(who):
    a, i, p = d["all"][who], d["impacts"][who], d["pushes"][who]
    ms = lambda v: "-" if v is None else f"{v:.0f} ms"
    return (f"{a['detected']}/{d['all']['contacts']} detected, >= 50 N {a['detected_ge50']}/{d['all']['contacts_ge50']}, "
            f"median {ms(a['median_ms'])} (impacts {ms(i['median_ms'])}, pushes {ms(p['median_ms'])})")
print(f"delay bound (an ideal detector that knows the twin, WarpGuard's rules; level {d['level']:.2f} sd, "
      f"CUSUM over {d['cusum_reference']:g} sd to {d['cusum_limit']:.1f} sd-samples): {cell('bound')}")
print(f"default detector on the same contacts: {cell('warpguard')}")
PY
fi

if [ "$turns" = 1 ] && [ "$reported" = 1 ]; then
  bash scripts/override-turns-check.sh --reported --seed $((seed + 17)) "$out" "$robot" "$task" "$out/turns-reported" |
    grep -v -E "^$out/turns-reported/|^peak contact"
elif [ "$turns" = 1 ]; then
  bash scripts/override-turns-check.sh --seed $((seed + 17)) "$out" "$robot" "$task" "$out/turns" | grep -v -E "^$out/turns/|^peak contact"
fi
