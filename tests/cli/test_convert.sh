#!/usr/bin/env bash
# imshard convert, dataset-independent: usage errors, option/dataset
# mismatches, subsets, refusal to overwrite, one packing path (the same
# records as list + pack).
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1

expect 0 "$IMSHARD" convert --help
for o in --output --seed --no-shuffle --val-ratio --test-ratio --no-clutter --label --classes --recursive \
  --exts --per-class-train --per-class-val --per-class-test --train-total --val-total \
  --allow-short --encoding --resize --max-size --center-crop --quality --shards --shard-size \
  --threads --max-errors --check-decode --force --quiet; do
  contains "$T/out" "$o"
done
for d in folder caltech256 fruits inat2017 cifar10 imagenet; do contains "$T/out" "$d"; done

expect 0 "$IMSHARD" sample "$T/s" --classes 4 --per-class 20 --seed 2 --quiet

# Usage errors: exit 2, one line, nothing written.
expect 2 "$IMSHARD" convert mnist "$T/s" -o "$T/o"
one_line "$T/err"
contains "$T/err" "unknown dataset 'mnist'"
expect 2 "$IMSHARD" convert folder "$T/s"
one_line "$T/err"
expect 2 "$IMSHARD" convert folder "$T/s" -o "$T/o" --no-clutter
one_line "$T/err"
contains "$T/err" "--no-clutter applies to caltech256, not to folder"
expect 2 "$IMSHARD" convert folder "$T/s" -o "$T/o" --label species
one_line "$T/err"
expect 2 "$IMSHARD" convert folder "$T/s" -o "$T/o" --per-class-train 2 --train-total 8
one_line "$T/err"
expect 2 "$IMSHARD" convert folder "$T/s" -o "$T/o" --resize 32 --encoding keep
one_line "$T/err"
expect 2 "$IMSHARD" convert folder "$T/s" -o "$T/o" --val-ratio 1.5
one_line "$T/err"
# Shares in [0, 1), the library's and Python's rule, in their words.
contains "$T/err" "--val-ratio must be in [0, 1), got 1.5"
expect 2 "$IMSHARD" convert folder "$T/s" -o "$T/o" --val-ratio 1
contains "$T/err" "--val-ratio must be in [0, 1), got 1"
expect 2 "$IMSHARD" convert folder "$T/s" -o "$T/o" --val-ratio -1
contains "$T/err" "--val-ratio must be in [0, 1), got -1"
expect 2 "$IMSHARD" convert folder "$T/s" -o "$T/o" --test-ratio -0.5
contains "$T/err" "--test-ratio must be in [0, 1), got -0.5"
expect 2 "$IMSHARD" convert folder "$T/s" -o "$T/o" --val-ratio 0.5 --test-ratio 0.5
one_line "$T/err"
contains "$T/err" "--val-ratio plus --test-ratio must be below 1, got 0.5 + 0.5"
absent "$T/o"
expect 0 "$IMSHARD" convert folder "$T/s" -o "$T/r995" --val-ratio 0.995 --quiet
exists "$T/r995/val.json"
expect 2 "$IMSHARD" convert folder "$T/s" -o "$T/o" --quality 80 --encoding png
one_line "$T/err"
contains "$T/err" "--quality applies to --encoding jpeg only"
absent "$T/o"
# A missing root: exit 1, one line.
expect 1 "$IMSHARD" convert folder "$T/none" -o "$T/o"
one_line "$T/err"
contains "$T/err" "$T/none"

# A stratified split with balanced subsets, published split by split.
expect 0 "$IMSHARD" convert folder "$T/s" -o "$T/o" --val-ratio 0.25 --seed 5 \
  --per-class-train 10 --per-class-val 4
