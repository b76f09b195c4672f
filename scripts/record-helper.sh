# Sourced by scripts/benchmark-suite.sh and scripts/held-out-check.sh (needs $sim and $reuse set).
# record OUT ARGS...: a recording with warpguard-sim (kept with --reuse when it exists).
record() {
  local file=$1; shift
  if [ "$reuse" = 1 ] && [ -s "$file" ]; then return; fi
  "$sim" record "$@" --out "$file"
}
