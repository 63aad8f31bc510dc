#!/usr/bin/env bash
# imshard convert fruits on fixtures of tests/fixtures/make_fruits.py (six
# classes of RGBA/RGB PNGs named like the real screenshots, with spaces,
# dots and augmentation prefixes): train/test record counts, classes.txt,
# labels of named files, the root found when nested (dataset/dataset) and
# capitalised (Train/Test), a val split out of train, balanced subsets
# (disjoint splits), RGBA flattened when re-encoded to JPEG, verify
# --decode, and the layout errors named in one line with exit 1.
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1

gen() { /usr/bin/python3 "$IMS_SRC/tests/fixtures/make_fruits.py" "$@" || fail "generator failed: $*"; }
label_of() { awk -F'\t' -v p="$2" '$NF == p { print $2 }' "$1"; }
shared() { cut -f3 "$1" | sort >"$T/.sa"; cut -f3 "$2" | sort >"$T/.sb"; comm -12 "$T/.sa" "$T/.sb" | wc -l; }
CLASSES="freshapples,freshbanana,freshoranges,rottenapples,rottenbanana,rottenoranges"
SHOT="Screen Shot 2018-06-07 at 1.00.00 PM.png"

# Class k has 5 + k train and 2 + k % 2 test images: 45 and 15.
gen "$T/f"
expect 0 "$IMSHARD" convert fruits "$T/f" -o "$T/o"
contains "$T/err" "imshard: note: dataset found in 'dataset'"
contains "$T/err" "convert: train: 45 records, 6 classes, 5 to 10 per class, 0 skipped"
contains "$T/err" "convert: test: 15 records, 6 classes, 2 to 3 per class, 0 skipped"
same "$(json "$T/o/train.json" 'j["class_counts"]')" "[5, 6, 7, 8, 9, 10]"
same "$(json "$T/o/test.json" 'j["class_counts"]')" "[2, 3, 2, 3, 2, 3]"
same "$(paste -sd, "$T/o/classes.txt")" "$CLASSES"
same "$(json "$T/o/test.json" '",".join(j["classes"])')" "$CLASSES"
absent "$T/o/val.json"
same "$(label_of "$T/o/train.lst" "dataset/train/freshapples/$SHOT")" 0
same "$(label_of "$T/o/train.lst" "dataset/train/rottenoranges/saltandpepper_Screen Shot 2018-06-12 at 5.57.43 PM.png")" 5
same "$(label_of "$T/o/test.lst" "dataset/test/rottenbanana/rotated_by_15_Screen Shot 2018-06-11 at 3.57.59 PM.png")" 4
same "$(cut -f1 "$T/o/test.lst" | sort -n | head -1)" 45 "(test indices follow train's)"
same "$(shared "$T/o/train.lst" "$T/o/test.lst")" 0
expect 0 "$IMSHARD" verify "$T/o/train.json" --decode
expect 0 "$IMSHARD" verify "$T/o/test.json" --decode
same "$(json "$T/o/train.json" 'j["encoding"]')" keep

# Nested and capitalised: dataset/dataset/Train, found from ROOT.
gen "$T/n" --nested --capitalised
expect 0 "$IMSHARD" convert fruits "$T/n" -o "$T/no" --encoding jpeg --quiet
same "$(json "$T/no/train.json" 'j["records"]')" 45
same "$(json "$T/no/test.json" 'j["records"]')" 15
same "$(label_of "$T/no/train.lst" "dataset/dataset/Train/freshapples/$SHOT")" 0
same "$(json "$T/no/train.json" 'j["encoding"]')" jpeg
expect 0 "$IMSHARD" verify "$T/no/test.json" --decode
# RGBA re-encoded as JPEG: flattened (two thirds of the fixture's PNGs are
# RGBA; every extracted record is a JPEG without alpha).
expect 0 "$IMSHARD" extract "$T/no/train.json" -o "$T/x" --quiet
checks=$((checks + 1))
/usr/bin/python3 - "$T/x" "$T/n" <<'PY' || fail "RGBA sources or flattened JPEGs missing"
import os, sys
from PIL import Image
def walk(root, exts):
    return [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.lower().endswith(exts)]
src = walk(sys.argv[2], (".png",))
assert sum(Image.open(f).mode == "RGBA" for f in src) >= len(src) // 2, "fixture lacks RGBA"
out = walk(sys.argv[1], (".jpg", ".jpeg"))
assert len(out) == 45, len(out)
for f in out:
    assert Image.open(f).mode in ("RGB", "L"), (f, Image.open(f).mode)
PY

# A val split out of train (stratified), and balanced subsets.
expect 0 "$IMSHARD" convert fruits "$T/f" -o "$T/v" --val-ratio 0.2 --seed 4 --quiet
same "$(json "$T/v/val.json" 'j["class_counts"]')" "[1, 1, 1, 2, 2, 2]"
same "$(json "$T/v/train.json" 'j["records"]')" 36
same "$(json "$T/v/test.json" 'j["records"]')" 15
same "$(shared "$T/v/train.lst" "$T/v/val.lst")" 0
same "$(grep -c "dataset/train/" "$T/v/val.lst")" 9
expect 0 "$IMSHARD" convert fruits "$T/f" -o "$T/v2" --val-ratio 0.2 --seed 4 --quiet
same "$(cat "$T/v2/val.lst")" "$(cat "$T/v/val.lst")" "(same seed)"
expect 0 "$IMSHARD" convert fruits "$T/f" -o "$T/s" --val-ratio 0.2 --per-class-train 3 --per-class-val 1 --per-class-test 2 --quiet
same "$(json "$T/s/train.json" 'j["class_counts"]')" "[3, 3, 3, 3, 3, 3]"
same "$(json "$T/s/val.json" 'j["class_counts"]')" "[1, 1, 1, 1, 1, 1]"
same "$(json "$T/s/test.json" 'j["class_counts"]')" "[2, 2, 2, 2, 2, 2]"
same "$(shared "$T/s/train.lst" "$T/s/val.lst")" 0
expect 0 "$IMSHARD" verify "$T/s/val.json" --decode

# Errors, one line each, exit 1: no dataset, two candidates, class
# folders that differ between train and test.
mkdir -p "$T/none/dataset/train/freshapples"
expect 1 "$IMSHARD" convert fruits "$T/none" -o "$T/w" --quiet
one_line "$T/err"
contains "$T/err" "'$T/none'"
contains "$T/err" "'test'"
cp -r "$T/f/dataset" "$T/copy" && mv "$T/copy" "$T/f/dataset/dataset"
expect 1 "$IMSHARD" convert fruits "$T/f" -o "$T/w" --quiet
one_line "$T/err"
contains "$T/err" "'dataset' and 'dataset/dataset'"
expect 0 "$IMSHARD" convert fruits "$T/f/dataset/dataset" -o "$T/w2" --quiet
mv "$T/n/dataset/dataset/Test/freshbanana" "$T/n/dataset/dataset/Test/freshbananas"
expect 1 "$IMSHARD" convert fruits "$T/n" -o "$T/w" --quiet
one_line "$T/err"
contains "$T/err" "'dataset/dataset/Train/freshbanana'"
contains "$T/err" "'dataset/dataset/Test/freshbananas'"
absent "$T/w/train.json"
expect 2 "$IMSHARD" convert fruits "$T/f/dataset/dataset" -o "$T/w" --no-clutter --quiet

finish
