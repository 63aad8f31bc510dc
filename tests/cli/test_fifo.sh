#!/usr/bin/env bash
# Nothing that is not a regular file is opened for reading, so nothing
# hangs: a FIFO (and a folder, a device, a socket) named .jpg in a list is
# skipped and named by pack; a manifest that is a FIFO, or whose shard is
# one, ends verify, extract, info, bench-load and imshard-train with one
# line. Every command runs under `timeout`: on code that opens a FIFO
# blindly the test fails (exit 124) instead of hanging.
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1
: "${IMSHARD_TRAIN:?IMSHARD_TRAIN must point at imshard-train}"
t() { timeout 30 "$@"; }

expect 0 "$IMSHARD" sample "$T/s" --classes 2 --per-class 6 --quiet
expect 0 "$IMSHARD" list "$T/s" -o "$T/s" --no-shuffle --quiet

# --- pack: non-regular files among the images are skipped and named ------
cls=$(ls "$T/s" | grep -v '\.' | head -1)
mkfifo "$T/s/$cls/pipe.jpg"
mkdir "$T/s/$cls/folder.jpg"
ln -s /dev/zero "$T/s/$cls/zero.jpg"
/usr/bin/python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$T/s/$cls/sock.jpg"
n=$(wc -l <"$T/s_train.lst")
{ cat "$T/s_train.lst"
  printf '%d\t0\t%s/pipe.jpg\n' "$n" "$cls"
  printf '%d\t0\t%s/folder.jpg\n' "$((n + 1))" "$cls"
  printf '%d\t0\t%s/zero.jpg\n' "$((n + 2))" "$cls"
  printf '%d\t0\t%s/sock.jpg\n' "$((n + 3))" "$cls"
} >"$T/odd.lst"
expect 0 t "$IMSHARD" pack "$T/odd.lst" "$T/s" -o "$T/p/train"
same "$(json "$T/p/train.json" 'j["records"], j["skipped"]')" "$n 4" "(records, skipped)"
tsv="$T/p/train.errors.tsv"
contains "$tsv" "$cls/pipe.jpg	not a regular file (a FIFO)"
contains "$tsv" "$cls/folder.jpg	not a regular file (a folder)"
contains "$tsv" "$cls/zero.jpg	not a regular file (a character device)"
contains "$tsv" "$cls/sock.jpg	not a regular file (a socket)"
contains "$T/err" "pipe.jpg"
expect 0 t "$IMSHARD" verify "$T/p/train.json" --quiet

# --- a manifest that is a FIFO -------------------------------------------
mkfifo "$T/fifo.json"
for cmd in verify info bench-load; do
  expect 1 t "$IMSHARD" $cmd "$T/fifo.json"
  one_line "$T/err"
  contains "$T/err" "fifo.json': not a regular file (a FIFO)"
done
expect 1 t "$IMSHARD" extract "$T/fifo.json" -o "$T/x"
one_line "$T/err"
contains "$T/err" "not a regular file (a FIFO)"
expect 1 t "$IMSHARD_TRAIN" --train "$T/fifo.json" --val "$T/p/train.json" --model convnet7 --size 16 --threads 1 --quiet
one_line "$T/err"
contains "$T/err" "fifo.json': not a regular file (a FIFO)"

# --- a FIFO at LOGDIR/metrics.jsonl (a new run truncates it, a resumed
# one appends): refused at once, not opened for writing and waited on
mkdir -p "$T/logf"
mkfifo "$T/logf/metrics.jsonl"
expect 0 t "$IMSHARD_TRAIN" --train "$T/p/train.json" --model convnet7 --size 16 --batch-size 4 --threads 1 --quiet \
  --max-steps 1 --epochs 2 --checkpoint-dir "$T/ckf"
cp "$T/ckf/checkpoint.safetensors" "$T/ckf.before"
for extra in "--max-steps 1" "--resume --epochs 2 --checkpoint-dir $T/ckf"; do
  # shellcheck disable=SC2086
  expect 1 t "$IMSHARD_TRAIN" --train "$T/p/train.json" --model convnet7 --size 16 --batch-size 4 --threads 1 --quiet \
    --log-dir "$T/logf" $extra
  one_line "$T/err"
  contains "$T/err" "logf/metrics.jsonl': not a regular file (a FIFO)"
done
expect 0 cmp "$T/ckf/checkpoint.safetensors" "$T/ckf.before"

# --- a shard that is a FIFO (with the manifest's size made to agree) ------
shard="$T/p/train-00000-of-00001.mdb"
mv "$shard" "$T/real.mdb"
mkfifo "$shard"
cp "$T/p/train.json" "$T/p/real.json"
for bytes in keep 0; do
  if [ $bytes = 0 ]; then
    /usr/bin/python3 -c '
import json, sys
j = json.load(open(sys.argv[1])); j["shards"][0]["bytes"] = 0
json.dump(j, open(sys.argv[1], "w"))' "$T/p/train.json"
  fi
  for cmd in verify bench-load; do
    expect 1 t "$IMSHARD" $cmd "$T/p/train.json"
    one_line "$T/err"
    contains "$T/err" "train-00000-of-00001.mdb': not a regular file (a FIFO)"
  done
  expect 1 t "$IMSHARD" extract "$T/p/train.json" -o "$T/x"
  one_line "$T/err"
  contains "$T/err" "not a regular file (a FIFO)"
  expect 1 t "$IMSHARD" info "$T/p/train.json"
  contains "$T/err" "train-00000-of-00001.mdb' is not a regular file (a FIFO)"
  expect 1 t "$IMSHARD_TRAIN" --train "$T/p/train.json" --val "$T/p/real.json" --model convnet7 --size 16 --threads 1 --quiet
  one_line "$T/err"
  contains "$T/err" "not a regular file (a FIFO)"
done
finish
