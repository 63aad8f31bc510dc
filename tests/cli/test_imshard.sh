#!/usr/bin/env bash
# The command table and the usage contract every subcommand shares:
# --help exits 0, bad flags and missing arguments exit 2 with one line.
source "$IMS_TESTLIB"

expect 2 "$IMSHARD"
contains "$T/err" "usage: imshard <command>"
expect 0 "$IMSHARD" --help
for c in list subset pack info verify extract sample convert bench-load; do contains "$T/out" "  $c "; done
expect 0 "$IMSHARD" --version
contains "$T/out" "imshard 0."
expect 2 "$IMSHARD" frobnicate
one_line "$T/err"
contains "$T/err" "unknown command 'frobnicate'"

for c in list subset pack info verify extract sample convert bench-load; do
  expect 0 "$IMSHARD" $c --help
  contains "$T/out" "usage: imshard $c"
  expect 2 "$IMSHARD" $c --no-such-flag
  one_line "$T/err"
  contains "$T/err" "unknown option '--no-such-flag'"
  expect 2 "$IMSHARD" $c
  one_line "$T/err"
done
finish
