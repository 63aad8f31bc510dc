#!/usr/bin/env bash
# imshard-train: flags taken as given and outputs checked before the
# first step. A --weight-decay given with --optimizer adam or adamw is
# the one used (the old code replaced 1e-4, sgd's default, by the
# optimiser's); --checkpoint-every without --checkpoint-dir is bad usage
# (it did nothing), and so is a --warmup-epochs past --epochs (it was a
# run-time failure, exit 1, after the splits were read). A folder where the run renames a file it writes
# (checkpoint.safetensors, summary.json, the per-class files) is refused
# before the first step, new run or resumed (before: the run trained to
# its first checkpoint or its end, then failed the rename). A --log-dir
# holding a split named summary or eval is refused (before: its manifest
# was taken for an earlier run's file, removed by --force or replaced),
# and so is a folder where no file can be created.
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1
: "${IMSHARD_TRAIN:?IMSHARD_TRAIN must point at imshard-train}"

expect 0 "$IMSHARD" sample "$T/s" --classes 4 --per-class 15 --quiet
expect 0 "$IMSHARD" convert folder "$T/s" -o "$T/p" --val-ratio 0.25 --seed 3 --quiet
tr="$T/p/train.json"
va="$T/p/val.json"
fit() { "$IMSHARD_TRAIN" --train "$tr" --model convnet7 --size 16 --threads 1 --batch-size 8 --quiet "$@"; }
decay() { json "$1/summary.json" 'j["options"]["weight_decay"]'; }

# --- --weight-decay is the user's, whatever its value ---------------------
expect 0 fit --max-steps 1 --optimizer adam --weight-decay 1e-4 --log-dir "$T/wd_adam"
same "$(decay "$T/wd_adam")" 0.0001 "(adam, --weight-decay 1e-4 given)"
expect 0 fit --max-steps 1 --optimizer adamw --weight-decay 0.0001 --log-dir "$T/wd_adamw"
same "$(decay "$T/wd_adamw")" 0.0001 "(adamw, --weight-decay 0.0001 given)"
# the defaults: each optimiser's own
expect 0 fit --max-steps 1 --optimizer adam --log-dir "$T/wd_adam0"
same "$(decay "$T/wd_adam0")" 0 "(adam's default)"
expect 0 fit --max-steps 1 --optimizer adamw --log-dir "$T/wd_adamw0"
same "$(decay "$T/wd_adamw0")" 0.01 "(adamw's default)"
expect 0 fit --max-steps 1 --log-dir "$T/wd_sgd0"
same "$(decay "$T/wd_sgd0")" 0.0001 "(sgd's default)"

# --- the options record what ran ----------------------------------------
# the CPU's convolutions give the same bits every run: a cpu run without
# --cudnn-algo is deterministic, not a device's default benchmark
same "$(json "$T/wd_sgd0/summary.json" '(j["options"]["cudnn_algo"], j["options"]["tf32"])')" "('deterministic', False)" "(cpu run, no --cudnn-algo)"

# --- --checkpoint-every needs somewhere to write ------------------------
expect 2 fit --max-steps 1 --checkpoint-every 1
one_line "$T/err"
contains "$T/err" "--checkpoint-every needs --checkpoint-dir"
expect 0 fit --max-steps 1 --checkpoint-every 0

# --- step counts past what a signed 64-bit count holds are bad usage ------
# (before: --max-steps 2^63 wrapped to a negative count, read as no limit)
for f in max-steps checkpoint-every; do
  expect 2 fit --$f 9223372036854775808 --checkpoint-dir "$T/big"
  one_line "$T/err"
  contains "$T/err" "--$f must be at most 9223372036854775807"
done
absent "$T/big"

# --- a warmup longer than the run is bad usage --------------------------
expect 2 fit --epochs 1 --warmup-epochs 5
one_line "$T/err"
contains "$T/err" "--warmup-epochs 5 is more than --epochs 1"
expect 0 fit --epochs 2 --warmup-epochs 2 --max-steps 1

