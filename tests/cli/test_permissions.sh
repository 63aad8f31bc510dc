#!/usr/bin/env bash
# Files and folders the user cannot read or write (tests run as root, who
# reads and writes any file: as_user drops the capabilities that let it).
# Each run ends 0 having done all it says, or 1/2 with one line naming the
# file and the cause; never a class dropped, a file skipped without a word,
# a verdict about the data, or an output that looks complete. Unreadable
# inputs: an image, a class folder, a list, a classes file (given, or
# beside the list), a manifest, a shard, a checkpoint, a run's files for
# report; folders without write permission for every command that writes;
# another run's logs, or a split's manifest, that cannot be read where a
# run would replace them.
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1
: "${IMSHARD_TRAIN:?IMSHARD_TRAIN must point at imshard-train}"

if ! permissions_bind; then
  echo "note: file permissions cannot be made to bind here (root without setpriv, or" \
    "modes not enforced): not checked"
  scratch_done 1
  exit 77 # skipped (SKIP_RETURN_CODE), not passed
fi
# modes are given back on every exit, so that the scratch folder can go
trap 'chmod -R u+rwX "$T" 2>/dev/null' EXIT
# u CMD...: CMD as a user permissions bind, ended after 120 s (fit: the
# trainer, as fit runs it)
u() {
  [ "$1" = fit ] && set -- "${FIT[@]}" "${@:2}"
  as_user timeout 120 "$@"
}
# locked MODE PATH... / unlock PATH...: chmod, and back
locked() { chmod "$@"; }
unlock() { chmod u+rwX "$@"; }
# refused CODE WHAT CMD...: exits CODE with one line naming WHAT and the cause
refused() {
  local code=$1 what=$2
  shift 2
  expect "$code" u "$@"
  one_line "$T/err"
  contains "$T/err" "'$what'"
  contains "$T/err" "Permission denied"
}
FIT=("$IMSHARD_TRAIN" --train "$T/p/train.json" --val "$T/p/val.json" --model convnet7 --size 16
  --threads 1 --batch-size 8 --quiet)
fit() { "${FIT[@]}" "$@"; }

expect 0 "$IMSHARD" sample "$T/s" --classes 4 --per-class 8 --quiet
expect 0 "$IMSHARD" convert folder "$T/s" -o "$T/p" --val-ratio 0.25 --quiet
expect 0 "$IMSHARD" list "$T/s" -o "$T/l/ds" --quiet
expect 0 fit --epochs 1 --log-dir "$T/run" --checkpoint-dir "$T/run"
ck="$T/run/checkpoint.safetensors"
img="$T/s/circle/$(ls "$T/s/circle" | head -1)"

# --- unreadable inputs ---------------------------------------------------
# a class folder that cannot be listed: an error, not a class dropped or
# left empty (every later label would shift)
locked 000 "$T/s/circle"
refused 1 "$T/s/circle" "$IMSHARD" list "$T/s" -o "$T/l2/ds" --quiet
absent "$T/l2/ds.classes"
refused 1 "$T/s/circle" "$IMSHARD" convert folder "$T/s" -o "$T/c2" --quiet
absent "$T/c2/train.json"
refused 1 "$T/s/circle" "$IMSHARD" list "$T/s" -o "$T/l2/ds" --recursive --quiet
unlock "$T/s/circle"
# an image: skipped, named and counted like any unreadable file
locked 000 "$img"
expect 0 u "$IMSHARD" pack "$T/l/ds_train.lst" "$T/s" -o "$T/pk/x"
contains "$T/err" "skipped '${img#"$T/s/"}'"
contains "$T/err" "Permission denied"
contains "$T/err" "1 skipped"
same "$(json "$T/pk/x.json" 'j["records"]')" 31
contains "$T/pk/x.errors.tsv" "Permission denied"
expect 1 u "$IMSHARD" predict "$ck" "$img"
contains "$T/err" "cannot open '$img': Permission denied"
unlock "$img"
# a list, a classes file given or beside the list (before: pack went on
# without the class names beside the list, numbers in their place)
locked 000 "$T/l/ds_train.lst"
refused 1 "$T/l/ds_train.lst" "$IMSHARD" pack "$T/l/ds_train.lst" "$T/s" -o "$T/pk2/x"
refused 1 "$T/l/ds_train.lst" "$IMSHARD" subset "$T/l/ds_train.lst" -o "$T/sub/a.lst" --per-class 2
unlock "$T/l/ds_train.lst"
locked 000 "$T/l/ds.classes"
refused 1 "$T/l/ds.classes" "$IMSHARD" pack "$T/l/ds_train.lst" "$T/s" -o "$T/pk2/x" --classes "$T/l/ds.classes"
refused 1 "$T/l/ds.classes" "$IMSHARD" pack "$T/l/ds_train.lst" "$T/s" -o "$T/pk2/x"
absent "$T/pk2/x.json"
refused 1 "$T/l/ds.classes" "$IMSHARD" subset "$T/l/ds_train.lst" -o "$T/sub/a.lst" --per-class 2
absent "$T/sub/a.lst"
unlock "$T/l/ds.classes"
# a manifest, a shard
locked 000 "$T/p/val.json"
for c in info verify; do refused 1 "$T/p/val.json" "$IMSHARD" "$c" "$T/p/val.json"; done
refused 1 "$T/p/val.json" "$IMSHARD" eval "$ck" "$T/p/val.json"
refused 1 "$T/p/val.json" fit --epochs 1 --log-dir "$T/r1"
unlock "$T/p/val.json"
# one shard of three: the split is refused whole, before any verdict
expect 0 "$IMSHARD" pack "$T/l/ds_train.lst" "$T/s" -o "$T/m/v" --shards 3 --quiet
sh="$T/m/$(json "$T/m/v.json" 'j["shards"][1]["path"]')"
locked 000 "$sh"
refused 1 "$sh" "$IMSHARD" verify "$T/m/v.json"
lacks "$T/out" "FAILED"
refused 1 "$sh" "$IMSHARD" extract "$T/m/v.json" -o "$T/x1"
absent "$T/x1"
refused 1 "$sh" "$IMSHARD" eval "$ck" "$T/m/v.json"
refused 1 "$sh" "$IMSHARD" bench-load "$T/m/v.json" --batch 4
refused 1 "$sh" "$IMSHARD_TRAIN" --train "$T/m/v.json" --model convnet7 --size 16 --threads 1 \
  --batch-size 8 --quiet --epochs 1 --log-dir "$T/r1"
