#!/usr/bin/env bash
# imshard extract: keep-mode records come back byte-identical; selected
# indices; raw records as PNG; bad indices and failures leave no folder.
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1
source "$(dirname "$0")/fixtures.sh"

make_odd_tree "$T/odd"
rm -rf "$T/odd/bad"
expect 0 "$IMSHARD" list "$T/odd" -o "$T/odd/l" --no-shuffle --quiet
expect 0 "$IMSHARD" pack "$T/odd/l_train.lst" "$T/odd" -o "$T/p/keep" --shards 2 --quiet
expect 0 "$IMSHARD" extract "$T/p/keep.json" -o "$T/x"
n=$(wc -l <"$T/odd/l_train.lst")
contains "$T/err" "extracted $n records"
# Record i is list row i: compare every file byte for byte.
i=0
while IFS=$'\t' read -r idx label path; do
  f=$(printf '%08d' $i)
  ext=jpg
  case "$(head -c 4 "$T/odd/$path" | od -An -tx1 | tr -d ' ')" in 89504e47) ext=png ;; esac
  checks=$((checks + 1))
  cmp -s "$T/odd/$path" "$T/x/$f.$ext" || fail "record $i ($path) is not byte-identical"
  i=$((i + 1))
done <"$T/odd/l_train.lst"
same "$(wc -l <"$T/x/extract.lst")" "$n"
same "$(cat "$T/x/extract.classes" | paste -sd,)" "good"
# Extracted files re-pack to the same records.
expect 0 "$IMSHARD" pack "$T/x/extract.lst" "$T/x" -o "$T/p2/keep" --shards 2 --classes "$T/x/extract.classes" --quiet
for s in 0 1; do
  f=keep-0000$s-of-00002.mdb
  checks=$((checks + 1))
  cmp -s "$T/p/$f" "$T/p2/$f" || fail "re-packed $f differs"
done

# Extra labels come back as the same floats, so the extracted list packs
# the same records (before: written with %f, 1e-07 came back as 0).
awk -F'\t' 'BEGIN{OFS="\t"} {print $1, $2, (NR == 1 ? "1e-07" : "0.1234567"), $3}' \
  "$T/odd/l_train.lst" >"$T/odd/extra.lst"
expect 0 "$IMSHARD" pack "$T/odd/extra.lst" "$T/odd" -o "$T/p/extra" --quiet
expect 0 "$IMSHARD" extract "$T/p/extra.json" -o "$T/xe" --quiet
same "$(cut -f3 "$T/xe/extract.lst" | sort -u | paste -sd,)" "0.1234567,1e-07"
expect 0 "$IMSHARD" pack "$T/xe/extract.lst" "$T/xe" -o "$T/p3/extra" --classes "$T/xe/extract.classes" --quiet
checks=$((checks + 1))
cmp -s "$T/p/extra-00000-of-00001.mdb" "$T/p3/extra-00000-of-00001.mdb" || fail "re-packed extra labels differ"

expect 0 "$IMSHARD" extract "$T/p/keep.json" -o "$T/sel" --index 3 -i 0 --quiet
same "$(ls "$T/sel" | grep -c -v extract)" 2
exists "$T/sel/00000003.jpg"
same "$(cut -f1 "$T/sel/extract.lst" | paste -sd,)" "3,0"
lacks "$T/err" "warning"
same "$(cat "$T/err")" "" "(--quiet: no summary)"
# --output is -o's long name; without -q the summary is said, with -q not
expect 0 "$IMSHARD" extract "$T/p/keep.json" --output "$T/sel2" -i 3 -i 0
same "$(cat "$T/err")" "imshard: extracted 2 records to '$T/sel2'" "(the summary)"
expect 0 cmp "$T/sel/extract.lst" "$T/sel2/extract.lst"
expect 0 "$IMSHARD" extract "$T/p/keep.json" --output "$T/sel3" -i 3 -q
same "$(cat "$T/err")" "" "(-q: no summary)"
same "$(ls "$T/sel3" | paste -sd,)" "00000003.jpg,extract.classes,extract.lst" "(-i 3 alone)"
# Over an earlier extraction: its image files stay (they may be the
# user's), and are counted and told, since extract.lst leaves them out
# but a listing of the folder would take them (before: not a word).
cp -r "$T/x" "$T/over"
: >"$T/over/100000000.jpg" # record 10^8's name: a digit more
expect 0 "$IMSHARD" extract "$T/p/keep.json" -o "$T/over" --index 3 -i 0 --quiet
one_line "$T/err"
contains "$T/err" "imshard: warning: extract: '$T/over' also holds $((n - 1)) image files this run did not write (an earlier extraction's?), not in extract.lst: '00000001.$(cut -f3 "$T/x/extract.lst" | sed -n 2p | sed 's/.*\.//')' and others"
same "$(wc -l <"$T/over/extract.lst")" 2
expect 0 "$IMSHARD" extract "$T/p/keep.json" -o "$T/over" --quiet
contains "$T/err" "also holds 1 image file this run did not write (an earlier extraction's?), not in extract.lst: '100000000.jpg'"
rm "$T/over/100000000.jpg"
expect 0 "$IMSHARD" extract "$T/p/keep.json" -o "$T/over" --quiet
lacks "$T/err" "warning"

