#!/usr/bin/env bash
# KA-mDTW on the signal thesis §4.4-4.5 feeds it: the deviation a task's force causes (issue 6).
#
#   bash scripts/ka-deviation-check.sh [--reuse] [OUT_DIR]     (about 2.5 hours; --reuse keeps every
#                                                               file a previous run wrote: delete one to redo it)
#
# The thesis matches deviation signals - the current with the load minus the current of the same motion
# without it (§4.5.1; the empty run stands for an optimal model of the robot) - scaled by lever lengths.
# The benchmark suite's KA-mDTW part (docs/benchmarks.md) matches the joint torques themselves, in which
# the arm's own gravity and inertia dominate. This check records each robot's varying pick-and-place
# (reference with one place only, 40 calibration and 60 nominal cycles with every place) twice with the
# same seeds - with the part and without it (warpguard-sim --payload 0) - builds the deviation
# (tools/ka_deviation.py), calibrates an mDTW and a KA-mDTW profile on it and on the loaded torques, and
# reports for both signals how often each method matched the right phase (tools/ka_matching.py, the
# same windows and definition as the suite: windows of the detector's m, and whole sections as §4.5).
# The same for the snap-fit at changing poses (§4.5.2): the assembly task with its presses and with
# presses of 1e-9 N (the same program, timing and noise), the force along the tool's z axis (tool frame).
# The suite's snap-fit poses change the joints' lever lengths by at most about 20 % (joints whose lever
# reaches 5 cm); the same task is
# then run with three poses tools/snap_fit_poses.py chooses on the identified model so that the levers
# differ by >= 1.5x ("lever poses"), the situation of the thesis's snap-fit; and once more with a
# reference that takes the first two of those poses in turn (the thesis's reference held presses at
# two lever lengths), the run's third pose being the one matched. Same seeds as "lever poses".
# A third signal, "model", is the deviation as the product computes it without a twin: the loaded runs
# less the arm model fitted on the calibration cycles' dry run (`warpguard identify dynamics`,
# `warpguard deviation`; thesis §4.6's model-based part).
set -euo pipefail
cd "$(dirname "$0")/.."
reuse=0
if [ "${1:-}" = --reuse ]; then reuse=1; shift; fi
out=${1:-build/ka-deviation}
bash scripts/install-deps.sh > /dev/null
bash scripts/build.sh > /dev/null
sim=build/samples/sim/warpguard-sim
wg=build/tools/warpguard
py=/usr/bin/python3

# fresh FILE: true unless --reuse and FILE exists (a step is skipped when its output is there).
fresh() { [ "$reuse" = 0 ] || [ ! -s "$1" ]; }

