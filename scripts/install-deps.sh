#!/usr/bin/env bash
# Installs WarpGuard's build and test dependencies from Debian 12's packages.
set -euo pipefail
packages=(
  cmake ninja-build g++ pkg-config
  libeigen3-dev nlohmann-json3-dev libfmt-dev libspdlog-dev libcli11-dev catch2 libmujoco-dev
  clang libclang-rt-14-dev
  libboost-dev libsqlite3-dev python3
  qt6-base-dev qt6-charts-dev libqt6opengl6-dev libgl-dev xvfb xauth
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "dependencies: all ${#packages[@]} Debian packages present"
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "dependencies: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
