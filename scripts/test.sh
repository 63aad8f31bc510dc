#!/usr/bin/env bash
# The whole test suite: installs dependencies, builds with -Werror, runs
# every test; then builds with AddressSanitizer + UndefinedBehaviorSanitizer
# and runs every test again; then runs each libFuzzer harness for 10 s
# from a fixed seed (scripts/fuzz.sh; bench/fuzz runs them longer). GPU tests are skipped (not passed) without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
jobs=$(nproc)

echo "== build (RelWithDebInfo, -Wall -Wextra -Werror)"
bash scripts/build.sh build
echo "== tests"
(cd build && ctest --output-on-failure -j"$jobs")

echo "== build (ASan + UBSan)"
bash scripts/build.sh build-asan -DIMSHARD_SANITIZE=address,undefined
echo "== tests under ASan + UBSan"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --output-on-failure -j"$jobs" -LE slow)

echo "== fuzzing (libFuzzer, 10 s per harness)"
FUZZ_SEED=1 bash scripts/fuzz.sh 10
