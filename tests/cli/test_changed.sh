#!/usr/bin/env bash
# A shard truncated while bench-load or imshard-train reads it ends the run
# with exit 1 and one line naming the shard (before: SIGBUS, exit 135, no
# word). Depending on where the truncation lands, the reader's check before
# each record or the SIGBUS guard says it; either names the shard.
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1
: "${IMSHARD_TRAIN:?IMSHARD_TRAIN must point at imshard-train}"

expect 0 "$IMSHARD" sample "$T/s" --classes 3 --per-class 10 --quiet
expect 0 "$IMSHARD" convert folder "$T/s" -o "$T/p" --val-ratio 0.25 --seed 3 --quiet
shard="$T/p/train-00000-of-00001.mdb"
cp "$shard" "$T/shard.bak"

# check_stop LOG: the run ended with exit 1 and a line naming the shard.
check_stop() {
  checks=$((checks + 1))
  local rc
  rc=$(tail -1 "$1")
  [ "$rc" = "rc=1" ] || { fail "exit ${rc#rc=}, expected 1"; sed 's/^/  | /' "$1" >&2; }
  checks=$((checks + 1))
  grep -E "train-00000-of-00001.mdb'.*(changed while being read|shrank while it was being read)" "$1" >/dev/null ||
    { fail "no line names the shard"; sed 's/^/  | /' "$1" >&2; }
}

# bench-load: truncated a second into a 60-second run.
( timeout 120 "$IMSHARD" bench-load "$T/p/train.json" --seconds 60 --batch 4 --size 32 \
    --threads 2 --quiet >"$T/bl.out" 2>"$T/bl.err"; echo "rc=$?" >>"$T/bl.err" ) &
sleep 1
truncate -s 8192 "$shard"
wait
check_stop "$T/bl.err"
cp "$T/shard.bak" "$shard"

# imshard-train: truncated once it has logged a step.
( timeout 120 "$IMSHARD_TRAIN" --train "$T/p/train.json" --val "$T/p/val.json" \
    --model convnet7 --size 16 --threads 1 --batch-size 4 --epochs 10000 \
    --log-dir "$T/log" --quiet >"$T/tr.out" 2>"$T/tr.err"; echo "rc=$?" >>"$T/tr.err" ) &
for _ in $(seq 1 300); do [ -s "$T/log/metrics.jsonl" ] && break; sleep 0.1; done
truncate -s 8192 "$shard"
wait
check_stop "$T/tr.err"
cp "$T/shard.bak" "$shard"

# The restored shard is whole again.
expect 0 "$IMSHARD" verify "$T/p/train.json" --quiet
finish
