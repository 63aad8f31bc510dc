#!/usr/bin/env bash
# imshard convert caltech256 on the fixture of
# tests/fixtures/make_caltech256.py (257 real class folders, 1-3 JPEGs each
# and 10 in 001.ak47 and 257.clutter, 198.spider/RENAME2, the empty
# 056.dog/greg/vision309/, greyscale JPEGs): record counts, classes.txt,
# labels of named files, stratified val counts, --no-clutter, balanced
# subsets (disjoint splits), determinism, verify --decode, the notes, and
# a wrong root named in one line with exit 1.
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1

gen() { /usr/bin/python3 "$IMS_SRC/tests/fixtures/make_caltech256.py" "$@" || fail "generator failed: $*"; }
# label_of LST PATH: the label column of PATH's row in LST (empty if none).
label_of() { awk -F'\t' -v p="$2" '$NF == p { print $2 }' "$1"; }
# shared A B: paths listed in both lists.
shared() { cut -f3 "$1" | sort >"$T/.sa"; cut -f3 "$2" | sort >"$T/.sb"; comm -12 "$T/.sa" "$T/.sb" | wc -l; }

gen "$T/c"
C=256_ObjectCategories

# Default: val ratio 0.2, stratified per class. 530 images: classes with 3
# images give 1 to val (85 of them), 001.ak47 and 257.clutter give 2.
expect 0 "$IMSHARD" convert caltech256 "$T/c" -o "$T/o"
contains "$T/err" "imshard: note: ignored non-image file '$C/198.spider/RENAME2'"
contains "$T/err" "imshard: note: ignored nested folder '$C/056.dog/greg'"
lacks "$T/err" "partial download"
contains "$T/err" "convert: train: 441 records, 257 classes"
contains "$T/err" "convert: val: 89 records, 257 classes"
same "$(json "$T/o/train.json" 'j["records"]')" 441
same "$(json "$T/o/val.json" 'j["records"]')" 89
same "$(json "$T/o/val.json" 'j["class_counts"][0], j["class_counts"][2], j["class_counts"][256]')" "2 1 2"
same "$(json "$T/o/train.json" 'j["class_counts"][0], j["class_counts"][2], j["class_counts"][256]')" "8 2 8"
same "$(json "$T/o/train.json" 'j["skipped"]')" 0
same "$(wc -l <"$T/o/classes.txt")" 257
same "$(sed -n 1p "$T/o/classes.txt")" 001.ak47
same "$(sed -n 15p "$T/o/classes.txt")" 015.bonsai-101
same "$(sed -n 257p "$T/o/classes.txt")" 257.clutter
same "$(json "$T/o/val.json" '",".join(j["classes"])')" "$(paste -sd, "$T/o/classes.txt")"
cat "$T/o/train.lst" "$T/o/val.lst" >"$T/all.lst"
same "$(label_of "$T/all.lst" "$C/001.ak47/001_0001.jpg")" 0
same "$(label_of "$T/all.lst" "$C/257.clutter/257_0005.jpg")" 256
same "$(label_of "$T/all.lst" "$C/015.bonsai-101/015_0003.jpg")" 14
same "$(label_of "$T/all.lst" "$C/014.blimp/014_0002.jpg")" 13 "(greyscale)"
lacks "$T/all.lst" RENAME2
same "$(shared "$T/o/train.lst" "$T/o/val.lst")" 0
expect 0 "$IMSHARD" verify "$T/o/train.json" --decode
expect 0 "$IMSHARD" verify "$T/o/val.json" --decode

# Deterministic: same seed, same lists; another seed, another val split.
expect 0 "$IMSHARD" convert caltech256 "$T/c" -o "$T/o2" --quiet
same "$(cat "$T/o2/val.lst")" "$(cat "$T/o/val.lst")" "(same seed)"
same "$(cat "$T/o2/train.lst")" "$(cat "$T/o/train.lst")" "(same seed)"
expect 0 "$IMSHARD" convert caltech256 "$T/c" -o "$T/o3" --seed 3 --quiet
checks=$((checks + 1))
cmp -s "$T/o3/val.lst" "$T/o/val.lst" && fail "seed 3 gave the val list of seed 0"
same "$(json "$T/o3/val.json" 'j["records"]')" 89

# --no-clutter: 256 classes; ROOT may be 256_ObjectCategories itself.
expect 0 "$IMSHARD" convert caltech256 "$T/c/$C" -o "$T/nc" --no-clutter --val-ratio 0.5
same "$(wc -l <"$T/nc/classes.txt")" 256
same "$(tail -n1 "$T/nc/classes.txt")" 256.toad
lacks "$T/nc/train.lst" clutter
lacks "$T/nc/val.lst" clutter
same "$(label_of "$T/nc/train.lst" "256.toad/256_0001.jpg")" 255
same "$(json "$T/nc/val.json" 'j["class_counts"][0]')" 5
contains "$T/err" "imshard: note: ignored non-image file '198.spider/RENAME2'"

# Balanced subsets: 1 per class in train, 1 per class in val where val has
# one (classes of 1-2 images have none: --allow-short).
expect 1 "$IMSHARD" convert caltech256 "$T/c" -o "$T/s1" --per-class-train 1 --per-class-val 1 --quiet
contains "$T/err" "'002.american-flag' (label 1): 0 images, 1 wanted"
expect 0 "$IMSHARD" convert caltech256 "$T/c" -o "$T/s" --per-class-train 1 --per-class-val 1 --allow-short --quiet
same "$(json "$T/s/train.json" 'j["records"]')" 257
same "$(json "$T/s/train.json" 'set(j["class_counts"])')" "{1}"
same "$(json "$T/s/val.json" 'j["records"]')" 87
same "$(shared "$T/s/train.lst" "$T/s/val.lst")" 0
expect 0 "$IMSHARD" verify "$T/s/val.json" --decode

# A partial download: a note, not an error.
cp -r "$T/c" "$T/p" && rm -r "$T/p/$C/100.hawksbill-101"
expect 0 "$IMSHARD" convert caltech256 "$T/p" -o "$T/po" --val-ratio 0
contains "$T/err" "imshard: note: found 256 class folders, expected 257"
same "$(wc -l <"$T/po/classes.txt")" 256
absent "$T/po/val.json"

# Errors: one line naming the culprit, exit 1.
mkdir -p "$T/wrong/images"
expect 1 "$IMSHARD" convert caltech256 "$T/wrong" -o "$T/w" --quiet
one_line "$T/err"
contains "$T/err" "'$T/wrong'"
contains "$T/err" "256_ObjectCategories"
absent "$T/w/train.json"
mkdir -p "$T/p/$C/extras" && cp "$T/c/$C/001.ak47/001_0001.jpg" "$T/p/$C/extras/"
expect 1 "$IMSHARD" convert caltech256 "$T/p" -o "$T/w" --quiet
one_line "$T/err"
contains "$T/err" "'$C/extras'"
expect 2 "$IMSHARD" convert caltech256 "$T/c" -o "$T/w" --test-ratio 0.1 --quiet

finish
