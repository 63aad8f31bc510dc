# scratch.sh - a CLI test's scratch folder. Sourced by lib.sh, and by the
# scripts that keep helpers of their own (test_list.sh, test_subset.sh,
# test_sample.sh) as `source scratch.sh TAG`: T is a fresh folder
# $IMS_TMP/TAG-XXXXXX (TAG: cli when not given).
# Every path a test writes is under $T, and some tests remove folders under
# it: a test goes no further than this without one (an empty T would make
# "$T/work" a folder of the root).
: "${IMS_TMP:=/tmp}"
mkdir -p "$IMS_TMP" || exit 1
T=$(mktemp -d "$IMS_TMP/${1:-cli}-XXXXXX") || exit 1
[ -n "$T" ] && [ -d "$T" ] || { echo "no scratch folder under '$IMS_TMP'" >&2; exit 1; }

# scratch_done PASSED: removes $T when PASSED is 1; else says where it is
# kept, to look at what the failing test left.
scratch_done() {
  if [ "$1" = 1 ]; then
    rm -rf "$T"
  else
    echo "scratch kept in $T" >&2
  fi
}

# scratch_on_exit: an EXIT trap for scripts that just exit with their
# status: $T goes when the script exits 0.
scratch_on_exit() {
  local rc=$?
  if [ "$rc" = 0 ]; then scratch_done 1; else scratch_done 0; fi
  return "$rc"
}
