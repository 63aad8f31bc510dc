#!/usr/bin/env bash
# Every command that writes, into a real full disk: a small tmpfs whose
# size is swept from nothing up to what the run needs, and one with few
# inodes. Each run ends 0 with all it writes, whole, or 1 with one line
# naming the file the user asked for (never a temporary) and "No space
# left on device"; never another status, and a failed run leaves no
# temporary, partial shard or folder it made, and keeps an earlier
# output whole (pack --force, convert --force, export --force, a report
# page, a checkpoint being replaced). test_pack_faults.sh stands a
# file-size limit in for a full disk; this one fills the disk itself, so
# ENOSPC comes from creating a file, writing it, reserving its blocks
# (pack's posix_fallocate), making a folder or renaming. Mounting needs
# root: where it cannot be done the test says so and is skipped.
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1
: "${IMSHARD_TRAIN:?IMSHARD_TRAIN must point at imshard-train}"

M="$T/m"
mkdir -p "$M"
mounted=0
trap '[ "$mounted" = 1 ] && umount "$M" 2>/dev/null' EXIT

# disk SIZE_KB [INODES]: a fresh, empty tmpfs of that size at $M.
disk() {
  if [ "$mounted" = 1 ]; then
    umount "$M" || { fail "cannot unmount '$M'"; finish; }
    mounted=0
  fi
  mount -t tmpfs -o "size=${1}k${2:+,nr_inodes=$2}" tmpfs "$M" || { fail "cannot mount a tmpfs at '$M'"; finish; }
  mounted=1
}

if ! mount -t tmpfs -o size=64k tmpfs "$M" 2>/dev/null; then
  echo "note: cannot mount a tmpfs here (not root?): the full-disk checks are not run" >&2
  scratch_done 1
  exit 77
fi
mounted=1

# tree: every path under $M, sorted, one a line.
tree() { (cd "$M" && find . -mindepth 1 | sort); }

# attempt NAME ALLOW OK_CHECK KEEP_CHECK CMD...: runs CMD on the disk as it
# is. Exit 0: OK_CHECK (a shell snippet) must pass. Exit 1: one line naming
# no temporary, saying "No space left on device"; no new path under $M
# but those matching the regular expression ALLOW (files a command
# documents that it keeps); KEEP_CHECK must pass (the earlier output
# whole). Any other exit fails. Counts ok and failed runs in n_ok, n_full.
n_ok=0
n_full=0
attempt() {
  local name=$1 allow=$2 ok_check=$3 keep_check=$4
  shift 4
  tree >"$T/before"
  run timeout 120 "$@"
  tree >"$T/after"
  checks=$((checks + 1))
  case "$rc" in
  0)
    n_ok=$((n_ok + 1))
    bash -c "$ok_check" >"$T/check" 2>&1 ||
      fail "$name: ended 0 but its output is not whole: $(head -3 "$T/check")"
    ;;
  1)
    n_full=$((n_full + 1))
    [ "$(wc -l <"$T/err")" = 1 ] || fail "$name: $(wc -l <"$T/err") lines on stderr: $(head -3 "$T/err")"
    grep -q "No space left on device" "$T/err" || fail "$name: no 'No space left on device': $(cat "$T/err")"
    ! grep -qE '\.tmp\.[0-9]|\.imshard-sample\.tmp' "$T/err" ||
      fail "$name: names a temporary: $(cat "$T/err")"
    # the disk, not an input file: before, pack said "cannot pack
    # 'class/img.jpg': cannot write shard ...", the image read as the cause
    ! grep -q "cannot pack '" "$T/err" || fail "$name: blames an input file: $(cat "$T/err")"
    local new
    new=$(comm -13 "$T/before" "$T/after" | grep -vE "${allow:-^$}" | tr '\n' ' ')
    [ -z "$new" ] || fail "$name: a failed run left $new($(cat "$T/err"))"
    bash -c "$keep_check" >"$T/check" 2>&1 ||
      fail "$name: the earlier output is not whole: $(head -3 "$T/check")"
    ;;
  *)
    fail "$name: exit $rc: $(head -3 "$T/err")"
    ;;
  esac
}

