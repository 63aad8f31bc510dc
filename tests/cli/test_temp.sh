#!/usr/bin/env bash
# Temporaries (NAME.tmp.<pid>) are created exclusively and never through a
# link: a symbolic link planted at the name a command will use leaves the
# file it points to untouched (before, extract, pack and the trainer
# wrote through it). Stale temporaries of dead processes are removed by
# the next writer of that NAME: a checkpoint write killed by SIGTERM
# leaves checkpoint.safetensors.tmp.<pid>, and the next run sweeps it.
#
# A command's temporary carries its pid; `bash -c '...; exec CMD'` plants
# the link at $$, which the exec'd command keeps.
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1
: "${IMSHARD_TRAIN:?IMSHARD_TRAIN must point at imshard-train}"

echo precious >"$T/victim"
untouched() {
  checks=$((checks + 1))
  [ "$(cat "$T/victim")" = precious ] || fail "the link's target was overwritten ($*)"
}
# planted DIR NAME CMD...: runs CMD with a link to $T/victim at
# DIR/NAME.tmp.<CMD's pid>.
planted() {
  local dir=$1 name=$2
  shift 2
  run bash -c 'ln -s "$1" "$2/$3.tmp.$$" && shift 3 && exec "$@"' _ "$T/victim" "$dir" "$name" "$@"
}
# A pid no process has: a reaped child's.
bash -c 'exit 0' &
dead=$!
wait

expect 0 "$IMSHARD" sample "$T/s" --classes 2 --per-class 6 --quiet
mkdir -p "$T/l"
planted "$T/l" s_train.lst "$IMSHARD" list "$T/s" -o "$T/l/s" --no-shuffle --quiet
same "$rc" 0 "list"
untouched list
same "$(wc -l <"$T/l/s_train.lst")" 12
lst="$T/l/s_train.lst"

# pack: the manifest and the errors report.
mkdir -p "$T/p"
cp "$lst" "$T/miss.lst"
printf '12\t0\tno/such.jpg\n' >>"$T/miss.lst"
echo stale >"$T/p/train.json.tmp.$dead"
echo stale >"$T/p/train.errors.tsv.tmp.$dead"
planted "$T/p" train.json "$IMSHARD" pack "$T/miss.lst" "$T/s" -o "$T/p/train" --quiet
same "$rc" 0 "pack"
untouched manifest
expect 0 "$IMSHARD" verify "$T/p/train.json" --quiet
absent "$T/p/train.json.tmp.$dead"
absent "$T/p/train.errors.tsv.tmp.$dead"
planted "$T/p" train.errors.tsv "$IMSHARD" pack "$T/miss.lst" "$T/s" -o "$T/p/train" --force --quiet
same "$rc" 0 "pack (errors.tsv)"
untouched errors.tsv
contains "$T/p/train.errors.tsv" "no/such.jpg"
same "$(ls "$T/p" | grep -c '\.tmp\.')" 0 "temporaries left in the split's folder"

# extract: each file and the list it writes.
mkdir -p "$T/x"
echo stale >"$T/x/00000003.jpg.tmp.$dead"
echo mine >"$T/x/notes.tmp.$dead" # not extract's: kept
planted "$T/x" 00000000.jpg "$IMSHARD" extract "$T/p/train.json" -o "$T/x" --quiet
same "$rc" 0 "extract"
untouched "extract 00000000.jpg"
cmp -s "$T/x/00000000.jpg" "$T/s/$(awk -F'\t' 'NR==1 {print $3}' "$lst")" || fail "record 0 extracted wrong"
absent "$T/x/00000003.jpg.tmp.$dead"
exists "$T/x/notes.tmp.$dead"
planted "$T/x" extract.lst "$IMSHARD" extract "$T/p/train.json" -o "$T/x" --quiet
same "$rc" 0 "extract (list)"
untouched extract.lst
same "$(wc -l <"$T/x/extract.lst")" 12

