#!/usr/bin/env bash
# The command table and the usage contract every subcommand shares:
# --help exits 0, bad flags and missing arguments exit 2 with one line.
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1

expect 2 "$IMSHARD"
contains "$T/err" "usage: imshard <command>"
expect 0 "$IMSHARD" --help
for c in list subset pack info verify extract sample convert bench-load report; do contains "$T/out" "  $c "; done
expect 0 "$IMSHARD" --version
contains "$T/out" "imshard 0."
expect 2 "$IMSHARD" frobnicate
one_line "$T/err"
contains "$T/err" "unknown command 'frobnicate'"

for c in list subset pack info verify extract sample convert bench-load report; do
  expect 0 "$IMSHARD" $c --help
  contains "$T/out" "usage: imshard $c"
  expect 2 "$IMSHARD" $c --no-such-flag
  one_line "$T/err"
  contains "$T/err" "unknown option '--no-such-flag'"
  expect 2 "$IMSHARD" $c
  one_line "$T/err"
done

# A short option's value attached (-j4, as getopt takes it) or apart;
# a flag takes none; -q for every command that prints progress
expect 0 "$IMSHARD" sample "$T/s" --classes 2 --per-class 3 -q
expect 0 "$IMSHARD" list "$T/s" -o "$T/l/d" -q
same "$(cat "$T/err")" "" "(list -q prints nothing)"
expect 0 "$IMSHARD" pack "$T/l/d_train.lst" "$T/s" -o "$T/p/a" -j1 -q
expect 0 "$IMSHARD" verify "$T/p/a.json" -j2 -q
expect 2 "$IMSHARD" verify "$T/p/a.json" -qq
one_line "$T/err"
contains "$T/err" "unknown option '-qq'"
expect 2 "$IMSHARD" verify "$T/p/a.json" -j0
contains "$T/err" "--threads"

# Out-of-range and malformed values: exit 2 and one line naming the flag,
# before any input is read (none of these paths exist).
while IFS='|' read -r flag args; do
  # shellcheck disable=SC2086
  expect 2 "$IMSHARD" $args
  one_line "$T/err"
  contains "$T/err" "$flag"
done <<'EOF'
--train-ratio|list nodir -o x --train-ratio 1.5
--train-ratio|list nodir -o x --train-ratio abc
--per-class|subset no.lst -o y.lst --per-class 0
--shards|pack no.lst nodir -o p --shards 0
--quality|pack no.lst nodir -o p --quality 101
--shard-size|pack no.lst nodir -o p --shard-size 0
--classes|sample z --classes 18
--per-class|sample z --per-class 0
--seed|sample z --seed -1
--val-ratio|convert folder nodir -o c --val-ratio 1.5
--size|bench-load no.json --size 0
--threads|verify no.json --threads 0
--target-acc|report nodir -o r.html --target-acc 1.5
EOF
# Every option of every command is in the manual (docs/*.md, README.md):
# its long name, as --help lists it (before: bench-load's --seconds,
# --prefetch and --no-pinned were in --help alone). --output is -o's long
# name, which the manual writes -o.
documented() {
  local o
  for o in $(grep -oE '(^|[ ,])--[a-z0-9][a-z0-9-]*' "$T/out" | tr -d ' ,' | sort -u); do
    case $o in --help | --output) continue ;; esac
    checks=$((checks + 1))
    grep -rqF -- "$o" "$IMS_SRC/docs" "$IMS_SRC/README.md" || fail "$1: $o is in --help, not in docs/ or README.md"
  done
}
mkdir -p "$T/help"
for c in list subset pack info verify extract sample bench-load report eval predict export; do
  expect 0 "$IMSHARD" $c --help
  documented "imshard $c"
  cp "$T/out" "$T/help/$c.txt"
done
for d in folder caltech256 fruits inat2017 imagenet cifar10; do
  expect 0 "$IMSHARD" convert $d --help
  documented "imshard convert $d"
  cp "$T/out" "$T/help/convert-$d.txt"
done
# the scripts too, each with a --help (before: fuzz.sh took --help for
# its SECONDS and exited 2)
for s in build demo fuzz gpu-check setup test; do
  expect 0 bash "$IMS_SRC/scripts/$s.sh" --help
  documented "scripts/$s.sh"
done
train=${IMSHARD_TRAIN:-$(dirname "$IMSHARD")/imshard-train}
if [ -x "$train" ]; then
  expect 0 "$train" --help
  documented imshard-train
  cp "$T/out" "$T/help/imshard-train.txt"
fi
# ... and the reverse: every flag the manual writes on a command line
# (`imshard pack ... --flag`, an indented example) is one that command's
# --help lists, so an example copied from the manual never meets
# "unknown option" (before, nothing checked the examples' flags)
if [ -x "$train" ]; then
  expect 0 /usr/bin/python3 "$IMS_SRC/tests/cli/doc_flags.py" "$T/help" "$IMS_SRC/README.md" "$IMS_SRC"/docs/*.md
  contains "$T/out" " command lines read"
fi

# Output that could not all be written (a full disk) fails with one line,
# after the command itself succeeded: before, every command exited 0
if [ -w /dev/full ]; then
  full() {
    "$@" >/dev/full 2>"$T/err"
    same "$?" 1 "(to a full disk: $*)"
    one_line "$T/err"
    contains "$T/err" "cannot write to standard output"
  }
  full "$IMSHARD" --help
  full "$IMSHARD" --version
  full "$IMSHARD" list --help
  full "$IMSHARD" info "$T/p/a.json"
  full "$IMSHARD" eval --help
  [ -x "$train" ] && full "$train" --help
fi

finish
