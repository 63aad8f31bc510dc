#!/usr/bin/env bash
# Installs every build and test dependency of imshard from Debian packages.
# A no-op (no apt-get call at all) when everything is already present, so
# it is cheap to run before every build and test.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libturbojpeg0-dev libjpeg62-turbo-dev libpng-dev zlib1g-dev
  liblmdb-dev lmdb-utils libcjson-dev
  libomp-dev libopenblas-dev libopenmpi-dev openmpi-bin
  python3 python3-lmdb python3-pil
  python3-dev python3-venv python3-pip python3-numpy python3-pytest  # the Python package (python/) and its tests
  clang libclang-rt-14-dev
  chromium  # headless, for the report's end-to-end test (tests/cli/test_report_e2e.sh)
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "setup: installing ${missing[*]}" >&2
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  sudo_cmd=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
