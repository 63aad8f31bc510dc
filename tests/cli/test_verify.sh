#!/usr/bin/env bash
# imshard verify catches a flipped byte, a truncated shard and a manifest
# that disagrees with its shards or holds class names pack refuses, naming
# what is wrong.
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1

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
# the bad records by class, from the damaged record's header
cls=$(json "$T/p/train.json" "j['classes'][$(awk -F'\t' 'NR==6 {print $2}' "$T/s_train.lst")]")
contains "$T/err" "bad records by class: '$cls' 1 of 8"
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
j = json.load(open(sys.argv[1])); d = j["shards"][0]["digest"]
j["shards"][0]["digest"] = "%016x" % (int(d, 16) ^ 1)
json.dump(j, open(sys.argv[1], "w"))' "$T/p/train.json"
expect 1 "$IMSHARD" verify "$T/p/train.json"
contains "$T/err" "digest"
cp "$T/manifest.bak" "$T/p/train.json"

# --- what the format 1 digest could not see (each passed before format 2) ---
edit="$IMS_SRC/tests/cli/split_edit.py"
fresh() { # fresh NAME [pack args]: a clean copy of the split in $T/$1
  rm -rf "$T/$1"
  expect 0 "$IMSHARD" pack "$T/s_train.lst" "$T/s" -o "$T/$1/train" --quiet "${@:2}"
}

# The same list re-packed in another order, copied over the original: same
# records, same classes, same shard size; only the order differs.
(head -1 "$T/s_train.lst"; tail -n +2 "$T/s_train.lst" | sort -t$'\t' -k3 -r) |
  awk -F'\t' -v OFS='\t' '{print NR-1, $2, $3}' >"$T/reordered.lst"
fresh o
expect 0 "$IMSHARD" pack "$T/reordered.lst" "$T/s" -o "$T/o2/train" --quiet
same "$(stat -c %s "$T/o/train-00000-of-00001.mdb")" "$(stat -c %s "$T/o2/train-00000-of-00001.mdb")" \
  "(the reordered shard must have the original's size, or this case tests nothing)"
cp "$T/o2/train-00000-of-00001.mdb" "$T/o/train-00000-of-00001.mdb"
expect 1 "$IMSHARD" verify "$T/o/train.json" --decode
contains "$T/err" "digest"
contains "$T/err" "FAILED"

# One label changed, its header CRC and the class counts fixed up to match:
# only the digest can tell.
fresh l
expect 0 /usr/bin/python3 "$edit" relabel "$T/l/train.json" 5 2
expect 1 "$IMSHARD" verify "$T/l/train.json"
contains "$T/err" "train-00000-of-00001.mdb': digest"

# The last record dropped, the manifest's counts fixed up to match.
fresh d
expect 0 /usr/bin/python3 "$edit" drop-last "$T/d/train.json"
expect 1 "$IMSHARD" verify "$T/d/train.json"
contains "$T/err" "digest"

# Two shards swapped (same record counts).
fresh w --shards 2
mv "$T/w/train-00000-of-00002.mdb" "$T/w/x"
mv "$T/w/train-00001-of-00002.mdb" "$T/w/train-00000-of-00002.mdb"
mv "$T/w/x" "$T/w/train-00001-of-00002.mdb"
expect 1 "$IMSHARD" verify "$T/w/train.json"
one_line "$T/err"

# A shard of another split. Copied over a shard of this one, its records
# differ (the reorder case above) and the digest fails. A manifest that
# names another split's shard fails at once, before any record is read:
fresh a
expect 0 "$IMSHARD" pack "$T/s_train.lst" "$T/s" -o "$T/a/val" --quiet
sed -i 's/"train-00000-of-00001.mdb"/"val-00000-of-00001.mdb"/' "$T/a/train.json"
expect 1 "$IMSHARD" verify "$T/a/train.json"
one_line "$T/err"
contains "$T/err" "'val-00000-of-00001.mdb', not 'train-00000-of-00001.mdb'"
# ... and a whole split renamed into another (manifest name and shard files
# edited to 'train'): its digests were made for 'val', even though the
# records are the same list's.
fresh a
expect 0 "$IMSHARD" pack "$T/s_train.lst" "$T/s" -o "$T/a/val" --quiet
sed 's/"val"/"train"/; s/val-00000-of-00001.mdb/train-00000-of-00001.mdb/' "$T/a/val.json" >"$T/a/train.json"
cp "$T/a/val-00000-of-00001.mdb" "$T/a/train-00000-of-00001.mdb"
expect 1 "$IMSHARD" verify "$T/a/train.json"
contains "$T/err" "digest"

# An encoding no packer writes, and one the records do not match.
fresh e
sed -i 's/"encoding":\t"keep"/"encoding": "zzz"/' "$T/e/train.json"
expect 1 "$IMSHARD" verify "$T/e/train.json"
one_line "$T/err"
contains "$T/err" "encoding 'zzz' is not keep, jpeg, png or raw"
fresh e
sed -i 's/"encoding":\t"keep"/"encoding": "png"/' "$T/e/train.json"
expect 1 "$IMSHARD" verify "$T/e/train.json"
contains "$T/err" "24 of 24 records do not match the manifest's encoding 'png' (record 0: a kept "
contains "$T/err" "FAILED"

