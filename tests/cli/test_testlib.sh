#!/usr/bin/env bash
# The CLI tests' own safety (lib.sh, scratch.sh): a test started without
# its environment (by hand, IMS_TESTLIB or IMSHARD unset) stops before its
# first command, with a line, and writes nothing; every path a test writes
# is under its scratch folder T, which exists. Before, a test run without
# IMS_TESTLIB went on with T empty, and test_bench_train_gpu.sh's
# `rm -rf "$T/work"` removed the folder /work.
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1
cli="$IMS_SRC/tests/cli"

# every test that uses lib.sh loads it so that a missing one ends the test
# (the scripts with helpers of their own check IMS_TMP, then scratch.sh
# makes T or ends them)
guarded='source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1'
for f in "$cli"/test_*.sh; do
  name=${f##*/}
  checks=$((checks + 1))
  if grep -q '^source .*\(IMS_TESTLIB\|lib\.sh\)' "$f"; then
    first=$(grep -m1 '^source ' "$f")
    [ "$first" = "$guarded" ] || fail "$name loads lib.sh unguarded: $first"
  else
    grep -q '^source "$(dirname "$0")/scratch.sh"' "$f" ||
      fail "$name has neither lib.sh nor scratch.sh"
  fi
done

# started bare: a line, a non-zero exit within seconds, nothing written in
# the folder it started in or under IMS_TMP but its empty scratch folder
mkdir -p "$T/cwd"
for f in "$cli"/test_*.sh; do
  grep -qF "$guarded" "$f" || continue # refused above: not run
  name=${f##*/}
  run env -i PATH="$PATH" HOME="$T/home" bash -c 'cd "$1" && exec timeout 20 bash "$2"' _ "$T/cwd" "$f"
  checks=$((checks + 1))
  [ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "$name started bare: exit $rc"
  contains "$T/err" "IMSHARD must point at"
  same "$(ls -A "$T/cwd")" "" "($name started bare wrote nothing where it started)"
done

# IMS_TMP that cannot hold a folder: one line, exit 1, before any command
touch "$T/afile"
run env IMS_TMP="$T/afile" bash "$cli/test_info.sh"
same "$rc" 1 "(IMS_TMP a file: exit)"
lacks "$T/out" "checks"

finish
