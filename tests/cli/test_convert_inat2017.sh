#!/usr/bin/env bash
# imshard convert inat2017: the tree of tests/fixtures/make_inat2017.py
# (train and val images in one tree, split only by the JSON files) packed
# as the "10 taxonomic classes" task with class-balanced subsets; labels
# that follow the supercategory folders; disjoint splits; the species
# labels with a non-ASCII class name; every broken variant named in one
# line with exit 1.
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1

GEN="$IMS_SRC/tests/fixtures/make_inat2017.py"
gen() { /usr/bin/python3 "$GEN" "$@" || fail "generator failed: $*"; }
TEN=Amphibia,Animalia,Arachnida,Aves,Fungi,Insecta,Mammalia,Mollusca,Plantae,Reptilia
HYBRID='Anas superciliosa × platyrhynchos'
PIN='train_val_images/Aves/Anas superciliosa × platyrhynchos/00c0ffee00c0ffee00c0ffee00c0ffee.jpg'

# Rows of LST whose label is not the class named by path component K
# (2 = supercategory, 3 = species) in CLASSES.
mislabelled() { # classes lst k
  awk -F'\t' -v k="$3" 'NR == FNR { c[NR - 1] = $0; next }
    { split($NF, p, "/"); if (p[k] != c[$2]) bad++ } END { print bad + 0 }' "$1" "$2"
}

gen "$T/inat"

# The 10-class task, 3 train + 2 val per class (the fixture's smallest of
# the ten has 3 + 2).
expect 0 "$IMSHARD" convert inat2017 "$T/inat" -o "$T/o" --label supercategory \
  --classes "$TEN" --per-class-train 3 --per-class-val 2 --threads 2
contains "$T/err" "imshard: note: ignored 3 images under 'train_val_images/'"
contains "$T/err" "imshard: note: kept 10 of 13 supercategories: left out 4 train and 3 val images"
contains "$T/err" "convert: train: 30 records, 10 classes, 3 to 3 per class, 0 skipped"
contains "$T/err" "convert: val: 20 records, 10 classes, 2 to 2 per class, 0 skipped"
same "$(json "$T/o/train.json" 'j["records"]')" 30
same "$(json "$T/o/val.json" 'j["records"]')" 20
same "$(json "$T/o/train.json" 'j["class_counts"]')" "[3, 3, 3, 3, 3, 3, 3, 3, 3, 3]"
same "$(json "$T/o/val.json" 'j["class_counts"]')" "[2, 2, 2, 2, 2, 2, 2, 2, 2, 2]"
same "$(paste -sd, "$T/o/classes.txt")" "$TEN"
same "$(json "$T/o/train.json" '",".join(j["classes"])')" "$TEN"
same "$(json "$T/o/val.json" '",".join(j["classes"])')" "$TEN"
same "$(wc -l <"$T/o/train.lst")" 30
same "$(wc -l <"$T/o/val.lst")" 20
same "$(mislabelled "$T/o/classes.txt" "$T/o/train.lst" 2)" 0 "train labels vs folders"
same "$(mislabelled "$T/o/classes.txt" "$T/o/val.lst" 2)" 0 "val labels vs folders"
# Train and val share one image tree: neither a file nor an id in both.
same "$(comm -12 <(cut -f3 "$T/o/train.lst" | sort) <(cut -f3 "$T/o/val.lst" | sort) | wc -l)" 0 "shared files"
same "$(comm -12 <(cut -f1 "$T/o/train.lst" | sort) <(cut -f1 "$T/o/val.lst" | sort) | wc -l)" 0 "shared ids"
lacks "$T/o/train.lst" "Protozoa/"
lacks "$T/o/val.lst" "Chromista/"
expect 0 "$IMSHARD" verify "$T/o/train.json" --decode
expect 0 "$IMSHARD" verify "$T/o/val.json" --decode

# Same seed, same subsets; existing splits need --force.
expect 0 "$IMSHARD" convert inat2017 "$T/inat" -o "$T/o2" --label supercategory \
  --classes "$TEN" --per-class-train 3 --per-class-val 2 --quiet