contains "$T/err" "convert: train: 40 records, 4 classes, 10 to 10 per class, 0 skipped"
contains "$T/err" "convert: val: 16 records, 4 classes, 4 to 4 per class, 0 skipped"
same "$(json "$T/o/train.json" 'j["class_counts"]')" "[10, 10, 10, 10]"
same "$(json "$T/o/val.json" 'j["class_counts"]')" "[4, 4, 4, 4]"
same "$(cat "$T/o/classes.txt" | paste -sd,)" "$(ls "$T/s" | paste -sd,)"
checks=$((checks + 1))
[ -z "$(comm -12 <(cut -f3 "$T/o/train.lst" | sort) <(cut -f3 "$T/o/val.lst" | sort))" ] ||
  fail "train and val share images"
expect 0 "$IMSHARD" verify "$T/o/train.json" --decode
# Deterministic for a seed, different for another.
expect 0 "$IMSHARD" convert folder "$T/s" -o "$T/o2" --val-ratio 0.25 --seed 5 \
  --per-class-train 10 --per-class-val 4 --quiet
checks=$((checks + 1))
cmp -s "$T/o/train.lst" "$T/o2/train.lst" || fail "same seed gave different lists"
expect 0 "$IMSHARD" convert folder "$T/s" -o "$T/o3" --val-ratio 0.25 --seed 6 \
  --per-class-train 10 --per-class-val 4 --quiet
checks=$((checks + 1))
cmp -s "$T/o/train.lst" "$T/o3/train.lst" && fail "another seed gave the same list"
# --train-total/--val-total: N images in all, divided evenly, the
# remainder one each to the lowest labels.
expect 0 "$IMSHARD" convert folder "$T/s" -o "$T/tot" --val-ratio 0.25 --train-total 10 \
  --val-total 7 --quiet
same "$(json "$T/tot/train.json" 'j["class_counts"]')" "[3, 3, 2, 2]" "--train-total 10"
same "$(json "$T/tot/val.json" 'j["class_counts"]')" "[2, 2, 2, 1]" "--val-total 7"

# Records are shuffled by default with --seed (every shard mixes the
# classes), the manifests say so, and <split>.lst is the order packed;
# --no-shuffle keeps the dataset's order (sorted by class), said too.
runs() { cut -f2 "$1" | uniq | wc -l; }
labels_in_records() {
  /usr/bin/python3 -c 'import lmdb,struct,sys,json,os
m=json.load(open(sys.argv[1])); d=os.path.dirname(sys.argv[1])
for s in m["shards"]:
  e=lmdb.open(os.path.join(d,s["path"]),subdir=False,readonly=True,lock=False)
  for k,v in e.begin().cursor(): print(struct.unpack_from("<i",v,12)[0])' "$1"
}
same "$(json "$T/o/train.json" 'j["shuffled"]')" True
same "$(json "$T/o/val.json" 'j["shuffled"]')" True
checks=$((checks + 1))
[ "$(runs "$T/o/train.lst")" -gt 8 ] || fail "train.lst is grouped by class: $(runs "$T/o/train.lst") label runs"
same "$(labels_in_records "$T/o/train.json" | paste -sd,)" "$(cut -f2 "$T/o/train.lst" | paste -sd,)" "(records in .lst order)"
expect 0 "$IMSHARD" convert folder "$T/s" -o "$T/ns" --val-ratio 0.25 --seed 5 \
  --per-class-train 10 --per-class-val 4 --no-shuffle
contains "$T/err" "not shuffled"
same "$(json "$T/ns/train.json" 'j["shuffled"]')" False
same "$(runs "$T/ns/train.lst")" 4
same "$(labels_in_records "$T/ns/train.json" | paste -sd,)" "$(cut -f2 "$T/ns/train.lst" | paste -sd,)"
# The same rows either way: shuffling comes after the subset.
same "$(sort "$T/ns/train.lst" | md5sum)" "$(sort "$T/o/train.lst" | md5sum)" "(same subset)"
same "$(sort "$T/ns/val.lst" | md5sum)" "$(sort "$T/o/val.lst" | md5sum)" "(same subset)"

