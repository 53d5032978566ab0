#!/usr/bin/env bash
# Installs Debian's CUDA 11.8 development headers (non-free nvidia-cuda-dev,
# which pulls in libcuda1), enabling contrib/non-free in the apt sources.
# gorgonia.org/cu v0.9.6 compiles against these, not against CUDA 13.
# With --toolkit it also installs nvcc (nvidia-cuda-toolkit) for `make ptx`.
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "install-cuda-dev: needs root (apt-get)" >&2; exit 1; }
src=/etc/apt/sources.list.d/debian.sources
if [ -f "$src" ] && ! grep -q 'non-free' "$src"; then
  sed -i 's/^Components: main$/Components: main contrib non-free non-free-firmware/' "$src"
elif [ -f /etc/apt/sources.list ] && ! grep -q 'non-free' /etc/apt/sources.list; then
  sed -i 's/ main$/ main contrib non-free non-free-firmware/' /etc/apt/sources.list
fi
pkgs=(nvidia-cuda-dev)
[ "${1:-}" = --toolkit ] && pkgs+=(nvidia-cuda-toolkit)
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}"
