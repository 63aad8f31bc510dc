#!/usr/bin/env bash
# imshard-train's feedback: progress lines with images/s per rank and in
# total, elapsed time and ETA; the loader's memory line only with
# --verbose; compute and loader threads chosen apart and printed once;
# records dropped per epoch counted (short last batches included); --val
# optional (said once, no accuracy in summary.json), a --val of the
# training split's records warned of, a --val holding images of --train
# packed apart too, and so are classes of --train without a record; --val-crop-frac
# validated and recorded; counts printed with their right plural.
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1
: "${IMSHARD_TRAIN:?IMSHARD_TRAIN must point at imshard-train}"
mpi() { ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" mpirun "$@"; }

# 60 images, 16 of them validation: 44 training records
expect 0 "$IMSHARD" sample "$T/s" --classes 4 --per-class 15 --quiet
expect 0 "$IMSHARD" convert folder "$T/s" -o "$T/p" --val-ratio 0.25 --seed 3 --quiet
tr="$T/p/train.json"
va="$T/p/val.json"
same "$(json "$tr" 'j["records"]')" 44 "training records"
fit() { "$IMSHARD_TRAIN" --train "$tr" --model convnet7 --size 16 --threads 1 --batch-size 8 "$@"; }

# --- --help: the real defaults ---------------------------------------------
expect 0 "$IMSHARD_TRAIN" --help
for s in "--val-crop-frac" "--loader-threads" "--verbose" "random-resized-crop" \
  "horizontal flip" "under mpirun" "--size / --val-crop-frac" "[--val VAL.json]"; do
  contains "$T/out" "$s"
done

# --- usage errors: exit 2, one line -----------------------------------------
for f in 0 -0.5 1.5 x nan; do
  expect 2 fit --val "$va" --val-crop-frac "$f"
  one_line "$T/err"
  contains "$T/err" "--val-crop-frac"
done
expect 2 fit --val "$va" --loader-threads -1
one_line "$T/err"
expect 2 fit --val "$va" --quiet --verbose
one_line "$T/err"
expect 2 "$IMSHARD_TRAIN" --val "$va"
one_line "$T/err"
contains "$T/err" "--train is required"

# --- a run's lines: 44 records, batch 8: 5 steps, 4 records dropped --------
expect 0 fit --val "$va" --epochs 2 --log-every 2 --log-dir "$T/a"
progress=$(grep -c '^imshard-train: epoch [0-9]* step ' "$T/err")
same "$progress" 6 "progress lines (steps 2 4 5 | 6 8 10)"
bad=$(grep '^imshard-train: epoch [0-9]* step ' "$T/err" |
  grep -Evc '^imshard-train: epoch [12] step [0-9]+/10 loss [0-9.]+ acc [0-9.]+% lr [0-9.e-]+, [0-9]+ img/s per rank, [0-9]+ img/s total, elapsed [0-9]+:[0-5][0-9]:[0-5][0-9], eta [0-9]+:[0-5][0-9]:[0-5][0-9] \(wait [0-9]+ ms, compute [0-9]+ ms, comm [0-9]+ ms per step\)$')
same "$bad" 0 "progress lines in the documented form"
contains "$T/err" "step 10/10 "
same "$(grep 'step 10/10 ' "$T/err" | grep -o 'eta [0-9:]*')" "eta 0:00:00" "the last step's ETA"
# one rank: the total is the rank's figure
grep 'step 10/10 ' "$T/err" | grep -Eq ', ([0-9]+) img/s per rank, \1 img/s total' ||
  fail "one rank's total images/s is not its own"
checks=$((checks + 1))
contains "$T/err" "imshard-train: convnet7, 4 classes, 1 rank x batch 8, 5 steps per epoch (44 records per rank)"
lacks "$T/err" "1 ranks"
contains "$T/err" "imshard-train: 4 training records dropped per epoch (0 so ranks are equal, 4 in short last batches"
contains "$T/err" "imshard-train: threads per rank: 1 compute (--threads), 1 loading (as --threads)"
same "$(grep -c 'threads per rank' "$T/err")" 1 "threads logged once"
lacks "$T/err" "imshard: loader:"
lacks "$T/err" "no --val"
contains "$T/out" "(16 records); best top-1"
contains "$T/out" "over 1 rank ("
same "$(json "$T/a/summary.json" 'j["records_dropped_per_epoch"], j["records_dropped_in_short_batches"], j["records_dropped_so_ranks_are_equal"]')" "4 4 0" "summary's dropped records"
same "$(json "$T/a/summary.json" 'j["validation"], j["options"]["val_crop_frac"], j["options"]["loader_threads"]')" "True 0.875 1" "summary's validation and its crop"

# --verbose: the loader says where its batches live
expect 0 fit --val "$va" --max-steps 1 --verbose
contains "$T/err" "imshard: loader: batches in page-aligned host memory"
# --quiet: nothing on stderr
expect 0 fit --val "$va" --max-steps 1 --quiet
same "$(wc -c <"$T/err")" 0 "--quiet's stderr"

# --- --loader-threads apart from --threads ---------------------------------
expect 0 fit --val "$va" --max-steps 1 --loader-threads 2 --log-dir "$T/lt"
contains "$T/err" "threads per rank: 1 compute (--threads), 2 loading (--loader-threads)"
same "$(json "$T/lt/summary.json" 'j["options"]["threads"], j["options"]["loader_threads"]')" "1 2" "threads recorded"
expect 0 "$IMSHARD_TRAIN" --train "$tr" --val "$va" --size 16 --batch-size 8 --max-steps 1 --loader-threads 1
grep -Eq 'threads per rank: [0-9]+ compute \(OpenMP.s default\), 1 loading \(--loader-threads\)' "$T/err" ||
  fail "default compute threads not named: $(grep 'threads per rank' "$T/err")"
checks=$((checks + 1))
# the loading threads change nothing trained: each record's augmentation
# and a damaged record's stand-in are the record's, whichever thread
# decodes it (2 epochs, rotated, zoomed and shifted, 4 records damaged)
expect 0 "$IMSHARD" convert folder "$T/s" -o "$T/pd" --val-ratio 0.25 --seed 3 --quiet
expect 0 /usr/bin/python3 "$IMS_SRC/tests/cli/split_edit.py" damage "$T/pd/train.json" 2 13 30 40
for l in 1 3; do
  expect 0 fit --train "$T/pd/train.json" --val "$va" --epochs 2 --quiet --seed 7 --augment rotate=20,zoom=0.2,shift=0.1 \
    --loader-threads $l --checkpoint-dir "$T/lt$l" --log-dir "$T/lt$l" --log-every 1
done
expect 0 /usr/bin/python3 "$IMS_SRC/tests/cli/st_compare.py" "$T/lt1/checkpoint.safetensors" "$T/lt3/checkpoint.safetensors" --rtol 0 --prefix ""
expect 0 /usr/bin/python3 "$IMS_SRC/tests/cli/st_compare.py" "$T/lt1/checkpoint.safetensors" "$T/lt3/checkpoint.safetensors" --rtol 0 --prefix optim.
same "$(grep -o '"loss":[^,]*\|"bad_record_indices":[^]]*' "$T/lt3/metrics.jsonl")" \
  "$(grep -o '"loss":[^,]*\|"bad_record_indices":[^]]*' "$T/lt1/metrics.jsonl")" "(losses and bad records with 1 and 3 loading threads)"

# --- --val-crop-frac: recorded, and validation sees other pixels -----------
expect 0 fit --val "$va" --max-steps 2 --seed 4 --log-dir "$T/c1" --val-crop-frac 1
same "$(json "$T/c1/summary.json" 'j["options"]["val_crop_frac"]')" 1 "crop fraction recorded"
expect 0 fit --val "$va" --max-steps 2 --seed 4 --log-dir "$T/c2"
vloss() { python3 -c 'import json,sys
print([l["loss"] for l in map(json.loads, open(sys.argv[1])) if l["type"] == "val"])' "$1"; }
tloss() { python3 -c 'import json,sys
print([l["loss"] for l in map(json.loads, open(sys.argv[1])) if l["type"] == "train"])' "$1"; }
same "$(tloss "$T/c1/metrics.jsonl")" "$(tloss "$T/c2/metrics.jsonl")" "training unchanged by --val-crop-frac"
[ "$(vloss "$T/c1/metrics.jsonl")" != "$(vloss "$T/c2/metrics.jsonl")" ] ||
  fail "--val-crop-frac 1 validated the same pixels as 0.875"
checks=$((checks + 1))

# --- without --val: no validation, said once, no accuracy claimed ---------
expect 0 fit --epochs 2 --log-dir "$T/nv" --checkpoint-dir "$T/nv"
same "$(grep -c 'no --val' "$T/err")" 1 "no validation said once"
lacks "$T/err" "validation: top-1"
contains "$T/out" "no validation (no --val)"
lacks "$T/out" "top-1"
same "$(json "$T/nv/summary.json" 'j["validation"], "val_top1" in j, "best_val_top1" in j, "best_epoch" in j, j["epochs"], j["options"]["val"]')" \
  "False False False False 2 None" "summary without validation"
same "$(grep -c '"type":"val"' "$T/nv/metrics.jsonl")" 0 "no val lines"
exists "$T/nv/checkpoint.safetensors"
# a report reads such a run
expect 0 "$IMSHARD" report "$T/nv" -o "$T/nv.html" --quiet
exists "$T/nv.html"

# --- --bucket-mb with one rank: said to have no effect ---------------------
# (before: accepted without a word)
expect 0 fit --max-steps 1 --bucket-mb 8
contains "$T/err" "imshard-train: --bucket-mb 8 has no effect with one rank"
expect 0 fit --max-steps 1
lacks "$T/err" "--bucket-mb"

# --- two ranks: the total sums both ------------------------------------------
if have_mpi; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  expect 0 mpi -np 2 "$IMSHARD_TRAIN" --train "$tr" --val "$va" --size 16 --threads 1 --batch-size 8 --log-every 1 --log-dir "$T/m" --bucket-mb 8
  lacks "$T/err" "has no effect"
  # 22 records per rank: 2 steps of 8, 6 per rank in the short batch
  contains "$T/err" "2 ranks x batch 8, 2 steps per epoch (22 records per rank)"
  contains "$T/err" "12 training records dropped per epoch (0 so ranks are equal, 12 in short last batches"
  same "$(json "$T/m/summary.json" 'j["records_dropped_per_epoch"]')" 12 "two ranks' dropped records"
  # every line's total is 2 x 8 samples over the interval: twice the
  # rank's own images over the same seconds
  n=$(grep -E 'step [0-9]+/2 ' "$T/err" | grep -Ec ', ([0-9]+) img/s per rank, ([0-9]+) img/s total')
  same "$n" 2 "two ranks' progress lines"
  grep -E 'step [0-9]+/2 ' "$T/err" | sed -E 's/.*, ([0-9]+) img\/s per rank, ([0-9]+) img\/s total.*/\1 \2/' |
    while read -r per total; do
      # rounding of each figure: within 1 of twice
      [ $((total - 2 * per)) -le 1 ] && [ $((2 * per - total)) -le 1 ] ||
        echo "total $total is not twice $per" >"$T/twice"
    done
  absent "$T/twice"
fi

# --- --val of the training split's records: validated, with a warning ----
# even under --quiet (before: top-1 on records the run trains on, without
# a word); a copy elsewhere is the same records; another split is not
cp -r "$T/p" "$T/pc"
expect 0 fit --val "$T/pc/train.json" --max-steps 1 --quiet
same "$(wc -l <"$T/err")" 1 "(one line)"
contains "$T/err" "warning: --val '$T/pc/train.json' holds the records of --train '$tr': its accuracy is on records the run trains on"
expect 0 fit --val "$va" --max-steps 1 --quiet
lacks "$T/err" "holds the records of"
lacks "$T/err" "holds no record of"

# --- --val holding images of --train, packed apart: warned of -------------
# (the same list packed twice, or lists of two splittings of one folder:
# before, their digests differed and the run validated on images it trains
# on without a word); the count exact when every training record is looked
# at, and the pair it names one image; none for disjoint splits
ofit() {
  "$IMSHARD_TRAIN" --train "$1" --val "$2" --model convnet7 --size 16 --threads 1 \
    --batch-size 8 --max-steps 1 --quiet
}
# the images two .lst files share (their path column)
shared() { comm -12 <(cut -f3 "$1" | sort) <(cut -f3 "$2" | sort) | wc -l; }
# the named validation record and training record are one image
named_pair() {
  local v t
  v=$(sed -nE 's/.*\(record ([0-9]+) is training record.*/\1/p' "$T/err")
  t=$(sed -nE 's/.*is training record ([0-9]+)\).*/\1/p' "$T/err")
  expect 0 "$IMSHARD" extract "$2" -o "$T/xv" -i "$v" --quiet
  expect 0 "$IMSHARD" extract "$1" -o "$T/xt" -i "$t" --quiet
  cmp -s "$T/xv/$(printf %08d "$v")".* "$T/xt/$(printf %08d "$t")".* ||
    fail "validation record $v and training record $t differ"
  rm -rf "$T/xv" "$T/xt"
}
expect 0 "$IMSHARD" list "$T/s" -o "$T/ol" --train-ratio 0.75 --quiet
expect 0 "$IMSHARD" list "$T/s" -o "$T/om" --train-ratio 0.75 --seed 7 --quiet
expect 0 "$IMSHARD" pack "$T/ol_train.lst" "$T/s" -o "$T/ov/a" --quiet
expect 0 "$IMSHARD" pack "$T/ol_train.lst" "$T/s" -o "$T/ov/b" --shards 2 --quiet
expect 0 "$IMSHARD" pack "$T/ol_val.lst" "$T/s" -o "$T/ov/c" --quiet
expect 0 "$IMSHARD" pack "$T/om_val.lst" "$T/s" -o "$T/ov/d" --quiet
n=$(wc -l <"$T/ol_train.lst")
expect 0 ofit "$T/ov/a.json" "$T/ov/b.json"
same "$(wc -l <"$T/err")" 1 "(one line)"
contains "$T/err" "imshard-train: warning: --val '$T/ov/b.json' holds images of the training split '$T/ov/a.json': $n of its $n records are byte for byte training records (record "
contains "$T/err" "); its accuracy is partly on images the run trains on"
named_pair "$T/ov/a.json" "$T/ov/b.json"
k=$(shared "$T/ol_train.lst" "$T/om_val.lst")
[ "$k" -gt 0 ] || fail "the two splittings share no image: nothing to find"
expect 0 ofit "$T/ov/a.json" "$T/ov/d.json"
contains "$T/err" "holds images of the training split '$T/ov/a.json': $k of its $(wc -l <"$T/om_val.lst") records are byte for byte"
named_pair "$T/ov/a.json" "$T/ov/d.json"
expect 0 ofit "$T/ov/a.json" "$T/ov/c.json"
lacks "$T/err" "holds images of"
# a validation split holding a training image twice: both records count
# (before: the first of them alone, "$n of its $((n + 2))")
cat "$T/ol_train.lst" <(head -n 2 "$T/ol_train.lst") >"$T/ol_twice.lst"
expect 0 "$IMSHARD" pack "$T/ol_twice.lst" "$T/s" -o "$T/ov/g" --classes "$T/ol.classes" --quiet
expect 0 ofit "$T/ov/a.json" "$T/ov/g.json"
contains "$T/err" "holds images of the training split '$T/ov/a.json': $((n + 2)) of its $((n + 2)) records are byte for byte"
# past 1024 training records, an estimate from 1024 of them
expect 0 "$IMSHARD" sample "$T/sb" --classes 2 --per-class 600 --quiet
expect 0 "$IMSHARD" list "$T/sb" -o "$T/bl" --train-ratio 0.9 --quiet
expect 0 "$IMSHARD" list "$T/sb" -o "$T/bm" --train-ratio 0.9 --seed 7 --quiet
expect 0 "$IMSHARD" pack "$T/bl_train.lst" "$T/sb" -o "$T/ov/e" --quiet
expect 0 "$IMSHARD" pack "$T/bm_val.lst" "$T/sb" -o "$T/ov/f" --quiet
k=$(shared "$T/bl_train.lst" "$T/bm_val.lst")
expect 0 ofit "$T/ov/e.json" "$T/ov/f.json"
contains "$T/err" "from 1024 of the training split's 1080 records looked at, "
about=$(sed -nE 's/.*holds images of the training split [^:]*: about ([0-9]+) .*/\1/p' "$T/err")
[ -n "$about" ] && [ $((4 * about)) -ge $((3 * k)) ] && [ $((4 * about)) -le $((5 * k)) ] ||
  fail "about '$about' of the validation records, where $k are: not within a quarter"
named_pair "$T/ov/e.json" "$T/ov/f.json"

# --- classes without a training record: warned of -------------------------
# (an empty class folder that convert kept as a class, or a --classes list
# longer than the data: before, a network with an output never trained,
# without a word); once, under --quiet too, not for --synthetic
mkdir -p "$T/se" && cp -r "$T/s/." "$T/se/" && mkdir "$T/se/empty"
expect 0 "$IMSHARD" convert folder "$T/se" -o "$T/pe" --val-ratio 0.25 --seed 3 --quiet
expect 0 "$IMSHARD_TRAIN" --train "$T/pe/train.json" --val "$T/pe/val.json" --model convnet7 --size 16 --threads 1 \
  --batch-size 8 --max-steps 1 --quiet
same "$(wc -l <"$T/err")" 1 "(one line)"
contains "$T/err" "imshard-train: warning: --train '$T/pe/train.json' holds no record of class 4 'empty' (of its 5 classes): the run never trains the network to predict it"
expect 0 "$IMSHARD_TRAIN" --train "$T/pe/train.json" --model convnet7 --size 16 --threads 1 --batch-size 8 --max-steps 1 --quiet --synthetic
lacks "$T/err" "holds no record"
{ cat "$T/p/classes.txt"; printf 'x%s\n' 1 2 3 4; } >"$T/c8.txt"
expect 0 "$IMSHARD" pack "$T/p/train.lst" "$T/s" -o "$T/p8/train" --classes "$T/c8.txt" --quiet
expect 0 "$IMSHARD_TRAIN" --train "$T/p8/train.json" --model convnet7 --size 16 --threads 1 --batch-size 8 --max-steps 1 --quiet
contains "$T/err" "warning: --train '$T/p8/train.json' holds no record of 4 of its 8 classes (4 'x1', 5 'x2', 6 'x3', ...): the run never trains the network to predict them"
if have_mpi; then
  expect 0 mpi -np 2 "$IMSHARD_TRAIN" --train "$T/pe/train.json" --model convnet7 --size 16 --threads 1 --batch-size 8 --max-steps 1 --quiet
  same "$(grep -c 'holds no record' "$T/err")" 1 "(told once at 2 ranks)"
fi

finish
