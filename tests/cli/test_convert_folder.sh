#!/usr/bin/env bash
# imshard convert folder on `imshard sample` output (class folders of
# JPEGs and PNGs, some RGBA, some greyscale) plus a non-image file, a
# nested folder and an image directly in ROOT: splits and their stratified
# counts, classes.txt, labels, notes, --recursive, --exts, balanced subsets
# (disjoint splits), determinism, verify --decode and the errors.
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1

label_of() { awk -F'\t' -v p="$2" '$NF == p { print $2 }' "$1"; }
shared() { cut -f3 "$1" | sort >"$T/.sa"; cut -f3 "$2" | sort >"$T/.sb"; comm -12 "$T/.sa" "$T/.sb" | wc -l; }

expect 0 "$IMSHARD" sample "$T/d" --classes 3 --per-class 20
R="$T/d"
classes=$(ls "$R" | paste -sd,)
first=$(ls "$R" | head -n1)
third=$(ls "$R" | sed -n 3p)
echo "not an image" >"$R/$first/README.txt"
mkdir -p "$R/$third/extra" && cp "$(ls -d "$R/$third"/* | grep -E '\.(jpg|png)$' | head -n1)" "$R/$third/extra/x.jpg"
cp "$(ls -d "$R/$first"/* | grep -E '\.jpg$' | head -n1)" "$R/loose.jpg"

# Default: train only, every image.
expect 0 "$IMSHARD" convert folder "$R" -o "$T/o"
same "$(json "$T/o/train.json" 'j["records"]')" 60
same "$(json "$T/o/train.json" 'j["class_counts"]')" "[20, 20, 20]"
absent "$T/o/val.json"
absent "$T/o/test.json"
same "$(paste -sd, "$T/o/classes.txt")" "$classes"
same "$(label_of "$T/o/train.lst" "$third/$third"_0004.png)" 2
contains "$T/err" "imshard: note: ignored 1 file not matching .jpg,.jpeg,.png"
contains "$T/err" "imshard: note: ignored 1 image in nested folders"
contains "$T/err" "imshard: note: ignored 1 image directly in ROOT"
contains "$T/err" "imshard: note: ignored non-image file '$first/README.txt'"
contains "$T/err" "imshard: note: ignored nested folder '$third/extra'"
expect 0 "$IMSHARD" verify "$T/o/train.json" --decode

# val and test, stratified: a quarter and a tenth of 20 per class.
expect 0 "$IMSHARD" convert folder "$R" -o "$T/s" --val-ratio 0.25 --test-ratio 0.1 --seed 9 --quiet
same "$(json "$T/s/train.json" 'j["class_counts"]')" "[13, 13, 13]"
same "$(json "$T/s/val.json" 'j["class_counts"]')" "[5, 5, 5]"
same "$(json "$T/s/test.json" 'j["class_counts"]')" "[2, 2, 2]"
# a ratio whose rounded share is no record of any class: refused before
# anything is packed, saying why and what would do (before: "split 'val'
# is empty", after the whole train split was packed)
expect 1 "$IMSHARD" convert folder "$R" -o "$T/thin" --val-ratio 0.01 --quiet
one_line "$T/err"
contains "$T/err" "imshard: convert: split 'val' is empty: --val-ratio 0.01 takes each class's share rounded, and a class needs 50 records for one; every class here has fewer (raise --val-ratio, or leave it out)"
absent "$T/thin"
expect 1 "$IMSHARD" convert folder "$R" -o "$T/thin" --val-ratio 0.2 --test-ratio 0.001 --quiet
contains "$T/err" "split 'test' is empty: --test-ratio 0.001 takes each class's share rounded, and a class needs 500 records for one"
absent "$T/thin"
same "$(shared "$T/s/train.lst" "$T/s/val.lst")" 0
same "$(shared "$T/s/train.lst" "$T/s/test.lst")" 0
same "$(shared "$T/s/val.lst" "$T/s/test.lst")" 0
expect 0 "$IMSHARD" verify "$T/s/test.json" --decode
expect 0 "$IMSHARD" convert folder "$R" -o "$T/s2" --val-ratio 0.25 --test-ratio 0.1 --seed 9 --quiet
same "$(cat "$T/s2/val.lst")" "$(cat "$T/s/val.lst")" "(same seed)"
expect 0 "$IMSHARD" convert folder "$R" -o "$T/s3" --val-ratio 0.25 --test-ratio 0.1 --seed 10 --quiet
checks=$((checks + 1))
cmp -s "$T/s3/val.lst" "$T/s/val.lst" && fail "seed 10 gave the val list of seed 9"

# Balanced subsets from the split.
expect 0 "$IMSHARD" convert folder "$R" -o "$T/b" --val-ratio 0.25 --per-class-train 4 --per-class-val 2 --quiet
same "$(json "$T/b/train.json" 'j["class_counts"]')" "[4, 4, 4]"
same "$(json "$T/b/val.json" 'j["class_counts"]')" "[2, 2, 2]"
same "$(shared "$T/b/train.lst" "$T/b/val.lst")" 0

# --recursive: the nested folder becomes a class; --exts png.
expect 0 "$IMSHARD" convert folder "$R" -o "$T/r" --recursive --quiet
same "$(wc -l <"$T/r/classes.txt")" 4
same "$(sed -n 4p "$T/r/classes.txt")" "$third/extra"
same "$(label_of "$T/r/train.lst" "$third/extra/x.jpg")" 3
expect 0 "$IMSHARD" convert folder "$R" -o "$T/p" --exts .png --quiet
same "$(json "$T/p/train.json" 'j["class_counts"]')" "[4, 4, 4]"

# Errors: exit 1 with one line naming the root; bad usage exit 2.
expect 1 "$IMSHARD" convert folder "$T/missing" -o "$T/w" --quiet
one_line "$T/err"
contains "$T/err" "'$T/missing'"
mkdir -p "$T/flat" && cp "$R/loose.jpg" "$T/flat/"
expect 1 "$IMSHARD" convert folder "$T/flat" -o "$T/w" --quiet
one_line "$T/err"
contains "$T/err" "'$T/flat'"
expect 2 "$IMSHARD" convert folder "$R" -o "$T/w" --no-clutter --quiet
# a bad --exts is a usage error, as for imshard list (before: exit 1)
for x in , . .j/g; do
  expect 2 "$IMSHARD" convert folder "$R" -o "$T/w" --exts "$x" --quiet
  one_line "$T/err"
  contains "$T/err" "--exts: "
done
absent "$T/w"
# OUTDIR inside ROOT: a later convert would read the split's folder as a
# class and shift every label after it (before: written, and read so)
cp -r "$R" "$T/in"
expect 2 "$IMSHARD" convert folder "$T/in" -o "$T/in/aout" --quiet
one_line "$T/err"
contains "$T/err" "output folder '$T/in/aout' is inside the dataset root '$T/in'"
absent "$T/in/aout"
expect 0 "$IMSHARD" convert folder "$T/in" -o "$T/in-packed" --quiet
# a broken link named like an image is named as one (before: "non-image
# file")
cls=$(ls "$T/in" | head -1)
ln -s gone.jpg "$T/in/$cls/photo.jpg"
expect 0 "$IMSHARD" convert folder "$T/in" -o "$T/in-bl"
contains "$T/err" "ignored 1 broken link (target missing, or the links loop)"
contains "$T/err" "photo.jpg' (its target is missing, or the links loop)"
lacks "$T/err" "non-image file '$cls/photo.jpg'"

finish