# sweep NAME FROM TO STEP SETUP ALLOW OK_CHECK KEEP_CHECK CMD...: attempt on
# a fresh disk of each size from FROM to TO KB, SETUP (a snippet) run on it
# first; then with 2 to 5 inodes at the largest size. At least one run must
# end 0 and one fail, or the sweep missed the point.
sweep() {
  local name=$1 from=$2 to=$3 step=$4 setup=$5 allow=$6 ok=$7 keep=$8
  shift 8
  n_ok=0
  n_full=0
  local s i
  for s in $(seq "$from" "$step" "$to"); do
    disk "$s"
    bash -c "$setup" || { fail "$name: setup failed at ${s}k"; continue; }
    attempt "$name at ${s}k" "$allow" "$ok" "$keep" "$@"
  done
  for i in 2 3 4 5; do
    disk "$to" "$i"
    bash -c "$setup" 2>/dev/null || continue
    attempt "$name with $i inodes" "$allow" "$ok" "$keep" "$@"
  done
  checks=$((checks + 1))
  [ "$n_ok" -gt 0 ] && [ "$n_full" -gt 0 ] ||
    fail "$name: $n_ok runs ended 0 and $n_full failed: widen the sweep"
}
export IMSHARD M

# inputs, on the ordinary disk
expect 0 "$IMSHARD" sample "$T/s" --classes 3 --per-class 6 --seed 1 --threads 1 --quiet
expect 0 "$IMSHARD" list "$T/s" -o "$T/s" --no-shuffle --quiet
expect 0 "$IMSHARD" convert folder "$T/s" -o "$T/c" --val-ratio 0.3 --seed 2 --quiet
expect 0 "$IMSHARD" pack "$T/s_train.lst" "$T/s" -o "$T/old/train" --encoding png --threads 1 --quiet
expect 0 "$IMSHARD_TRAIN" --train "$T/c/train.json" --val "$T/c/val.json" --model convnet7 --size 16 \
  --threads 1 --batch-size 8 --epochs 1 --checkpoint-dir "$T/ck" --log-dir "$T/lg" --quiet
export T

expect 0 "$IMSHARD" list "$T/s" -o "$T/x" --train-ratio 0.5 --test-ratio 0.2 --quiet
# list into a folder it makes (before: the folder stayed after a failure,
# and a file that could not be created was named by its temporary,
# 'x_train.lst.tmp.PID')
sweep list 4 24 4 "" "" \
  'cmp "$M/d/e/x_train.lst" "$T/x_train.lst"' 'true' \
  "$IMSHARD" list "$T/s" -o "$M/d/e/x" --train-ratio 0.5 --test-ratio 0.2 --quiet

# subset, into a folder it makes
sweep subset 4 12 4 "" "" 'test -s "$M/d/sub.lst"' 'true' \
  "$IMSHARD" subset "$T/s_train.lst" -o "$M/d/sub.lst" --per-class 3 --quiet

# sample (before: a file that could not be written was named in the
# sample's work folder, '.imshard-sample.tmp/<class>/<file>')
sweep sample 32 544 64 "" "" 'test "$(find "$M/s" -type f | wc -l)" = 18' 'true' \
  "$IMSHARD" sample "$M/s" --classes 3 --per-class 6 --seed 1 --threads 1 --quiet

# pack, fresh and with --force over an earlier split that must stay whole
# when the new one does not fit (pack reserves a shard's blocks with
# posix_fallocate before LMDB writes through its map: a store into an
# unreserved page of a full disk would be SIGBUS)
sweep pack 256 4352 512 "" "" '"$IMSHARD" verify "$M/o/train.json" --quiet' 'true' \
  "$IMSHARD" pack "$T/s_train.lst" "$T/s" -o "$M/o/train" --threads 2 --quiet
old_split='mkdir -p "$M/o" && cp "$T"/old/* "$M/o/"'
keep_split='"$IMSHARD" verify "$M/o/train.json" --quiet && cmp "$M/o/train.json" "$T/old/train.json"'
sweep "pack --force" 1536 5632 512 "$old_split" "" '"$IMSHARD" verify "$M/o/train.json" --quiet' \
  "$keep_split" \
  "$IMSHARD" pack "$T/s_train.lst" "$T/s" -o "$M/o/train" --threads 2 --force --quiet