# --- optimiser and schedule flags change the run ------------------------
# 45 records, batch 8: 5 steps an epoch, 10 in 2 epochs. Each flag is
# compared with the same run without it (same seed, same first weights):
# an option parsed but not applied would log the default run's numbers.
steps() { fit --epochs 2 --log-every 1 --log-dir "$T/$1" "${@:2}"; }
# train NAME EXPR: EXPR of the list r of the run's training lines
train() {
  /usr/bin/python3 -c "import json,sys
r=[x for x in map(json.loads, open(sys.argv[1])) if x['type'] == 'train']
print($2)" "$T/$1/metrics.jsonl"
}
lrs() { train "$1" '[round(x["lr"], 6) for x in r]'; }
expect 0 steps sch_def
same "$(train sch_def 'len(r)')" 10 "(steps logged)"
expect 0 steps sch_cos --schedule cosine
same "$(lrs sch_cos)" "$(lrs sch_def)" "(cosine is the default)"
expect 0 steps sch_const --schedule constant
same "$(lrs sch_const)" "[0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1]" "(--schedule constant)"
expect 0 steps sch_step --schedule step
same "$(lrs sch_step)" "[0.1, 0.1, 0.1, 0.1, 0.1, 0.01, 0.01, 0.001, 0.001, 0.001]" "(--schedule step)"
# warmup: (s + 1) / 5 of the peak over epoch 1, then cosine over the rest
expect 0 steps warm --warmup-epochs 1
same "$(lrs warm)" "[0.02, 0.04, 0.06, 0.08, 0.1, 0.1, 0.090451, 0.065451, 0.034549, 0.009549]" "(--warmup-epochs 1)"
differs() { # BASE FROM NAME FLAGS...: NAME's losses are BASE's before step FROM, not after
  local base=$1 from=$2 name=$3
  shift 3
  expect 0 steps "$name" "$@"
  same "$(train "$name" "[x['loss'] for x in r][:$from - 1]")" \
    "$(train "$base" "[x['loss'] for x in r][:$from - 1]")" "($* before step $from)"
  checks=$((checks + 1))
  [ "$(train "$name" "[x['loss'] for x in r][$from - 1]")" != "$(train "$base" "[x['loss'] for x in r][$from - 1]")" ] ||
    fail "$* did not change step $from's loss"
}
# Nesterov's first update is already another (seen in step 2's loss)
differs sch_def 2 nest --nesterov
# momentum first changes the second update (seen in step 3's loss)
differs sch_def 3 mom0 --momentum 0
# the smoothed target changes the first step's loss already
differs sch_def 1 smooth --label-smoothing 0.3
# with decay, exempting batch norm and biases changes the updates
differs sch_def 2 wd --weight-decay 0.1
differs wd 2 nbd --weight-decay 0.1 --no-bn-bias-decay
# Adam's first update is another than SGD's; AdamW's decay is decoupled,
# so at the same --weight-decay its update is not Adam's
differs sch_def 2 adam --optimizer adam
expect 0 steps adam_wd --optimizer adam --weight-decay 0.1
differs adam_wd 2 adamw_wd --optimizer adamw --weight-decay 0.1
# --lr is the peak: one rank, no scaling
expect 0 steps lr05 --schedule constant --lr 0.05
same "$(lrs lr05)" "[0.05, 0.05, 0.05, 0.05, 0.05, 0.05, 0.05, 0.05, 0.05, 0.05]" "(--lr 0.05)"
# the inputs' normalisation and augmentation reach the first step's loss
differs sch_def 1 mean --mean 0,0,0
differs sch_def 1 std --std 1,1,1
differs sch_def 1 aug --augment none

# --- a folder at a name the run writes ---------------------------------
for f in checkpoint.safetensors summary.json eval.json per_class.csv confusion.csv predictions.csv; do
  rm -rf "$T/fold"
  mkdir -p "$T/fold/$f"
  expect 1 fit --val "$va" --max-steps 1 --log-dir "$T/fold" --checkpoint-dir "$T/fold"
  one_line "$T/err"
  contains "$T/err" "'$T/fold/$f' is a folder, and this run writes a file of that name"
  absent "$T/fold/metrics.jsonl"
done
# a --checkpoint-dir or --log-dir that is not a folder is named for what
# it is (before: "a file of that name exists" for a FIFO, a socket, or a
# link to nothing)
mkfifo "$T/fifo"
ln -s "$T/nowhere" "$T/dangling"
for flag in --checkpoint-dir --log-dir; do
  expect 1 fit --max-steps 1 $flag "$T/fifo"
  one_line "$T/err"
  contains "$T/err" "cannot create folder '$T/fifo': a FIFO of that name exists"
  expect 1 fit --max-steps 1 $flag "$T/dangling/sub"
  one_line "$T/err"
  contains "$T/err" "cannot create folder '$T/dangling': a symbolic link to nothing of that name exists"