# Too few images per class: an error naming the classes, unless --allow-short.
expect 1 "$IMSHARD" convert folder "$T/s" -o "$T/short" --val-ratio 0.25 --per-class-val 6
contains "$T/err" "fewer"
absent "$T/short/val.json"
expect 0 "$IMSHARD" convert folder "$T/s" -o "$T/short" --val-ratio 0.25 --per-class-val 6 --allow-short
same "$(json "$T/short/val.json" 'j["class_counts"]')" "[5, 5, 5, 5]"

# Existing splits are refused before anything is written, unless --force.
expect 1 "$IMSHARD" convert folder "$T/s" -o "$T/o" --val-ratio 0.25
one_line "$T/err"
contains "$T/err" "--force"
same "$(json "$T/o/train.json" 'j["records"]')" 40
expect 0 "$IMSHARD" convert folder "$T/s" -o "$T/o" --val-ratio 0.25 --force --quiet
same "$(json "$T/o/train.json" 'j["records"]')" 60

# A folder where a convert writes one of its files (a split's manifest,
# a list, classes.txt) is refused before anything is written, with or
# without --force (before: --force staged and committed every split, then
# stopped removing the folder, and every later convert stopped there too).
for f in train.json val.lst classes.txt; do
  mkdir -p "$T/dirs/$f"
  for force in "" --force; do
    expect 1 "$IMSHARD" convert folder "$T/s" -o "$T/dirs" --val-ratio 0.25 $force --quiet
    one_line "$T/err"
    contains "$T/err" "'$T/dirs/$f' is a folder, where convert writes a file of its own: remove it or write elsewhere"
    same "$(ls -A "$T/dirs")" "$f" "(nothing written beside '$f')"
  done
  rmdir "$T/dirs/$f"
done

# All or nothing: when one split cannot be written (here its lock is held
# by another process) the folder keeps every earlier split, unchanged, and
# the error says so; nothing is staged or left behind.
expect 0 "$IMSHARD" convert folder "$T/s" -o "$T/aon" --val-ratio 0.25 --per-class-train 10 \
  --per-class-val 4 --quiet
(cd "$T/aon" && md5sum train.json val.json train.lst val.lst classes.txt train-*.mdb val-*.mdb) >"$T/aon.md5"
/usr/bin/python3 -c 'import fcntl,sys,time
f=open(sys.argv[1],"a"); fcntl.flock(f, fcntl.LOCK_EX); print("held", flush=True); time.sleep(60)' \
  "$T/aon/val.lock" >"$T/held" &
holder=$!
for _ in $(seq 100); do grep -qs held "$T/held" && break; sleep 0.05; done
expect 1 "$IMSHARD" convert folder "$T/s" -o "$T/aon" --val-ratio 0.25 --seed 8 --force
one_line "$T/err"
contains "$T/err" "another process is writing it (lock '$T/aon/val.lock'); nothing was replaced: '$T/aon' keeps its earlier splits train, val"
kill "$holder"; wait "$holder" 2>/dev/null
checks=$((checks + 1))
(cd "$T/aon" && md5sum -c --quiet "$T/aon.md5") || fail "a failed convert changed the earlier splits"
absent "$T/aon/.imshard-convert"
# Train, val and test are one set: a run that writes no test split does
# not leave an earlier one beside its own (--force removes it).
expect 0 "$IMSHARD" convert folder "$T/s" -o "$T/set" --val-ratio 0.25 --test-ratio 0.25 --quiet
expect 1 "$IMSHARD" convert folder "$T/s" -o "$T/set" --val-ratio 0.25
one_line "$T/err"
contains "$T/err" "split '$T/set/test.json' of an earlier convert would be removed"
exists "$T/set/test.json"
expect 0 "$IMSHARD" convert folder "$T/s" -o "$T/set" --val-ratio 0.25 --force --quiet
absent "$T/set/test.json"
absent "$T/set/test.lst"
checks=$((checks + 1))
ls "$T/set" | grep -q '^test-' && fail "test shards left beside the new splits"

