#!/usr/bin/env bash
# Configures and builds imshard into a build folder (default: build).
#   scripts/build.sh [BUILD_DIR] [CMAKE_OPTION...]
# BUILD_DIR is relative to the repository root; the configure's output
# goes to BUILD_DIR.configure.log beside it. CMAKE_OPTION: -D options
# for cmake (-DIMSHARD_WITH_CUDA=ON, say), after BUILD_DIR.
#   scripts/build.sh -h | --help   prints this text
set -euo pipefail
case "${1:-}" in
-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
-*)
  echo "build.sh: the first argument is the build folder, not '$1' (scripts/build.sh build $*; see --help)" >&2
  exit 2
  ;;
esac
cd "$(dirname "$0")/.."
dir=${1:-build}
shift || true
# build/ as a shell completes it is build: its log is build.configure.log
while [ "${dir%/}" != "$dir" ] && [ "$dir" != / ]; do dir=${dir%/}; done
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DIMSHARD_WERROR=ON "$@" >"$dir.configure.log" 2>&1 ||
  { cat "$dir.configure.log" >&2; exit 1; }
cmake --build "$dir" -j"$(nproc)"