done
: >"$T/plain"
expect 1 fit --max-steps 1 --checkpoint-dir "$T/plain"
contains "$T/err" "cannot create folder '$T/plain': a regular file of that name exists"
# without --val no per-class file is written: a folder there is harmless
rm -rf "$T/fold" && mkdir -p "$T/fold/eval.json"
expect 0 fit --max-steps 1 --log-dir "$T/fold"
# resumed: the same check
rm -rf "$T/fold" && mkdir -p "$T/rs"
expect 0 fit --epochs 2 --max-steps 1 --log-dir "$T/rs" --checkpoint-dir "$T/rs"
rm "$T/rs/summary.json" && mkdir "$T/rs/summary.json"
cp "$T/rs/metrics.jsonl" "$T/rs.metrics"
expect 1 fit --epochs 2 --log-dir "$T/rs" --checkpoint-dir "$T/rs" --resume
contains "$T/err" "'$T/rs/summary.json' is a folder"
cmp -s "$T/rs/metrics.jsonl" "$T/rs.metrics" || fail "the refused resume appended to metrics.jsonl"

# --- a --log-dir that is a split's folder --------------------------------
# splits named eval and summary have their manifests at names the run's
# files take: refused, new run, --force or resumed, each manifest kept
# (before: "an earlier run's eval.json", which --force removed, and a
# resumed run replaced both manifests with its own files)
expect 0 "$IMSHARD" pack "$T/p/val.lst" "$T/s" -o "$T/ps/eval" --classes "$T/p/classes.txt" --quiet
expect 0 "$IMSHARD" pack "$T/p/train.lst" "$T/s" -o "$T/ps/summary" --classes "$T/p/classes.txt" --quiet
cp "$T/ps/eval.json" "$T/ps.eval" && cp "$T/ps/summary.json" "$T/ps.summary"
for extra in "" "--force"; do
  # shellcheck disable=SC2086
  expect 1 fit --train "$T/ps/summary.json" --val "$T/ps/eval.json" --max-steps 1 --log-dir "$T/ps" $extra
  one_line "$T/err"
  contains "$T/err" "cannot train into '$T/ps': '$T/ps/summary.json' is the manifest of split 'summary', and a run's --log-dir holds its own summary.json; give this run a --log-dir of its own"
  expect 0 cmp "$T/ps/eval.json" "$T/ps.eval"
  expect 0 cmp "$T/ps/summary.json" "$T/ps.summary"
  absent "$T/ps/metrics.jsonl"
done
rm "$T/ps/summary.json"
expect 1 fit --max-steps 1 --log-dir "$T/ps" --force
contains "$T/err" "'$T/ps/eval.json' is the manifest of split 'eval'"
expect 0 fit --epochs 2 --max-steps 1 --checkpoint-dir "$T/psck"
expect 1 fit --val "$T/ps/eval.json" --epochs 2 --checkpoint-dir "$T/psck" --log-dir "$T/ps" --resume
one_line "$T/err"
contains "$T/err" "'$T/ps/eval.json' is the manifest of split 'eval'"
expect 0 cmp "$T/ps/eval.json" "$T/ps.eval"
# a folder inside the split's is the run's own
expect 0 fit --val "$T/ps/eval.json" --max-steps 1 --log-dir "$T/ps/run"

# --- a folder where no file can be created ---------------------------------
# (its lock file there from an earlier run, so the lock is taken: before,
# a --checkpoint-dir failed at the first checkpoint, after an epoch's
# training, and a resumed run's --log-dir at its end, after all of it)
expect 0 fit --epochs 2 --max-steps 1 --checkpoint-dir "$T/rock" --log-dir "$T/ro"
mkdir -p "$T/ro2" && : >"$T/ro2/imshard-train.lock"
if chattr +i "$T/ro" "$T/ro2" 2>/dev/null; then
  cp "$T/ro/metrics.jsonl" "$T/ro.metrics"
  expect 1 fit --epochs 2 --checkpoint-dir "$T/rock" --log-dir "$T/ro" --resume
  one_line "$T/err"
  contains "$T/err" "cannot train into '$T/ro': no file can be created there (Operation not permitted), and this run writes its summary.json at its end; give this run a --log-dir it can write"
  cmp -s "$T/ro/metrics.jsonl" "$T/ro.metrics" || fail "the refused resume appended to metrics.jsonl"
  expect 1 fit --epochs 2 --checkpoint-dir "$T/ro2"
  one_line "$T/err"
  contains "$T/err" "cannot train into '$T/ro2': no file can be created there (Operation not permitted), and this run writes its checkpoint.safetensors at its first checkpoint; give this run a --checkpoint-dir it can write"
  expect 1 fit --epochs 2 --log-dir "$T/ro2"
  contains "$T/err" "its summary.json at its end"
  chattr -i "$T/ro" "$T/ro2"
  same "$(ls "$T/ro" "$T/ro2" | tr '\n' ' ')" "$T/ro: imshard-train.lock metrics.jsonl summary.json  $T/ro2: imshard-train.lock " "nothing left in the folders"
else
  echo "note: chattr +i not permitted here: a folder without room for a file not checked"
fi

finish
