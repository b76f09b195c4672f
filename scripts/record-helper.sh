# Sourced by scripts/benchmark-suite.sh, scripts/held-out-check.sh and scripts/delay-bound-check.sh.
# record OUT ARGS...: a recording with warpguard-sim (needs $sim and $reuse set; kept with --reuse
# when it exists).
record() {
  local file=$1; shift
  if [ "$reuse" = 1 ] && [ -s "$file" ]; then return; fi
  "$sim" record "$@" --out "$file"
}

# python_module MODULE PACKAGE: installs the Debian package PACKAGE unless the system Python can
# import MODULE (the analysis tools run with /usr/bin/python3).
python_module() {
  if ! /usr/bin/python3 -c "import $1" 2>/dev/null; then
    local sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$2" > /dev/null
  fi
}