# imshard-train: checkpoints and the summary.
expect 0 "$IMSHARD" convert folder "$T/s" -o "$T/c" --val-ratio 0.25 --seed 3 --quiet
mkdir -p "$T/ck" "$T/log"
# What a SIGTERM during a checkpoint write leaves behind; and a kill
# between the creation and the removal of the probe that checks a file can
# be made in each folder (before: imshard-train.probe.PID, which nothing
# swept)
echo half >"$T/ck/checkpoint.safetensors.tmp.$dead"
: >"$T/ck/imshard-train.lock.tmp.$dead"
: >"$T/log/imshard-train.lock.tmp.$dead"
# --force: each run here is a new one over the last one's files
fit=("$IMSHARD_TRAIN" --train "$T/c/train.json" --val "$T/c/val.json" --model convnet7
  --size 16 --threads 1 --batch-size 4 --max-steps 2 --checkpoint-dir "$T/ck" --quiet --force)
planted "$T/ck" checkpoint.safetensors "${fit[@]}" --log-dir "$T/log"
same "$rc" 0 "train"
untouched checkpoint
absent "$T/ck/checkpoint.safetensors.tmp.$dead"
absent "$T/ck/imshard-train.lock.tmp.$dead"
absent "$T/log/imshard-train.lock.tmp.$dead"
exists "$T/ck/checkpoint.safetensors"
planted "$T/log" summary.json "${fit[@]}" --log-dir "$T/log"
same "$rc" 0 "train (summary)"
untouched summary
same "$(json "$T/log/summary.json" 'j["world"]')" 1 "summary.json written"
same "$(ls "$T/ck" "$T/log" | grep -c '\.tmp\.')" 0 "temporaries left by training"
# The real thing: SIGTERM while a checkpoint is being written (a resnet18
# checkpoint, ~90 MB, takes long enough to catch), then the next run.
rm -rf "$T/ck3"
caught=0
for attempt in 1 2 3; do
  "$IMSHARD_TRAIN" --train "$T/c/train.json" --val "$T/c/val.json" --model resnet18 --size 16 \
    --threads 1 --batch-size 4 --epochs 1000 --checkpoint-dir "$T/ck3" --checkpoint-every 1 \
    --quiet 2>/dev/null &
  pid=$!
  for _ in $(seq 1 3000); do
    if ls "$T/ck3" 2>/dev/null | grep -q "\.tmp\.$pid\$"; then kill -TERM $pid; caught=1; break; fi
    kill -0 $pid 2>/dev/null || break
    sleep 0.005
  done
  kill -TERM $pid 2>/dev/null
  wait $pid 2>/dev/null
  [ $caught = 1 ] && [ -e "$T/ck3/checkpoint.safetensors.tmp.$pid" ] && break
  caught=0
done
if [ $caught = 1 ]; then
  expect 0 "$IMSHARD_TRAIN" --train "$T/c/train.json" --val "$T/c/val.json" --model convnet7 \
    --size 16 --threads 1 --batch-size 4 --max-steps 1 --checkpoint-dir "$T/ck3/other" --quiet
  exists "$T/ck3/checkpoint.safetensors.tmp.$pid" # another folder's run leaves it
  expect 0 "$IMSHARD_TRAIN" --train "$T/c/train.json" --val "$T/c/val.json" --model resnet18 \
    --size 16 --threads 1 --batch-size 4 --max-steps 1 --checkpoint-dir "$T/ck3" --quiet
  absent "$T/ck3/checkpoint.safetensors.tmp.$pid"
else
  echo "note: no checkpoint write caught by SIGTERM in 3 tries; the planted stale temporary above covers the sweep"
fi

# metrics.jsonl is appended to, not renamed: a link at its name is refused.
mkdir -p "$T/log2"
ln -s "$T/victim" "$T/log2/metrics.jsonl"
expect 1 "${fit[@]}" --log-dir "$T/log2"
one_line "$T/err"
contains "$T/err" "metrics.jsonl': it is a symbolic link"
untouched metrics.jsonl
# bench-load --dump writes its samples the same way.
# (a link for each label the first sample may have: 2 classes)
mkdir -p "$T/dump"
ln -s "$T/victim" "$T/dump/sample_0_label0.png"
ln -s "$T/victim" "$T/dump/sample_0_label1.png"
expect 0 "$IMSHARD" bench-load "$T/c/val.json" --val --epochs 1 --batch 2 --size 16 --dump 1 "$T/dump" --quiet
untouched "bench-load --dump"
same "$(find "$T/dump" -type f -name 'sample_0_label*.png' -exec head -c 4 {} \; | od -An -tx1 | tr -d ' ')" 89504e47 \
  "the dumped sample is a PNG file in place of its link"
finish
