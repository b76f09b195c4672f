#!/usr/bin/env bash
# How fast could any detector stop for the benchmark suite's collisions? Records each collision run
# of the suite again without its contacts (its twin: the same command and seed, so the same noise,
# jitter and timing; identical up to the first contact) and runs tools/delay_bound.py: WarpGuard's
# own rules in an ideal detector that knows the twin, reading it through one reading's noise, with
# its level and CUSUM limit fitted to that noise for the same false-stop budget (1 per 1,000
# cycles). Prints, per robot and variant and pooled, the contacts detected and median delay of that
# bound beside WarpGuard's default detector on the same contacts.
#
#   bash scripts/delay-bound-check.sh [OUT_DIR]   (about 3 minutes; needs the suite's recordings and
#                                                  evaluations: bash scripts/benchmark-suite.sh)
#
# The recording arguments repeat scripts/benchmark-suite.sh's (run_robot): keep them the same.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/benchmarks}
bash scripts/install-deps.sh
. scripts/record-helper.sh
python_module numpy python3-numpy
bash scripts/build.sh > /dev/null
sim=build/samples/sim/warpguard-sim

results=()
for entry in ur5e-like:1000 irb120-like:2000 vp6242-like:3000; do
  robot=${entry%%:*} seed=${entry##*:}
  dir="$out/$robot" r="samples/robots/$robot.json" t="samples/tasks/$robot-pick-and-place.json"
  payload=$(/usr/bin/python3 -c "import json; print(2 * max(s.get('grasp', 0) for s in json.load(open('$t'))['steps']))")
  override_turns
  for variant in collisions override70-collisions drift30-collisions payload2x-collisions turns-collisions \
                 assembly-collisions assembly-override70-collisions; do
    case $variant in
      collisions) args=(--task "$t" --cycles 101 --seed $((seed + 4))) ;;
      override70-collisions) args=(--task "$t" --cycles 51 --seed $((seed + 6)) --override 0.7) ;;
      drift30-collisions) args=(--task "$t" --cycles 51 --seed $((seed + 8)) --drift 0.3) ;;
      payload2x-collisions) args=(--task "$t" --cycles 51 --seed $((seed + 10)) --payload "$payload") ;;
      turns-collisions) args=(--task "$t" --cycles 51 --seed $((seed + 18)) "${turns[@]}") ;;
      assembly-collisions) args=(--task "samples/tasks/$robot-assembly.json" --cycles 51 --seed $((seed + 14))) ;;
      assembly-override70-collisions) args=(--task "samples/tasks/$robot-assembly.json" --cycles 51 --seed $((seed + 16)) --override 0.7) ;;
    esac
    for f in "$dir/$variant.csv" "$dir/$variant.phase.evaluation.json"; do
      [ -s "$f" ] || { echo "delay-bound-check: $f is missing; run bash scripts/benchmark-suite.sh first" >&2; exit 2; }
    done
    twin="$dir/$variant.twin.csv"
    [ -s "$twin" ] || "$sim" record --robot "$r" "${args[@]}" --out "$twin" > /dev/null
    /usr/bin/python3 tools/delay_bound.py "$dir/$variant.csv" "$twin" "$dir/$variant.phase.evaluation.json" \
      > "$dir/$variant.delay-bound.json"
    results+=("$robot $variant $dir/$variant.delay-bound.json")
  done
done

/usr/bin/python3 - "${results[@]}" <<'EOF'
import json, statistics, sys
def ms(v):
    return "-" if v is None else f"{v:.0f} ms"
print("| robot | variant | contacts | bound: detected, median (impacts / pushes) | WarpGuard: detected, median (impacts / pushes) |")
print("|---|---|---:|---|---|")
pooled = {"bound": [], "warpguard": []}
for item in sys.argv[1:]:
    robot, variant, path = item.split(" ")
    d = json.load(open(path))
    cells = []
    for who in ("bound", "warpguard"):
        a, i, p = d["all"][who], d["impacts"][who], d["pushes"][who]
        cells.append(f"{a['detected']}, {ms(a['median_ms'])} ({ms(i['median_ms'])} / {ms(p['median_ms'])})")
    print(f"| {robot} | {variant} | {d['all']['contacts']} | {cells[0]} | {cells[1]} |")
    for bound, ours in d["delays"]:
        if bound is not None: pooled["bound"].append(bound)
        if ours is not None: pooled["warpguard"].append(ours)
b, w = pooled["bound"], pooled["warpguard"]
print(f"\npooled: bound {len(b)} detected, median {1000 * statistics.median(b):.1f} ms; "
      f"WarpGuard {len(w)} detected, median {1000 * statistics.median(w):.1f} ms")
EOF