# One robot and task: pick-and-place (the part's weight, base frame) or assembly (the snap-fit's force
# along the tool's z axis, tool frame). Files: OUT_DIR/ROBOT/[assembly-]*.
check_task() {
  local robot=$1 seed=$2 kind=$3
  local dir="$out/$robot" r="samples/robots/$robot.json" t="samples/tasks/$robot-$kind.json" p="" force=(--force-frame base --force 0,0,-1)
  local matching=$kind
  mkdir -p "$dir"
  [ "$kind" = assembly ] && p="assembly-" && force=(--force-frame tool --force 0,0,1)
  local variants=1
  if [ "$kind" = lever-poses ] || [ "$kind" = lever-poses-two ]; then
    # The assembly task with the snap-fit at poses whose lever lengths differ (chosen on the identified
    # model); lever-poses-two: its reference takes the first two poses in turn.
    p="$kind-" force=(--force-frame tool --force 0,0,1) matching=assembly t="$dir/lever-poses-task.json"
    [ "$kind" = lever-poses-two ] && variants=2
    kind=assembly
    if fresh "$t"; then
      "$py" tools/snap_fit_poses.py "$wg" "$dir/model.json" "$r" "samples/tasks/$robot-assembly.json" "$t" > "$dir/lever-poses-task.txt"
    fi
  fi
  "$py" tools/one_variant.py "$t" "$dir/${p}one-variant.json" $variants
  # Without the task's force: no part (pick-and-place), or presses of 1e-9 N (assembly; the simulator
  # refuses 0), so that both runs draw the same random numbers.
  local empty_args=(--payload 0)
  if [ "$kind" = assembly ]; then
    empty_args=()
    for v in "" one-variant; do
      local src=$t; [ -n "$v" ] && src="$dir/${p}one-variant.json"
      "$py" tools/dry_task.py "$src" "$dir/${p}${v:-all}-no-press.json"
    done
  fi
  local part task cycles s
  for part in reference:4:one calibration:40:all nominal:60:all; do
    IFS=: read -r name cycles which <<< "$part"
    task=$t; [ "$which" = one ] && task="$dir/${p}one-variant.json"
    local empty_task=$task
    [ "$kind" = assembly ] && empty_task="$dir/${p}$([ "$which" = one ] && echo one-variant || echo all)-no-press.json"
    s=$((seed + 21)); [ "$name" = calibration ] && s=$((seed + 22)); [ "$name" = nominal ] && s=$((seed + 23))
    fresh "$dir/$p$name-deviation.csv" || continue
    "$sim" record --robot "$r" --task "$task" --cycles "$cycles" --seed $s --out "$dir/$p$name-loaded.csv" > /dev/null
    "$sim" record --robot "$r" --task "$empty_task" --cycles "$cycles" --seed $s "${empty_args[@]}" --out "$dir/$p$name-empty.csv" > /dev/null
    "$py" tools/ka_deviation.py "$dir/$p$name-loaded.csv" "$dir/$p$name-empty.csv" "$dir/$p$name-deviation.csv" $((s + 100)) > "$dir/$p$name-deviation.txt"
  done
  # The deviation as the product can compute it: the loaded runs less the arm model fitted on the
  # calibration cycles' dry run (warpguard identify dynamics; no twin needed).
  if fresh "$dir/${p}arm.json"; then
    "$wg" identify dynamics --dry-run "$dir/${p}calibration-empty.csv" --model "$dir/model.json" --out "$dir/${p}arm.json" > "$dir/${p}arm.txt"
  fi
  for name in reference calibration nominal; do
    fresh "$dir/$p$name-model.csv" || continue
    "$wg" deviation --arm "$dir/${p}arm.json" "$dir/$p$name-loaded.csv" --out "$dir/$p$name-model.csv" --no-payload > /dev/null
  done
  local signal method
  for signal in loaded deviation model; do
    for method in mdtw ka-mdtw; do
      fresh "$dir/$p$signal-$method.json" || continue
      local extra=(); [ "$method" = ka-mdtw ] && extra=("${force[@]}")
      "$wg" calibrate --reference "$dir/${p}reference-$signal.csv" --reference-cycles 2 --nominal "$dir/${p}calibration-$signal.csv" \
        --method $method --model "$dir/model.json" "${extra[@]}" --out "$dir/$p$signal-$method.json" > "$dir/$p$signal-$method.txt"
    done
    fresh "$dir/$p$signal-matching.json" || continue
    "$py" tools/ka_matching.py "$wg" "$dir/${p}reference-$signal.csv" "$dir/${p}nominal-$signal.csv" "$dir/$p$signal-mdtw.json" \
      "$dir/$p$signal-ka-mdtw.json" $matching > "$dir/$p$signal-matching.json"
  done
}

# The robot's kinematic model, identified once for both tasks, then each task.
check_robot() {
  local robot=$1 seed=$2
  local dir="$out/$robot" r="samples/robots/$robot.json"
  mkdir -p "$dir"
  if fresh "$dir/model.json"; then
    "$sim" identify --robot "$r" --out "$dir/points.csv" --noise-mm 0.05 --seed $((seed + 20)) > /dev/null
    "$wg" identify dh --points "$dir/points.csv" --out "$dir/model.json" > "$dir/identify.txt"
  fi
  check_task "$robot" "$seed" pick-and-place
  check_task "$robot" "$((seed + 100))" assembly
  check_task "$robot" "$((seed + 200))" lever-poses
  check_task "$robot" "$((seed + 200))" lever-poses-two
}

check_robot ur5e-like 1000 &
check_robot irb120-like 2000 &
wait
check_robot vp6242-like 3000

