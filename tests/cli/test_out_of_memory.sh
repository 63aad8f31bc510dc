#!/usr/bin/env bash
# Memory running out at each allocation in turn (tests/fixtures/
# failmalloc.so, preloaded: the Nth malloc, calloc or realloc fails) while
# verify, info and convert run on good data. Every run ends with exit 0,
# or 1 and its line; none crashes, and none blames the data: no "not
# valid JSON", no "FAILED: ... records bad", no manifest "class counts"
# (before: a manifest parse that ran out was "not valid JSON (truncated
# or edited?)", a record or decoder that could not be had made verify say
# FAILED with bad records by class, the decoders' clean-up crashed, and a
# manifest built without its class counts was written). A convert that
# ends 0 leaves splits that verify passes.
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1
if asan_build; then
  echo "skipped: the sanitizer's runtime must come first (no preloaded malloc)"
  exit 77
fi
fm="$(dirname "$IMS_FIXTURES")/failmalloc.so"
[ -f "$fm" ] || { echo "FAIL: no $fm (built with the tests)"; exit 1; }

expect 0 "$IMSHARD" sample "$T/img" --classes 4 --per-class 12 --quiet
expect 0 "$IMSHARD" convert folder "$T/img" -o "$T/p" --val-ratio 0.25 --shards 2 --quiet

# sweep FROM TO STEP CMD...: CMD with allocation N failing, N = FROM, FROM
# + STEP, ... TO; $oom counts the runs that said memory ran out. The
# functions named by before (run first) and after_ok (run when CMD ended
# 0), when set, take N.
before="" after_ok=""
sweep() {
  local from=$1 to=$2 step=$3 n
  shift 3
  oom=0
  for ((n = from; n <= to; n += step)); do
    [ -z "$before" ] || "$before" "$n"
    run env FAILMALLOC_AFTER="$n" LD_PRELOAD="$fm" timeout 60 "$@"
    checks=$((checks + 1))
    case $rc in
    0) [ -z "$after_ok" ] || "$after_ok" "$n" ;;
    1) grep -qiE 'out of memory|cannot allocate|insufficient memory|memory allocation' "$T/err" &&
      oom=$((oom + 1)) ;;
    *) fail "allocation $n failing: exit $rc: $*"; sed 's/^/  | /' "$T/err" | head -3 >&2 ;;
    esac
    if grep -qE 'not valid JSON|truncated|FAILED|records bad|class counts' "$T/err"; then
      fail "allocation $n failing: the data blamed: $*"
      sed 's/^/  | /' "$T/err" | head -3 >&2
    fi
  done
  # the sweep went past the command's allocations, and met failures
  [ "$rc" = 0 ] || fail "the last run (allocation $to failing) did not end 0: $*"
  [ "$oom" -gt 0 ] || fail "no run said that memory ran out: $*"
}

# each command's last N is well past its allocations here (verify -j 1
# made 190, verify -j 2 --decode 497, info 144, convert 1183)
sweep 0 300 1 "$IMSHARD" verify "$T/p/train.json" -j 1
sweep 0 800 2 "$IMSHARD" verify "$T/p/train.json" -j 2 --decode
sweep 0 250 1 "$IMSHARD" info "$T/p/val.json"

# convert: into a fresh folder each time; what it wrote, when it ended 0,
# verifies
fresh_out() { rm -rf "$T/c"; }
verifies() {
  local s
  for s in train val; do
    "$IMSHARD" verify "$T/c/$s.json" -q >/dev/null 2>&1 ||
      fail "allocation $1 failing: convert ended 0, and its $s split does not verify"
  done
}
before=fresh_out after_ok=verifies
sweep 0 1800 4 "$IMSHARD" convert folder "$T/img" -o "$T/c" --val-ratio 0.25 -j 2 --quiet
before="" after_ok=""

finish
