# Sourced by scripts/benchmark-suite.sh, scripts/held-out-check.sh, scripts/delay-bound-check.sh and
# scripts/override-turns-check.sh.
# record OUT ARGS...: a recording with warpguard-sim (needs $sim and $reuse set; kept with --reuse
# when it exists).
record() {
  local file=$1; shift
  if [ "$reuse" = 1 ] && [ -s "$file" ]; then return; fi
  "$sim" record "$@" --out "$file"
}

# override_turns: warpguard-sim arguments that turn the speed override every 12 s of the run to the
# next of 70, 100, 85, 70, 90, 100, 75, 100, 80, 95 % (then again), from 10 s on, as an operator at
# the teach pendant might (80 turns; those after the run's end never come). Sets the array `turns`.
override_turns() {
  local values=(0.7 1.0 0.85 0.7 0.9 1.0 0.75 1.0 0.8 0.95) k
  turns=()
  for k in $(seq 0 79); do turns+=(--override-change "$((10 + 12 * k)):${values[$((k % 10))]}"); done
}

# python_module MODULE PACKAGE: installs the Debian package PACKAGE unless the system Python can
# import MODULE (the analysis tools run with /usr/bin/python3).
python_module() {
  if ! /usr/bin/python3 -c "import $1" 2>/dev/null; then
    local sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$2" > /dev/null
  fi
}
