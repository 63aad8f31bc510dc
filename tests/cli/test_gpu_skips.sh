#!/usr/bin/env bash
# The gpu tests (ctest label gpu) skip (exit 77, one "skipped: " line
# naming why) only on a machine without a GPU, and never with
# IMSHARD_REQUIRE_GPU=1: then they fail (exit 1) with a line saying that
# a GPU was required. Where a GPU is present they run (exit 0) and this
# test only checks that. Which failures count as "no GPU" is
# test_cuda_setup's subject.
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1
: "${GPU_TESTS:?GPU_TESTS must list the gpu test binaries (colon-separated)}"

IFS=: read -r -a bins <<<"$GPU_TESTS"
for bin in "${bins[@]}"; do
  name=$(basename "$bin")
  run env -u IMSHARD_REQUIRE_GPU "$bin"
  checks=$((checks + 1))
  case "$rc" in
  0) echo "$name ran: a GPU is present" ;;
  77)
    contains "$T/out" "skipped: "
    grep -qE "skipped: (rank [0-9]+: )?(cannot use --device cuda: |this build has no NCCL)" "$T/out" ||
      fail "$name skipped for another reason: $(head -1 "$T/out")"
    checks=$((checks + 1))
    run env IMSHARD_REQUIRE_GPU=1 "$bin"
    same "$rc" 1 "($name with IMSHARD_REQUIRE_GPU=1)"
    contains "$T/out" "failed: IMSHARD_REQUIRE_GPU=1 and no GPU to run on: "
    lacks "$T/out" "skipped"
    # any other value leaves the skip alone
    run env IMSHARD_REQUIRE_GPU=0 "$bin"
    same "$rc" 77 "($name with IMSHARD_REQUIRE_GPU=0)"
    ;;
  *) fail "$name exited $rc: $(head -3 "$T/out" "$T/err")" ;;
  esac
done
finish