"$py" - "$out" <<'PY'
import json, sys
out = sys.argv[1]
ROBOTS = ("ur5e-like", "irb120-like", "vp6242-like")
TASKS = (("pick-and-place", ""), ("assembly", "assembly-"), ("snap-fit, lever poses", "lever-poses-"),
         ("snap-fit, lever poses, two-pose reference", "lever-poses-two-"))
res = {(r, t): {s: json.load(open("%s/%s/%s%s-matching.json" % (out, r, p, s))) for s in ("deviation", "loaded", "model")}
       for r in ROBOTS for t, p in TASKS}


def table(title, part, count, spans=False):
    """part(result) -> its per-joint rows; count(result) -> windows per joint."""
    print(title + " (files in %s)" % out)
    print()
    print("| robot | task | joint | scaled | deviation: KA-mDTW | deviation: mDTW | torque: KA-mDTW | torque: mDTW | model deviation: KA-mDTW | model deviation: mDTW | deviation error KA-mDTW (N) | mDTW (Nm) | DTW on KA span (Nm) |")
    print("|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    total = {}
    for task, _ in TASKS:
        for robot in ROBOTS:
            dev, load, model = res[(robot, task)]["deviation"], res[(robot, task)]["loaded"], res[(robot, task)]["model"]
            nd, nl, nm = count(dev), count(load), count(model)
            for jd, jl, jm in zip(part(dev), part(load), part(model)):
                print("| %s | %s | %d | %s | %d/%d | %d/%d | %d/%d | %d/%d | %d/%d | %d/%d | %.4g | %.4g | %.4g |" % (
                    robot, task, jd["joint"], "yes" if jd["scaled"] else "no", jd["ka_right"], nd, jd["mdtw_right"], nd,
                    jl["ka_right"], nl, jl["mdtw_right"], nl, jm["ka_right"], nm, jm["mdtw_right"], nm,
                    jd["ka_cost"], jd["mdtw_cost"], jd["dtw_on_ka_span"]))
                for s, j, w in (("deviation", jd, nd), ("loaded", jl, nl), ("model", jm, nm)):
                    if j["scaled"]:
                        t = total.setdefault((task, s), [0, 0, 0, 0, 0, 0, 0])
                        t[0] += j["ka_right"]
                        t[1] += j["mdtw_right"]
                        t[2] += w
                        t[3] += j["ka_only"]
                        t[4] += j["mdtw_only"]
                        if "ka_span" in j and t[5] is not None:
                            t[5] += j["ka_span"]
                            t[6] += j["mdtw_span"]
                        else:  # a file written before the span test: "n/a"
                            t[5] = t[6] = None
    print()
    for task, _ in TASKS:
        for s, label in (("deviation", "the task force's deviation"), ("loaded", "the torques"),
                         ("model", "the deviation from the arm model of the dry run")):
            ka, md, n, ka_only, md_only, ka_span, md_span = total.get((task, s), [0] * 7)
            print("- %s, scaled joints, %s: right phase KA-mDTW %d/%d (%.1f %%), mDTW %d/%d (%.1f %%); KA-mDTW right where "
                  "mDTW is wrong in %d, mDTW right where KA-mDTW is wrong in %d%s" % (
                      task, label, ka, n, 100.0 * ka / max(n, 1), md, n, 100.0 * md / max(n, 1), ka_only, md_only,
                      "; the span also covering at least half of the section: KA-mDTW %d/%d, mDTW %d/%d" % (ka_span, n, md_span, n)
                      if spans and ka_span is not None else "; span: n/a (matching file from before the span test)" if spans else ""))
    print()


table("KA-mDTW on the deviation a task's force causes (thesis 4.5) and on the torques, the detector's window m:\n"
      "right phase of windows ending 40 % and 80 % into the varying move; reference with one place / one pose",
      lambda r: r["joints"], lambda r: len(r["windows"]))
table("The same with thesis 4.5's window, a whole section of up to 8 cycles: pick-and-place the varying move\n"
      "(its start to its end), assembly the stand at the varying pose in which the snap-fit presses",
      lambda r: r["whole_move"]["joints"], lambda r: len(r["whole_move"]["moves"]), spans=True)
PY