absent "$T/r1/metrics.jsonl"
refused 1 "$sh" fit --epochs 1 --val "$T/m/v.json" --log-dir "$T/r1"
unlock "$sh"
# a checkpoint
cp -p "$ck" "$T/ck.before"
locked 000 "$ck"
for c in eval predict; do refused 1 "$ck" "$IMSHARD" "$c" "$ck" "$T/p/val.json"; done
refused 1 "$ck" "$IMSHARD" export "$ck" -o "$T/w.safetensors"
absent "$T/w.safetensors"
refused 1 "$ck" fit --epochs 1 --init "$ck" --log-dir "$T/r1" --checkpoint-dir "$T/r1"
refused 1 "$ck" fit --epochs 2 --resume --log-dir "$T/run" --checkpoint-dir "$T/run"
unlock "$ck"
expect 0 cmp "$ck" "$T/ck.before"
# a run's files for report: metrics.jsonl is required
locked 000 "$T/run/metrics.jsonl"
refused 1 "$T/run/metrics.jsonl" "$IMSHARD" report "$T/run" -o "$T/rep.html"
absent "$T/rep.html"
unlock "$T/run/metrics.jsonl"
# summary.json and eval.json: a diagnostic naming each (as for a damaged
# one), the run drawn without it
locked 000 "$T/run/summary.json" "$T/run/eval.json"
expect 0 u "$IMSHARD" report "$T/run" -o "$T/rep.html"
contains "$T/err" "cannot open '$T/run/summary.json': Permission denied: ignored"
contains "$T/err" "cannot open '$T/run/eval.json': Permission denied: not drawn"
unlock "$T/run/summary.json" "$T/run/eval.json"
rm -f "$T/rep.html"

