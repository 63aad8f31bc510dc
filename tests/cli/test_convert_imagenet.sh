#!/usr/bin/env bash
# imshard convert imagenet, on fixtures of both layouts
# (tests/fixtures/make_imagenet.py): counts, classes.txt = sorted wnids,
# sorted-wnid labels (devkit IDs mapped, Kaggle CSV, sorted val folders),
# the CMYK / greyscale / PNG-named-.JPEG oddities packed and decodable,
# resize + balanced subset, and broken layouts failing with one line that
# names the culprit.
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1

PY=/usr/bin/python3
GEN="$IMS_SRC/tests/fixtures/make_imagenet.py"
if ! "$PY" -c 'import PIL' 2>/dev/null; then
  echo "skipped: needs $PY with PIL (python3-pil)"
  exit 77
fi

# What the fixture holds (see make_imagenet.py).
WNIDS="n01440764 n01751748 n02012849 n02100735 n02105855 n02113186 n02119789 n02963159 n03126707 n15075141"
TRAIN_COUNTS="[4, 3, 5, 3, 4, 3, 4, 3, 3, 4]"

# label_of LST NAME: the label column of the row whose path ends in NAME.
label_of() { awk -F'\t' -v n="$2" 'substr($3, length($3) - length(n) + 1) == n { print $2 }' "$1"; }

for layout in kaggle devkit devkit-sorted; do
  R="$T/$layout"
  O="$T/out-$layout"
  "$PY" "$GEN" "$R" --layout "$layout" || fail "fixture $layout"
  expect 0 "$IMSHARD" convert imagenet "$R" -o "$O"
  contains "$T/err" "imshard: note: "
  contains "$T/err" "partial set"
  contains "$T/err" "train: 36 records, 10 classes"
  contains "$T/err" "val: 20 records, 10 classes"
  same "$(json "$O/train.json" 'j["records"]')" 36 "($layout train)"
  same "$(json "$O/train.json" 'j["skipped"]')" 0 "($layout train skipped)"
  same "$(json "$O/train.json" 'j["class_counts"]')" "$TRAIN_COUNTS" "($layout)"
  same "$(json "$O/val.json" 'j["records"]')" 20 "($layout val)"
  same "$(json "$O/val.json" 'j["skipped"]')" 0 "($layout val skipped)"
  same "$(json "$O/val.json" 'j["class_counts"]')" "[2, 2, 2, 2, 2, 2, 2, 2, 2, 2]" "($layout)"
  same "$(paste -sd' ' "$O/classes.txt")" "$WNIDS" "($layout classes.txt)"
  same "$(json "$O/train.json" '" ".join(j["classes"])')" "$WNIDS" "($layout manifest classes)"
  # Val image 1: devkit ID 490 = n01751748 sea snake = sorted index 1.
  same "$(label_of "$O/val.lst" ILSVRC2012_val_00000001.JPEG)" 1 "($layout val image 1)"
  # The oddities are listed and packed (0 skipped above): an RGBA PNG named
  # .JPEG, Adobe CMYK JPEGs (train and val image 7), greyscale JPEGs.
  same "$(label_of "$O/train.lst" /n02105855_2933.JPEG)" 4 "($layout PNG-as-JPEG)"
  same "$(wc -l <"$O/train.lst")" 36
  expect 0 "$IMSHARD" verify "$O/train.json" --decode
  expect 0 "$IMSHARD" verify "$O/val.json" --decode
  cut -f2 "$O/val.lst" >"$T/labels-$layout"
  sed 's#.*/##' "$O/train.lst" >"$T/train-names-$layout"
done
# Same images, same labels, whichever layout they came in.
same "$(cat "$T/labels-kaggle")" "$(cat "$T/labels-devkit")" "(val labels kaggle vs devkit)"
same "$(cat "$T/labels-devkit")" "$(cat "$T/labels-devkit-sorted")" "(val labels devkit vs sorted)"
same "$(cat "$T/train-names-kaggle")" "$(cat "$T/train-names-devkit")" "(train rows)"