# convert over an earlier set
sweep "convert --force" 1536 7680 1024 'cp -r "$T/c" "$M/o"' "" \
  '"$IMSHARD" verify "$M/o/train.json" --quiet && "$IMSHARD" verify "$M/o/val.json" --quiet' \
  'for f in "$T"/c/*; do cmp "$f" "$M/o/${f##*/}" || exit 1; done' \
  "$IMSHARD" convert folder "$T/s" -o "$M/o" --val-ratio 0.3 --seed 5 --force --quiet

# export, and over an earlier file (before: "cannot write safetensors
# 'FILE': cannot create 'FILE.tmp.PID'")
expect 0 "$IMSHARD" export "$T/ck/checkpoint.safetensors" -o "$T/w.st" --quiet
sweep export 1024 5120 1024 "" "" 'cmp "$M/w.st" "$T/w.st"' 'true' \
  "$IMSHARD" export "$T/ck/checkpoint.safetensors" -o "$M/w.st" --quiet
sweep "export --force" 1024 9216 2048 'printf old >"$M/w.st"' "" 'cmp "$M/w.st" "$T/w.st"' \
  'test "$(cat "$M/w.st")" = old' \
  "$IMSHARD" export "$T/ck/checkpoint.safetensors" -o "$M/w.st" --force --quiet

# eval -o and report -o/--csv, into folders they make
sweep "eval -o" 4 24 4 "" "" 'test -s "$M/e/eval.json"' 'true' \
  "$IMSHARD" eval "$T/ck/checkpoint.safetensors" "$T/c/val.json" -o "$M/e" --threads 1 --quiet
sweep report 8 72 8 "" "" 'test -s "$M/r/page.html" && test -s "$M/c/train.csv"' 'true' \
  "$IMSHARD" report "$T/lg" -o "$M/r/page.html" --csv "$M/c" --quiet
# a report page replaced: the earlier one stays when the new one fails
sweep "report over a page" 48 96 8 'printf old >"$M/page.html"' "" 'test -s "$M/page.html"' \
  'test "$(cat "$M/page.html")" = old' \
  "$IMSHARD" report "$T/lg" -o "$M/page.html" --quiet

# extract and bench-load --dump keep the files they wrote before the
# failure (documented: each is whole), never a temporary
sweep extract 64 1280 128 "" '^\./x$|^\./x/[0-9]{8}\.(jpg|png)$' 'test -s "$M/x/extract.lst"' 'true' \
  "$IMSHARD" extract "$T/old/train.json" -o "$M/x" --quiet
sweep "bench-load --dump" 4 40 4 "" '^\./d$|^\./d/sample_[0-9]+_label[0-9]+\.png$' \
  'test "$(ls "$M/d" | wc -l)" = 6' 'true' \
  "$IMSHARD" bench-load "$T/c/train.json" --size 32 --batch 4 --epochs 1 --seconds 0 --threads 1 \
  --dump 6 "$M/d" --quiet

# imshard-train's checkpoint replaced at every step: a failed run keeps
# the last checkpoint whole (it loads); its folder keeps the lock file,
# as every run's does (removing it would let a third trainer lock a new
# file while a second still holds the old)
sweep "imshard-train --checkpoint-dir" 4096 16384 2048 "" \
  '^\./ck$|^\./ck/imshard-train\.lock$|^\./ck/checkpoint\.safetensors$' \
  '"$IMSHARD" export "$M/ck/checkpoint.safetensors" -o "$T/ck.st" --force --quiet' \
  'test ! -e "$M/ck/checkpoint.safetensors" || "$IMSHARD" export "$M/ck/checkpoint.safetensors" -o "$T/ck.st" --force --quiet' \
  "$IMSHARD_TRAIN" --train "$T/c/train.json" --val "$T/c/val.json" --model convnet7 --size 16 \
  --threads 1 --batch-size 8 --epochs 2 --checkpoint-every 1 --checkpoint-dir "$M/ck" --quiet
# its --log-dir: the run's logs so far stay, for report to draw
sweep "imshard-train --log-dir" 4 28 4 "" \
  '^\./lg$|^\./lg/(imshard-train\.lock|metrics\.jsonl|per_class\.csv|confusion\.csv|predictions\.csv|eval\.json)$' \
  'test -s "$M/lg/summary.json"' 'true' \
  "$IMSHARD_TRAIN" --train "$T/c/train.json" --val "$T/c/val.json" --model convnet7 --size 16 \
  --threads 1 --batch-size 8 --epochs 2 --log-dir "$M/lg" --quiet

umount "$M" && mounted=0
finish
