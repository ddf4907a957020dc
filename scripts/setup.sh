#!/usr/bin/env bash
# Installs convtune's build dependencies from Debian packages (apt-get; root or sudo).
set -euo pipefail
packages=(cmake g++ make libblis-dev libdnnl-dev libsqlite3-dev catch2 libcli11-dev
          nlohmann-json3-dev libcpu-features-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all dependencies are installed"
  exit 0
fi
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
echo "setup: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