# Deterministic: a second conversion writes the same lists.
expect 0 "$IMSHARD" convert imagenet "$T/kaggle" -o "$T/again" -q
same "$(cat "$T/again/train.lst" "$T/again/val.lst")" \
  "$(cat "$T/out-kaggle/train.lst" "$T/out-kaggle/val.lst")" "(rerun)"

# A byte order mark before the mapping's first wnid (an editor's): the
# same dataset (before: "wnid ... is not in LOC_synset_mapping.txt")
cp -r "$T/kaggle" "$T/bom"
printf '\357\273\277' | cat - "$T/kaggle/LOC_synset_mapping.txt" >"$T/bom/LOC_synset_mapping.txt"
expect 0 "$IMSHARD" convert imagenet "$T/bom" -o "$T/out-bom" -q
same "$(cat "$T/out-bom/train.lst" "$T/out-bom/val.lst")" \
  "$(cat "$T/out-kaggle/train.lst" "$T/out-kaggle/val.lst")" "(a BOM in the mapping)"

# Resized to 64, two train images per class.
expect 0 "$IMSHARD" convert imagenet "$T/devkit" -o "$T/small" --resize 64 --per-class-train 2 --seed 3 -q
same "$(json "$T/small/train.json" 'j["records"]')" 20
same "$(json "$T/small/train.json" 'j["class_counts"]')" "[2, 2, 2, 2, 2, 2, 2, 2, 2, 2]"
same "$(json "$T/small/train.json" 'j["encoding"]')" jpeg
same "$(json "$T/small/val.json" 'j["records"]')" 20
same "$(json "$T/small/train.json" 'j["skipped"]')" 0
expect 0 "$IMSHARD" verify "$T/small/train.json" --decode
# A class without train images cannot give two.
"$PY" "$GEN" "$T/notrain" --layout kaggle --broken no-train || fail "fixture no-train"
expect 0 "$IMSHARD" convert imagenet "$T/notrain" -o "$T/o-notrain"
contains "$T/err" "'n02963159'"
same "$(json "$T/o-notrain/train.json" 'j["records"]')" 33
expect 1 "$IMSHARD" convert imagenet "$T/notrain" -o "$T/o-notrain2" --per-class-train 2 -q

# Broken layouts: exit 1, one line naming the culprit, no split written.
check_broken() { # LAYOUT KIND TEXT...
  local layout=$1 kind=$2
  shift 2
  local R="$T/bad-$layout-$kind"
  "$PY" "$GEN" "$R" --layout "$layout" --broken "$kind" || fail "fixture $layout $kind"
  expect 1 "$IMSHARD" convert imagenet "$R" -o "$T/o-bad" -q
  one_line "$T/err"
  for t in "$@"; do contains "$T/err" "$t"; done
  absent "$T/o-bad/train.json"
  absent "$T/o-bad/val.json"
}
check_broken kaggle unknown-wnid "ILSVRC/Data/CLS-LOC/train/n09999999" "LOC_synset_mapping.txt"
check_broken devkit unknown-wnid "train/n09999999" "map_clsloc.txt"
check_broken devkit-sorted unknown-wnid "train/n09999999" "map_clsloc.txt"
check_broken kaggle missing-image "LOC_val_solution.csv' line " "ILSVRC2012_val_00000005"
check_broken devkit missing-image "ILSVRC2012_validation_ground_truth.txt' line 5:" "ILSVRC2012_val_00000005"
check_broken kaggle unlabeled "val/ILSVRC2012_val_00000009.JPEG" "LOC_val_solution.csv"
check_broken devkit unlabeled "val/ILSVRC2012_val_00000021.JPEG" "ILSVRC2012_validation_ground_truth.txt"
check_broken devkit-sorted unlabeled "val/ILSVRC2012_val_00000021.JPEG"
check_broken kaggle bad-label "LOC_val_solution.csv' line " "'n09999999'"
check_broken devkit bad-label "ILSVRC2012_validation_ground_truth.txt' line 3:" "731"

# Neither layout: the message says what was looked for.
mkdir -p "$T/empty"
expect 1 "$IMSHARD" convert imagenet "$T/empty" -o "$T/o-empty" -q
one_line "$T/err"
contains "$T/err" "LOC_synset_mapping.txt"
contains "$T/err" "map_clsloc.txt"

finish