# --- folders without write permission -------------------------------------
# one line naming the folder's file, exit 1, nothing written there
mkdir "$T/ro"
locked 555 "$T/ro"
nothing_in_ro() { same "$(ls -A "$T/ro")" "" "(nothing written into the read-only folder)"; }
wrote_none() {
  expect "$1" u "${@:2}"
  one_line "$T/err"
  contains "$T/err" "'$T/ro"
  contains "$T/err" "Permission denied"
  nothing_in_ro
}
wrote_none 1 "$IMSHARD" pack "$T/l/ds_train.lst" "$T/s" -o "$T/ro/x" --quiet
wrote_none 1 "$IMSHARD" convert folder "$T/s" -o "$T/ro" --quiet
wrote_none 1 "$IMSHARD" list "$T/s" -o "$T/ro/ds" --quiet
wrote_none 1 "$IMSHARD" subset "$T/l/ds_train.lst" -o "$T/ro/a.lst" --per-class 2 --quiet
wrote_none 1 "$IMSHARD" extract "$T/p/val.json" -o "$T/ro" --quiet
wrote_none 1 "$IMSHARD" sample "$T/ro" --classes 2 --per-class 2 --quiet
# refused before the evaluation (before: its results printed, then the
# first file failed)
wrote_none 1 "$IMSHARD" eval "$ck" "$T/p/val.json" -o "$T/ro"
contains "$T/err" "cannot write the evaluation into '$T/ro': no file can be created there (Permission denied)"
same "$(wc -c <"$T/out")" 0 "(nothing on stdout)"
wrote_none 1 "$IMSHARD" eval "$ck" "$T/p/val.json" -o "$T/ro/sub"
contains "$T/err" "cannot write the evaluation into '$T/ro/sub': cannot create folder '$T/ro/sub': Permission denied"
same "$(wc -c <"$T/out")" 0 "(nothing on stdout)"
wrote_none 1 "$IMSHARD" report "$T/run" -o "$T/ro/r.html" --quiet
wrote_none 1 "$IMSHARD" report "$T/run" -o "$T/rep.html" --csv "$T/ro" --quiet
absent "$T/rep.html"
wrote_none 1 "$IMSHARD" export "$ck" -o "$T/ro/w.safetensors"
wrote_none 1 "$IMSHARD" bench-load "$T/p/val.json" --batch 4 --dump 4 "$T/ro" --quiet
# the trainer: refused before the first step
wrote_none 1 fit --epochs 1 --checkpoint-dir "$T/ro" --log-dir "$T/r2"
absent "$T/r2/metrics.jsonl"
wrote_none 1 fit --epochs 1 --log-dir "$T/ro"
# a run's folder made read-only since: its files kept
cp -a "$T/run" "$T/run.before"
locked 555 "$T/run"
expect 1 u fit --epochs 2 --resume --log-dir "$T/run" --checkpoint-dir "$T/run"
one_line "$T/err"
contains "$T/err" "cannot train into '$T/run': no file can be created there (Permission denied)"
unlock "$T/run"
expect 0 diff -r -x imshard-train.lock "$T/run" "$T/run.before"
unlock "$T/ro"

# --- what a run would replace, unreadable -----------------------------------
# a resumed run whose --log-dir holds another run's logs that cannot be
# read (before: taken for no run's, that run's summary replaced and its
# metrics.jsonl extended)
expect 0 fit --epochs 1 --log-dir "$T/la" --checkpoint-dir "$T/ca"
expect 0 fit --epochs 2 --max-steps 2 --checkpoint-dir "$T/cb" --log-dir "$T/lb"
cp -a "$T/la" "$T/la.before"
# write-only: metrics.jsonl could still be appended to
locked 200 "$T/la/summary.json" "$T/la/metrics.jsonl"
expect 1 u fit --epochs 2 --resume --checkpoint-dir "$T/cb" --log-dir "$T/la"
one_line "$T/err"
contains "$T/err" "'$T/la': cannot open '$T/la/"
contains "$T/err" "': Permission denied; make it readable"
unlock "$T/la/summary.json" "$T/la/metrics.jsonl"
expect 0 diff -r -x imshard-train.lock "$T/la" "$T/la.before"
# a run killed before its summary: its metrics.jsonl names it
cp -a "$T/la.before" "$T/lk"
rm "$T/lk/summary.json"
cp "$T/lk/metrics.jsonl" "$T/lk.metrics"
locked 200 "$T/lk/metrics.jsonl"
expect 1 u fit --epochs 2 --resume --checkpoint-dir "$T/cb" --log-dir "$T/lk"
one_line "$T/err"
contains "$T/err" "'$T/lk': cannot open '$T/lk/metrics.jsonl': Permission denied"
unlock "$T/lk/metrics.jsonl"
expect 0 cmp "$T/lk/metrics.jsonl" "$T/lk.metrics"
absent "$T/lk/summary.json"
# a split's manifest at the name of a run's file, unreadable: not taken
# for an earlier run's summary (--force would remove it) or replaced by
# an evaluation's eval.json (before: "not a manifest", and gone)
expect 0 "$IMSHARD" pack "$T/l/ds_train.lst" "$T/s" -o "$T/lm/summary" --quiet
cp "$T/lm/summary.json" "$T/lm.json"
locked 000 "$T/lm/summary.json"
expect 1 u "$IMSHARD_TRAIN" --train "$T/p/train.json" --model convnet7 --size 16 --threads 1 \
  --batch-size 8 --quiet --epochs 1 --log-dir "$T/lm" --checkpoint-dir "$T/cm" --force
one_line "$T/err"
contains "$T/err" "cannot train into '$T/lm': cannot open '$T/lm/summary.json': Permission denied"
unlock "$T/lm/summary.json"
expect 0 cmp "$T/lm/summary.json" "$T/lm.json"
expect 0 "$IMSHARD" pack "$T/l/ds_train.lst" "$T/s" -o "$T/le/eval" --quiet
cp "$T/le/eval.json" "$T/le.json"
locked 000 "$T/le/eval.json"
expect 1 u "$IMSHARD" eval "$ck" "$T/p/val.json" -o "$T/le" --quiet
one_line "$T/err"
contains "$T/err" "cannot write the evaluation into '$T/le': cannot open '$T/le/eval.json': Permission denied"
unlock "$T/le/eval.json"
expect 0 cmp "$T/le/eval.json" "$T/le.json"

finish