# A kill at any moment leaves the old set or the new set, never both
# mixed; the next convert clears what is left and finishes.
expect 0 "$IMSHARD" sample "$T/big" --classes 4 --per-class 40 --seed 1 --quiet
old_opts=(--val-ratio 0.25 --per-class-train 20 --per-class-val 5 --no-shuffle)
new_opts=(--val-ratio 0.25 --per-class-train 25 --per-class-val 8 --test-ratio 0.1 --seed 4)
gen_of() { # manifest -> old, new, none or odd
  [ -e "$1" ] || { echo none; return; }
  case "$(json "$1" 'j["records"]')" in
    80|20) echo old ;; 100|32|16) echo new ;; *) echo odd ;;
  esac
}
for i in $(seq 8); do
  rm -rf "$T/kill"
  expect 0 "$IMSHARD" convert folder "$T/big" -o "$T/kill" "${old_opts[@]}" --quiet
  "$IMSHARD" convert folder "$T/big" -o "$T/kill" "${new_opts[@]}" --force --quiet \
    --encoding jpeg --resize 48 --threads 1 --shards 3 2>/dev/null &
  victim=$!
  sleep "0.$(printf '%02d' $((RANDOM % 50)))"
  kill -9 "$victim" 2>/dev/null; wait "$victim" 2>/dev/null
  gens=$(for sp in train val test; do gen_of "$T/kill/$sp.json"; done | grep -v none | sort -u | paste -sd,)
  checks=$((checks + 1))
  case "$gens" in old|new|"") ;; *) fail "kill $i left splits of two converts: $gens" ;; esac
  for sp in train val test; do
    [ -e "$T/kill/$sp.json" ] && expect 0 "$IMSHARD" verify "$T/kill/$sp.json"
  done
  [ "$gens" = old ] && same "$(gen_of "$T/kill/val.json")" old "(kill $i: the old set is whole)"
  expect 0 "$IMSHARD" convert folder "$T/big" -o "$T/kill" "${new_opts[@]}" --force --quiet
  same "$(for sp in train val test; do gen_of "$T/kill/$sp.json"; done | paste -sd,)" "new,new,new" "(kill $i, then again)"
  absent "$T/kill/.imshard-convert"
done

# --shards N per split: a shard whose rows were all skipped is left out,
# with a warning even with --quiet.
mkdir -p "$T/fs/a"
cp "$(ls -d "$T/s"/*/* | head -1)" "$T/fs/a/a1.jpg"
cp "$(ls -d "$T/s"/*/* | head -2 | tail -1)" "$T/fs/a/a2.jpg"
for z in z1 z2 z3; do printf 'not an image' >"$T/fs/a/$z.jpg"; done
expect 0 "$IMSHARD" convert folder "$T/fs" -o "$T/fso" --no-shuffle --shards 5 --quiet
one_line "$T/err"
contains "$T/err" "warning: convert: train: wrote 2 of the 5 shards asked for (--shards 5): the rows of the other 3 shards were all skipped (3 skipped files in all, listed in '$T/fso/train.errors.tsv')"
same "$(json "$T/fso/train.json" 'len(j["shards"])')" 2
# past --max-errors: the message names the first skipped file, not an
# errors file in the staging folder that the failure removes (before:
# "see 'OUT/.imshard-convert/train.errors.tsv'", a file that was gone),
# and the output folder the convert made is not left behind, empty
expect 1 "$IMSHARD" convert folder "$T/fs" -o "$T/fme/deep" --no-shuffle --max-errors 1 --quiet
one_line "$T/err"
contains "$T/err" "imshard: convert: train: stopped after 2 skipped files (--max-errors 1); the first: 'a/z1.jpg': not a JPEG or PNG image"
lacks "$T/err" ".imshard-convert"
absent "$T/fme"
# into an existing set: the earlier splits are kept, and said so
expect 1 "$IMSHARD" convert folder "$T/fs" -o "$T/fso" --no-shuffle --max-errors 1 --force --quiet
contains "$T/err" "the first: 'a/z1.jpg'"
contains "$T/err" "nothing was replaced: '$T/fso' keeps its earlier splits train"
lacks "$T/err" ".imshard-convert"
same "$(json "$T/fso/train.json" 'len(j["shards"])')" 2
exists "$T/fso/train.errors.tsv"