# A manifest that says the records carry extra labels they do not: each
# record is bad, and info's "3 float labels per record" would be false.
# Class names pack refuses (repeated, holding a TAB or a line break):
# named, exit 1 (before, both passed verify with exit 0).
setjson() { # setjson MANIFEST PYTHON: edits the manifest as j
  /usr/bin/python3 -c "import json, sys
j = json.load(open(sys.argv[1])); $2
json.dump(j, open(sys.argv[1], 'w'))" "$1"
}
fresh x
setjson "$T/x/train.json" 'j["extra_labels"] = 3'
expect 1 "$IMSHARD" verify "$T/x/train.json"
contains "$T/err" "record 0 in shard '$T/x/train-00000-of-00001.mdb': 0 extra labels, the manifest's \"extra_labels\" is 3"
contains "$T/err" "FAILED: 24 of 24 records bad"
# no header agrees with the manifest: no class to count them under
lacks "$T/err" "bad records by class"
fresh x
setjson "$T/x/train.json" 'j["classes"][1] = j["classes"][0]'
expect 1 "$IMSHARD" verify "$T/x/train.json"
contains "$T/err" "class 1 ('$(json "$T/x/train.json" 'j["classes"][0]')') has the name of class 0: pack refuses repeated class names"
contains "$T/err" "FAILED"
fresh x
setjson "$T/x/train.json" 'j["classes"][2] = "a\tb"'
expect 1 "$IMSHARD" verify "$T/x/train.json"
contains "$T/err" "class 2 ('a\x09b') holds a TAB: pack refuses such class names"
fresh x
setjson "$T/x/train.json" 'j["classes"][0] = "a\nb\x1b[2J"'
expect 1 "$IMSHARD" verify "$T/x/train.json"
contains "$T/err" "class 0 ('a\x0ab\x1b[2J') holds a line break"
checks=$((checks + 1))
! grep -q $'\x1b' "$T/err" || fail "an ESC from a class name reached stderr"
# extract refuses such names before writing anything: the classes file it
# writes would be refused by pack.
expect 1 "$IMSHARD" extract "$T/x/train.json" -o "$T/x/out"
one_line "$T/err"
contains "$T/err" "extract.classes could not be packed again"
absent "$T/x/out"

# --- format 1 manifests: read, never called verified by digest, --rehash ---
fresh v
cp "$T/v/train.json" "$T/v2.json"
expect 0 /usr/bin/python3 "$edit" format1 "$T/v/train.json"
expect 0 "$IMSHARD" verify "$T/v/train.json"
same "$(grep -c 'format 1 manifest' "$T/err")" 2 "(the warning and the OK line)"
contains "$T/err" "--rehash"
contains "$T/err" "shard digests NOT checked"
lacks "$T/err" "digests match"
# A damaged format 1 split is not rehashed.
cp "$T/v/train-00000-of-00001.mdb" "$T/v.bak"
truncate -s -8192 "$T/v/train-00000-of-00001.mdb"
cp "$T/v/train.json" "$T/v1.json"
expect 1 "$IMSHARD" verify "$T/v/train.json" --rehash
cmp -s "$T/v/train.json" "$T/v1.json" || fail "a failed check rewrote the manifest"
cp "$T/v.bak" "$T/v/train-00000-of-00001.mdb"
# Not while a writer holds the split's lock.
if command -v flock >/dev/null; then
  flock "$T/v/train.lock" sleep 5 &
  sleep 0.5
  expect 1 "$IMSHARD" verify "$T/v/train.json" --rehash
  contains "$T/err" "another process is writing it"
  cmp -s "$T/v/train.json" "$T/v1.json" || fail "a locked split's manifest was rewritten"
  wait
fi
expect 0 "$IMSHARD" verify "$T/v/train.json" --rehash
contains "$T/err" "rewritten with format 2 digests"
same "$(json "$T/v/train.json" 'j["format_version"]')" 2
# The digests are the writer's own, and the rest of the manifest is kept.
same "$(json "$T/v/train.json" 'json.dumps(j, sort_keys=True)')" "$(json "$T/v2.json" 'json.dumps(j, sort_keys=True)')"
expect 0 "$IMSHARD" verify "$T/v/train.json"
contains "$T/err" "shard digests match"
lacks "$T/err" "format 1"
expect 0 "$IMSHARD" verify "$T/v/train.json" --rehash
contains "$T/err" "nothing to rewrite"