# raw records come back as PNG images of the stored size.
expect 0 "$IMSHARD" pack "$T/odd/l_train.lst" "$T/odd" -o "$T/p/raw" --encoding raw --resize 20 --quiet
expect 0 "$IMSHARD" extract "$T/p/raw.json" -o "$T/raw" -i 0 --quiet
/usr/bin/python3 -c '
import sys
from PIL import Image
im = Image.open(sys.argv[1]); assert min(im.size) == 20, im.size' "$T/raw/00000000.png" || fail "raw extract is not a 20px PNG"

# The summary names the folder through ims_escape, as every message does
# (before: ESC came out raw).
esc="$T/e"$'\e'"[31mX"
expect 0 "$IMSHARD" extract "$T/p/keep.json" -o "$esc" -i 0
contains "$T/err" "extracted 1 record to '$T/e\x1b[31mX'"
checks=$((checks + 1))
! grep -q $'\e' "$T/err" || fail "extract printed an ESC raw"
exists "$esc/00000000.jpg"

# A refused or failed run leaves no folder it made (before: an index out
# of range left -o's folder, empty), and never removes one that was there.
expect 2 "$IMSHARD" extract "$T/p/keep.json" -o "$T/bad" --index 9999
one_line "$T/err"
contains "$T/err" "out of range"
absent "$T/bad"
expect 2 "$IMSHARD" extract "$T/p/keep.json" -o "$T/bad/x/y" -i 0 -i 9999
one_line "$T/err"
absent "$T/bad"
mkdir -p "$T/there"
expect 2 "$IMSHARD" extract "$T/p/keep.json" -o "$T/there/new" --index 9999
absent "$T/there/new"
exists "$T/there"
expect 2 "$IMSHARD" extract "$T/p/keep.json" -o "$T/there" --index 9999
exists "$T/there"
# The first record unreadable (the manifest says 2 extra labels, records
# hold none): exit 1, no folder.
mkdir -p "$T/x2"
cp "$T/p/keep-0000"[01]"-of-00002.mdb" "$T/x2/"
sed 's/"extra_labels":\t0/"extra_labels":\t2/' "$T/p/keep.json" >"$T/x2/keep.json"
expect 1 "$IMSHARD" extract "$T/x2/keep.json" -o "$T/bad/z"
one_line "$T/err"
contains "$T/err" "0 extra labels, the manifest's \"extra_labels\" is 2"
absent "$T/bad"
# A run that fails partway into a folder of an earlier extraction leaves
# no extract.lst: the earlier list would name the new run's files with
# the earlier split's labels (before: it stayed). A folder at record 2's
# name makes the write of that record fail after records 0 and 1.
expect 0 "$IMSHARD" extract "$T/p/raw.json" -o "$T/again" --quiet
exists "$T/again/extract.lst"
rm -f "$T/again/00000002.png"
mkdir "$T/again/00000002.jpg"
expect 1 "$IMSHARD" extract "$T/p/keep.json" -o "$T/again" --quiet
one_line "$T/err"
contains "$T/err" "00000002.jpg"
absent "$T/again/extract.lst"
absent "$T/again/extract.classes"
# A record given twice is bad usage, nothing made (before: written once
# and listed twice in extract.lst, so packing it again doubled it).
expect 2 "$IMSHARD" extract "$T/p/keep.json" -o "$T/bad" -i 1 -i 3 --index 1
one_line "$T/err"
contains "$T/err" "--index 1 is given more than once"
absent "$T/bad"
expect 2 "$IMSHARD" extract "$T/p/keep.json" -o "$T/bad" --index x
one_line "$T/err"
expect 2 "$IMSHARD" extract "$T/p/keep.json"
one_line "$T/err"
finish