# One packing path: convert's records equal list + pack of its own list.
expect 0 "$IMSHARD" pack "$T/o/train.lst" "$T/s" -o "$T/p/train" --classes "$T/o/classes.txt" --quiet
for f in $(cd "$T/o" && ls train-*.mdb); do
  checks=$((checks + 1))
  cmp -s "$T/o/$f" "$T/p/$f" || fail "$f differs between convert and pack"
done

# The packing options reach pack and do what they say: --max-size 24
# scales every image's longer side to 24 (all are larger), --resize 20
# --center-crop makes 20x20 squares, --shard-size 16K rolls shards where
# pack does (the same bytes), --check-decode skips a JPEG cut inside its
# entropy data, which keep mode's structural check passes.
sides() { # SPLIT.json: the set of its records' (width, height), as PNG
  rm -rf "$T/dx"
  "$IMSHARD" extract "$1" -o "$T/dx" -q || fail "extract $1 failed"
  /usr/bin/python3 -c 'import glob, struct, sys
print(sorted({struct.unpack(">II", open(f, "rb").read()[16:24]) for f in glob.glob(sys.argv[1] + "/*.png")}))' "$T/dx"
}
expect 0 "$IMSHARD" convert folder "$T/s" -o "$T/ms" --val-ratio 0 --encoding png --max-size 24 --quiet
same "$(sides "$T/ms/train.json" | /usr/bin/python3 -c 'import ast, sys; s = ast.literal_eval(sys.stdin.read()); print(len(s) > 1, {max(x) for x in s})')" "True {24}" "(--max-size 24)"
expect 0 "$IMSHARD" convert folder "$T/s" -o "$T/cc" --val-ratio 0 --encoding png --resize 20 --center-crop --quiet
same "$(sides "$T/cc/train.json")" "[(20, 20)]" "(--resize 20 --center-crop)"
expect 0 "$IMSHARD" convert folder "$T/s" -o "$T/sz" --val-ratio 0 --shard-size 16K --quiet
same "$(json "$T/sz/train.json" 'len(j["shards"]) > 1')" True "(--shard-size 16K: several shards)"
expect 0 "$IMSHARD" pack "$T/sz/train.lst" "$T/s" -o "$T/szp/train" --classes "$T/sz/classes.txt" --shard-size 16K --quiet
same "$(cd "$T/sz" && ls train-*.mdb)" "$(cd "$T/szp" && ls train-*.mdb)" "(the shards pack makes)"
for f in $(cd "$T/sz" && ls train-*.mdb); do
  checks=$((checks + 1))
  cmp -s "$T/sz/$f" "$T/szp/$f" || fail "$f differs between convert and pack --shard-size"
done
mkdir -p "$T/cd.fx" "$T/cd/a" "$T/cd/b"
"$IMS_FIXTURES" "$T/cd.fx" || fail "make_images failed"
cp "$T/cd.fx/rgb.jpg" "$T/cd.fx/truncated_eoi.jpg" "$T/cd/a/"
cp "$T/cd.fx/rgb.jpg" "$T/cd.fx/gray.jpg" "$T/cd/b/"
expect 0 "$IMSHARD" convert folder "$T/cd" -o "$T/cdk" --val-ratio 0 --quiet
same "$(json "$T/cdk/train.json" 'j["records"]')" 4 "(keep mode takes the cut JPEG)"
expect 0 "$IMSHARD" convert folder "$T/cd" -o "$T/cdd" --val-ratio 0 --check-decode --quiet
same "$(json "$T/cdd/train.json" '(j["records"], j["skipped"])')" "(3, 1)" "(--check-decode skips it)"
contains "$T/cdd/train.errors.tsv" "truncated_eoi.jpg"
finish