# The OK line names the manifest through ims_escape (before: raw).
esc="$T/v"$'\e'"[2J"
mkdir -p "$esc"
cp "$T/p/train.json" "$T/p/train-00000-of-00001.mdb" "$esc/"
expect 0 "$IMSHARD" verify "$esc/train.json"
contains "$T/err" "verify: '$T/v\x1b[2J/train.json' OK"
checks=$((checks + 1))
! grep -q $'\e' "$T/err" || fail "verify printed an ESC raw"

# Files named as this split's shards that its manifest does not list (a
# shard copied in, one of another shard count) and an interrupted pack's
# working files are not part of the split: the split verifies, and a
# warning names each (before: "OK" and nothing more). Other names stay
# unmentioned.
mkdir -p "$T/st"
cp "$T/p/train.json" "$T/p/train-00000-of-00001.mdb" "$T/st/"
cp "$T/p/train-00000-of-00001.mdb" "$T/st/train-00001-of-00001.mdb"
cp "$T/p/train-00000-of-00001.mdb" "$T/st/train-00000-of-00002.mdb"
: >"$T/st/train-00003.mdb.partial"
: >"$T/st/train-00000.mdb.compact"
: >"$T/st/val-00000-of-00001.mdb"
: >"$T/st/train-0000-of-00001.mdb"
: >"$T/st/train.lock"
expect 0 "$IMSHARD" verify "$T/st/train.json" --quiet
contains "$T/err" "warning: verify: '$T/st/train-00000-of-00002.mdb' is named as a shard of 'train' but '$T/st/train.json' does not list it"
contains "$T/err" "'$T/st/train-00001-of-00001.mdb' is named as a shard"
contains "$T/err" "'$T/st/train-00003.mdb.partial' is a working file of an interrupted pack of 'train'"
contains "$T/err" "'$T/st/train-00000.mdb.compact' is a working file"
same "$(grep -c 'warning: verify:' "$T/err")" 4 "(stray files named)"
same "$(wc -l <"$T/err")" 4 "(one line each, nothing else with --quiet)"
expect 0 "$IMSHARD" verify "$T/p/train.json" --quiet
same "$(wc -c <"$T/err")" 0 "(a split alone: no warning)"

expect 1 "$IMSHARD" verify "$T/none.json"
one_line "$T/err"
expect 2 "$IMSHARD" verify "$T/p/train.json" --threads 0
one_line "$T/err"

# A class whose every record is damaged is named as one, before the
# classes with fewer (before: 9 records named one by one, and a class
# lost whole had to be pieced together from their indices)
fresh wc
expect 0 /usr/bin/python3 "$edit" damage "$T/wc/train.json" $(awk -F'\t' '$2 == 2 || $1 == 3 {print $1}' "$T/s_train.lst")
expect 1 "$IMSHARD" verify "$T/wc/train.json"
c0=$(json "$T/wc/train.json" "j['classes'][0]")
c2=$(json "$T/wc/train.json" "j['classes'][2]")
contains "$T/err" "imshard: verify: bad records by class: '$c2' 8 of 8 (all of them), '$c0' 1 of 8"
contains "$T/err" "FAILED: 9 of 24 records bad"

# --threads (-j) checks shards in parallel: the same lines in the same
# order whatever the count; -q prints the problems, not the OK line.
mkdir -p "$T/dj.fx" "$T/dj/a" "$T/dj/b"
"$IMS_FIXTURES" "$T/dj.fx" || fail "make_images failed"
for i in 1 2 3 4 5; do cp "$T/dj.fx/rgb.jpg" "$T/dj/a/r$i.jpg"; cp "$T/dj.fx/gray.jpg" "$T/dj/b/g$i.jpg"; done
cp "$T/dj.fx/truncated_eoi.jpg" "$T/dj/a/t1.jpg"
cp "$T/dj.fx/truncated_eoi.jpg" "$T/dj/b/t2.jpg"
expect 0 "$IMSHARD" convert folder "$T/dj" -o "$T/djp" --val-ratio 0 --shards 3 --seed 2 --quiet
same "$(json "$T/djp/train.json" 'len({n // 4 for n, s in enumerate(open("'"$T/djp/train.lst"'")) if "/t" in s})')" 2 \
  "(the cut JPEGs in two shards, or this case tests nothing)"
expect 1 "$IMSHARD" verify "$T/djp/train.json" --decode -j 1
cp "$T/err" "$T/dj1.err"
same "$(grep -c 'cannot decode' "$T/dj1.err")" 2 "(both cut JPEGs named)"
contains "$T/dj1.err" "FAILED: 2 of 12 records bad"
for j in "-j 3" "--threads 2" "-q"; do
  # shellcheck disable=SC2086
  expect 1 "$IMSHARD" verify "$T/djp/train.json" --decode $j
  # the same lines in the same order: shards checked at once name their
  # records in shard order, not in the order they finish
  same "$(cat "$T/err")" "$(cat "$T/dj1.err")" "(verify $j: the lines of -j 1)"
done
expect 0 "$IMSHARD" verify "$T/p/train.json" -q
same "$(cat "$T/err")" "" "(-q: no OK line)"

finish