same "$(cat "$T/o2/train.lst")" "$(cat "$T/o/train.lst")" "train.lst, same seed"
same "$(cat "$T/o2/val.lst")" "$(cat "$T/o/val.lst")" "val.lst, same seed"
expect 1 "$IMSHARD" convert inat2017 "$T/inat" -o "$T/o2" --label supercategory \
  --classes "$TEN" --per-class-train 3 --per-class-val 2 --quiet
one_line "$T/err"

# Species labels (the default): every image, label = category id, the
# UTF-8 names kept; index = the JSON's image id, rows in JSON order
# (--no-shuffle: the adapter's order as it is).
expect 0 "$IMSHARD" convert inat2017 "$T/inat" -o "$T/s" --no-shuffle --quiet
same "$(json "$T/s/train.json" 'j["records"]')" 53
same "$(json "$T/s/val.json" 'j["records"]')" 29
same "$(wc -l <"$T/s/classes.txt")" 17
same "$(sed -n 2p "$T/s/classes.txt")" "$HYBRID"
same "$(json "$T/s/train.json" 'j["classes"][1]')" "$HYBRID"
same "$(head -1 "$T/s/train.lst")" "$(printf '123456\t1\t%s' "$PIN")"
same "$(tail -1 "$T/s/val.lst" | cut -f1,2)" "$(printf '7\t6')"
same "$(mislabelled "$T/s/classes.txt" "$T/s/train.lst" 3)" 0 "species labels vs folders"
same "$(mislabelled "$T/s/classes.txt" "$T/s/val.lst" 3)" 0 "species labels vs folders (val)"
expect 0 "$IMSHARD" verify "$T/s/train.json" --decode

# Some species, renumbered in category id order.
expect 0 "$IMSHARD" convert inat2017 "$T/inat" -o "$T/k" --classes "Cygnus olor,$HYBRID" --quiet
same "$(paste -sd, "$T/k/classes.txt")" "$HYBRID,Cygnus olor"
same "$(json "$T/k/train.json" 'j["class_counts"]')" "[5, 2]"

# Bad class names and label kinds.
expect 1 "$IMSHARD" convert inat2017 "$T/inat" -o "$T/x1" --label supercategory --classes Aves,Dinosauria --quiet
one_line "$T/err"
contains "$T/err" "'Dinosauria'"
absent "$T/x1/train.json"
expect 2 "$IMSHARD" convert inat2017 "$T/inat" -o "$T/x2" --label genus
one_line "$T/err"
# A class with fewer images than asked for.
expect 1 "$IMSHARD" convert inat2017 "$T/inat" -o "$T/x3" --label supercategory \
  --classes "$TEN" --per-class-train 4 --quiet
contains "$T/err" "Amphibia"

# Broken trees: exit 1, one line naming the culprit, nothing packed.
check_broken() { # kind text
  gen "$T/b-$1" --broken "$1"
  expect 1 "$IMSHARD" convert inat2017 "$T/b-$1" -o "$T/ob-$1" --quiet
  one_line "$T/err"
  contains "$T/err" "$2"
  absent "$T/ob-$1/train.json"
}
check_broken unknown-image "annotation 424242 names image id 123456, which val2017.json does not list"
check_broken missing-file "'$PIN'"
check_broken truncated "/b-truncated/train2017.json'"
check_broken both-splits "'$PIN' is listed in both train2017.json (id 123456) and val2017.json (id 654321): splits must be disjoint"
check_broken no-annotation "image id 7 ('train_val_images/Protozoa/Fuligo septica/0000000000000000000000000000beef.jpg') has no annotation"
check_broken unknown-category "annotation 31337 names category id 5000"
check_broken duplicate-id "image id 123456 appears twice"
check_broken missing-json "/b-missing-json/val2017.json'"
check_broken missing-key "/b-missing-key/val2017.json': no 'annotations' array"

finish
