#!/usr/bin/env bash
# imshard verify catches a flipped byte, a truncated shard and a manifest
# that disagrees with its shards, naming what is wrong.
source "$IMS_TESTLIB"

expect 0 "$IMSHARD" sample "$T/s" --classes 3 --per-class 8 --quiet
expect 0 "$IMSHARD" list "$T/s" -o "$T/s" --no-shuffle --quiet
expect 0 "$IMSHARD" pack "$T/s_train.lst" "$T/s" -o "$T/p/train" --quiet
expect 0 "$IMSHARD" verify "$T/p/train.json"
contains "$T/err" "OK: 24 records in 1 shard checked"
expect 0 "$IMSHARD" verify "$T/p/train.json" --decode --threads 2
contains "$T/err" "checked and decoded"
shard="$T/p/train-00000-of-00001.mdb"
cp "$shard" "$T/shard.bak"

# Flip one byte inside the payload of record 5 (the 6th listed file: the
# payload is the file's bytes, so its offset in the shard is found by
# searching for them).
src=$(awk -F'\t' 'NR==6 {print $3}' "$T/s_train.lst")
off=$(/usr/bin/python3 -c '
import sys
data = open(sys.argv[1], "rb").read(); src = open(sys.argv[2], "rb").read()
at = data.find(src); assert at > 0; print(at + len(src) // 2)' "$shard" "$T/s/$src")
/usr/bin/python3 -c '
import sys
p, o = sys.argv[1], int(sys.argv[2]); f = open(p, "r+b"); f.seek(o); b = f.read(1); f.seek(o); f.write(bytes([b[0] ^ 0x20]))' "$shard" "$off"
expect 1 "$IMSHARD" verify "$T/p/train.json"
contains "$T/err" "record 5"
contains "$T/err" "payload checksum mismatch"
contains "$T/err" "FAILED: 1 of 24 records bad"
cp "$T/shard.bak" "$shard"
expect 0 "$IMSHARD" verify "$T/p/train.json"

# A truncated shard.
truncate -s -8192 "$shard"
expect 1 "$IMSHARD" verify "$T/p/train.json"
one_line "$T/err"
contains "$T/err" "truncated"
cp "$T/shard.bak" "$shard"

# A manifest whose class counts disagree with the records.
cp "$T/p/train.json" "$T/manifest.bak"
/usr/bin/python3 -c '
import json, sys
j = json.load(open(sys.argv[1])); j["class_counts"][0] += 1; j["class_counts"][1] -= 1
json.dump(j, open(sys.argv[1], "w"))' "$T/p/train.json"
expect 1 "$IMSHARD" verify "$T/p/train.json"
contains "$T/err" "has 8 records, the manifest says 9"
cp "$T/manifest.bak" "$T/p/train.json"

# A manifest with a wrong digest (records replaced) is caught.
/usr/bin/python3 -c '
import json, sys
j = json.load(open(sys.argv[1])); j["shards"][0]["digest"] ^= 1
json.dump(j, open(sys.argv[1], "w"))' "$T/p/train.json"
expect 1 "$IMSHARD" verify "$T/p/train.json"
contains "$T/err" "digest"
cp "$T/manifest.bak" "$T/p/train.json"

expect 1 "$IMSHARD" verify "$T/none.json"
one_line "$T/err"
expect 2 "$IMSHARD" verify "$T/p/train.json" --threads 0
one_line "$T/err"
finish
