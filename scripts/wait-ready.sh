# Sourced by scripts/demo.sh and scripts/benchmark-daemon.sh.
# wait_ready READY_FILE PID LOG SECONDS WHO: waits until warpguardd (process PID) has written its
# --ready-file, as long as it lives and at most SECONDS (it loads every robot's profile before it
# listens: about 0.2 s per robot); otherwise says why, shows LOG and exits 1.
wait_ready() {
  local ready=$1 pid=$2 log=$3 seconds=$4 who=$5 tries
  for ((tries = seconds * 20; tries > 0; tries--)); do
    [ -f "$ready" ] && return 0
    kill -0 "$pid" 2> /dev/null || { echo "$who: warpguardd exited before it was ready:" >&2; cat "$log" >&2; exit 1; }
    sleep 0.05
  done
  [ -f "$ready" ] || { echo "$who: warpguardd was not ready after $seconds s ($log)" >&2; exit 1; }
}
