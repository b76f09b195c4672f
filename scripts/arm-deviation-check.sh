#!/usr/bin/env bash
# The default (phase-aware) detector on the deviation from the arm's own dynamics fitted on a dry run
# of the task, beside the suite's default profile (since 2026-11-27 itself the deviation from an arm
# model fitted on the calibration cycles), on the benchmark suite's recordings (issues 6 and 8).
#
#   bash scripts/arm-deviation-check.sh [--reuse] [--excitation] [SUITE_DIR]
#     (about 20 minutes after the suite; --reuse keeps the dry runs; --excitation fits each arm model
#      on an excitation run too and writes to SUITE_DIR/ROBOT/arm-excitation/)
#
# Needs the suite's recordings and evaluations (bash scripts/benchmark-suite.sh; SUITE_DIR defaults to
# build/benchmarks). Per robot it records a dry run of each task - the same program with no part
# (warpguard-sim --payload 0) and, for the assembly, presses of 1e-9 N (the simulator refuses 0) -
# 20 cycles with its own seed (with --excitation also an excitation run, tools/excitation_task.py:
# every joint alone from the task's pose, 3 cycles), fits the arm model on it (warpguard identify
# dynamics, with the kinematic model the suite identified), calibrates the default detector again with it on the same
# reference and calibration cycles (warpguard calibrate --arm), evaluates every variant the suite
# evaluates, and prints both side by side: false stop events per 1,000 nominal cycles, collisions
# >= 50 N detected, all detected, delay median / p95. Files: SUITE_DIR/ROBOT/arm/.
set -euo pipefail
cd "$(dirname "$0")/.."
reuse=0 excitation=0
while [ "${1:-}" = --reuse ] || [ "${1:-}" = --excitation ]; do
  [ "$1" = --reuse ] && reuse=1
  [ "$1" = --excitation ] && excitation=1
  shift
done
armdir=arm
[ "$excitation" = 1 ] && armdir=arm-excitation
suite=${1:-build/benchmarks}
for robot in ur5e-like irb120-like vp6242-like; do
  [ -s "$suite/$robot/profile-phase.json" ] || { echo "arm-deviation-check: $suite/$robot has no suite results; run scripts/benchmark-suite.sh first" >&2; exit 2; }
done
bash scripts/install-deps.sh > /dev/null
bash scripts/build.sh > /dev/null
sim=build/samples/sim/warpguard-sim
wg=build/tools/warpguard
. scripts/record-helper.sh

check_robot() {
  local robot=$1 seed=$2
  local src="$suite/$robot" dir="$suite/$robot/$armdir" r="samples/robots/$robot.json"
  mkdir -p "$dir"
  local task t p variants
  for task in pick-and-place assembly; do
    t="samples/tasks/$robot-$task.json" p="" variants="nominal collisions override70-nominal override70-collisions drift30-nominal drift30-collisions payload2x-nominal payload2x-collisions"
    if [ "$task" = assembly ]; then
      p="assembly-" variants="assembly-nominal assembly-collisions"
      /usr/bin/python3 tools/dry_task.py "$t" "$dir/assembly-no-press.json"
      t="$dir/assembly-no-press.json"
    fi
    record "$dir/${p}dry.csv" --robot "$r" --task "$t" --cycles 20 --seed $((seed + 30)) --payload 0
    local runs=(--dry-run "$dir/${p}dry.csv")
    if [ "$excitation" = 1 ]; then
      # The excitation run: every joint alone, out and back, from the task's pose (the task turns
      # the wrist with the base, so its dry run alone cannot tell their inertias apart).
      /usr/bin/python3 tools/excitation_task.py "samples/tasks/$robot-$task.json" "$r" "$dir/${p}excitation.json"
      record "$dir/${p}excitation.csv" --robot "$r" --task "$dir/${p}excitation.json" --cycles 3 --seed $((seed + 40)) --payload 0
      runs+=(--dry-run "$dir/${p}excitation.csv")
    fi
    "$wg" identify dynamics "${runs[@]}" --model "$src/model.json" --out "$dir/${p}arm.json" > "$dir/${p}arm.txt"
    "$wg" calibrate --reference "$src/${p}reference.csv" --reference-cycles 3 --nominal "$src/${p}calibration.csv" --detector phase-aware \
      --model "$src/model.json" --arm "$dir/${p}arm.json" --out "$dir/${p}profile-phase.json" > "$dir/${p}profile-phase.txt"
    for v in $variants; do
      "$wg" evaluate --profile "$dir/${p}profile-phase.json" "$src/$v.csv" --out "$dir/$v.phase.evaluation.json" > /dev/null
    done
  done
}

check_robot ur5e-like 1000 > "$suite/ur5e-like-arm.log" 2>&1 &
check_robot irb120-like 2000 > "$suite/irb120-like-arm.log" 2>&1 &
wait
check_robot vp6242-like 3000 > "$suite/vp6242-like-arm.log" 2>&1
/usr/bin/python3 - "$suite" "$armdir" <<'PY'
import json, os, sys
sys.path.insert(0, "tools")
import benchmark_report as br
suite, armdir = sys.argv[1], sys.argv[2]
print("Default detector as the suite calibrates it (profile-phase.json: since 2026-11-27 the deviation from an arm model fitted on the calibration cycles) and on the deviation from the dry-run arm model (%s/); files in %s" % (armdir, suite))
print()
print("| robot | variant | signal | false stops / 1,000 cycles | detected >= 50 N | detected, all | delay median / p95 | margin | CUSUM limit |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|")
for robot in ("ur5e-like", "irb120-like", "vp6242-like"):
    for variant, p in (("nominal", ""), ("override 70 %", "override70-"), ("drift +30 %", "drift30-"), ("payload 2x", "payload2x-"),
                       ("contact task", "assembly-")):
        nominal = "%snominal" % p
        collisions = "%scollisions" % p
        profile = "assembly-profile-phase.json" if p == "assembly-" else "profile-phase.json"
        for signal, d in (("suite default", "%s/%s" % (suite, robot)), ("dry-run arm model", "%s/%s/%s" % (suite, robot, armdir))):
            nom = json.load(open("%s/%s.phase.evaluation.json" % (d, nominal)))["totals"]
            comb = br.rules(json.load(open("%s/%s.phase.evaluation.json" % (d, collisions)))["totals"])["combined"]
            phase = json.load(open("%s/%s" % (d, profile)))["phase_aware"]
            big = [b for b in comb["by_peak_force"] if b["low"] >= 50]
            bd, bc = sum(b["detected"] for b in big), sum(b["collisions"] for b in big)
            print("| %s | %s | %s | %.0f | %s (%d/%d) | %s | %s / %s | %.3f | %.3f |" % (
                robot, variant, signal, br.per_thousand(nom), br.pct(bd, bc), bd, bc, br.pct(comb["detected"], comb["collisions"]),
                br.ms(comb["delay_median"]), br.ms(comb["delay_p95"]), phase["margin"], phase["cusum_limit"]))
PY
