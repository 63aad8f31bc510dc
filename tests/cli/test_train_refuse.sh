#!/usr/bin/env bash
# imshard-train refuses what it used to accept without a word:
#  - a resumed run continues at the checkpoint's global position with a
#    new rank count (1 -> 2, 2 -> 1: each sample of the epoch trained once
#    over both parts, weights as an uninterrupted run's within 1e-5) or
#    batch size (16 -> 32: the schedule re-derived, logged); a changed
#    seed, model, size, training split or --epochs is refused;
#  - resuming a finished run changes no file; a mid-run resume's summary
#    describes the whole run;
#  - a checkpoint byte flipped is refused by --resume and --init; a file
#    without a checksum loads, said unverified; a non-finite validation
#    loss stops the run; --init or --resume of a weight, running
#    statistic or (--resume) optimiser state that is not finite is
#    refused, and of a running variance below 0;
#  - damaged records are counted and named per epoch, --max-bad-records;
#  - --init that loads nothing, or part of the backbone, is refused unless
#    --init-partial (num_batches_tracked counters are not required);
#    --reset-head;
#  - a second trainer on a locked folder is refused; a failed metrics
#    write ends the run at once; a new run where an earlier run left its
#    checkpoint or logs is refused unless --force (which removes them);
#  - under a memory limit too small for OpenBLAS, one line, no spinning.
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1
: "${IMSHARD_TRAIN:?IMSHARD_TRAIN must point at imshard-train}"
cmp_st() { /usr/bin/python3 "$IMS_SRC/tests/cli/st_compare.py" "$@"; }
st_tool() { /usr/bin/python3 "$IMS_SRC/tests/cli/st_tool.py" "$@"; }
mpi() { ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" mpirun "$@"; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

expect 0 "$IMSHARD" sample "$T/s" --classes 4 --per-class 40 --quiet
expect 0 "$IMSHARD" convert folder "$T/s" -o "$T/p" --val-ratio 0.25 --seed 3 --quiet
tr="$T/p/train.json"
va="$T/p/val.json"
same "$(json "$tr" 'j["records"]')" 120 "training records"
fit() { "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --quiet "$@"; }

# seen PREFIX EPOCH: the record indices the ranks of a run (PREFIX.RANK
# files of IMSHARD_TEST_TRAINED) trained in EPOCH (from 0), sorted, with
# their count and how many are distinct
seen() {
  /usr/bin/python3 - "$@" <<'PY'
import glob, sys
got = []
for f in glob.glob(sys.argv[1] + ".*"):
    for line in open(f):
        w = line.split()
        if int(w[0]) == int(sys.argv[2]):
            got += [int(x) for x in w[2:]]
print(len(got), len(set(got)), sorted(got))
PY
}

# --- 1. resume with another rank count: the same global position --------
# 1 rank x 16 = 2 ranks x 8 (frozen batch norm: the same computation), 7
# steps an epoch: 3 in one part, 4 in the other, each way round.
if have_mpi; then
  common=(--train "$tr" --val "$va" --model resnet18 --size 16 --threads 1 --epochs 1 --freeze-bn --lr 0.05 --seed 4 --quiet)
  IMSHARD_TEST_TRAINED="$T/seen_u" expect 0 "$IMSHARD_TRAIN" "${common[@]}" --batch-size 16 --checkpoint-dir "$T/u"
  IMSHARD_TEST_TRAINED="$T/seen_a" expect 0 "$IMSHARD_TRAIN" "${common[@]}" --batch-size 16 --max-steps 3 --checkpoint-dir "$T/a" --log-dir "$T/a"
  IMSHARD_TEST_TRAINED="$T/seen_a" expect 0 mpi -np 2 "$IMSHARD_TRAIN" "${common[@]}" --batch-size 8 --checkpoint-dir "$T/a" --log-dir "$T/a" --resume
  # --lr is per rank at the batch a run starts with: a run started on 2
  # ranks of 8 has twice the peak rate of one on 1 rank of 16, unless
  # --no-lr-scaling
  IMSHARD_TEST_TRAINED="$T/seen_b" expect 0 mpi -np 2 "$IMSHARD_TRAIN" "${common[@]}" --no-lr-scaling --batch-size 8 --max-steps 3 --checkpoint-dir "$T/b"
  IMSHARD_TEST_TRAINED="$T/seen_b" expect 0 "$IMSHARD_TRAIN" "${common[@]}" --no-lr-scaling --batch-size 16 --checkpoint-dir "$T/b" --resume
  u=$(seen "$T/seen_u" 0)
  same "${u%% \[*}" "112 112" "uninterrupted: 7 steps of 16, each record once"
  same "$(seen "$T/seen_a" 0)" "$u" "1 -> 2 ranks: the records of the uninterrupted epoch, each once"
  same "$(seen "$T/seen_b" 0)" "$u" "2 -> 1 rank: the records of the uninterrupted epoch, each once"
  expect 0 cmp_st "$T/u/checkpoint.safetensors" "$T/a/checkpoint.safetensors" --rtol 1e-5
  expect 0 cmp_st "$T/u/checkpoint.safetensors" "$T/a/checkpoint.safetensors" --rtol 1e-5 --prefix optim.
  expect 0 cmp_st "$T/u/checkpoint.safetensors" "$T/b/checkpoint.safetensors" --rtol 1e-5
  expect 0 cmp_st "$T/u/checkpoint.safetensors" "$T/b/checkpoint.safetensors" --rtol 1e-5 --prefix optim.
  # the change, in metrics.jsonl: same global batch, same peak rate
  same "$(/usr/bin/python3 -c 'import json,sys
r = [json.loads(l) for l in open(sys.argv[1]) if "\"resume\"" in l]
print([(x["world_was"], x["world"], x["batch_was"], x["batch"], x["epoch_position"], x["rest_steps"], x["lr_peak"] == x["lr_peak_was"]) for x in r])' "$T/a/metrics.jsonl")" \
    "[(1, 2, 16, 8, 48, 4, True)]" "the resume line of 1 -> 2 ranks"
fi

# --- 1. resume with another batch size ------------------------------------
# 16 -> 32 on one rank: 2 steps of 16 (positions 0-31), then 2 of 32
# (32-95; the last 24 records fill no batch, as in any epoch at 32); the
# peak rate doubles with the global batch; no step past the total
IMSHARD_TEST_TRAINED="$T/seen_c" expect 0 fit --batch-size 16 --epochs 2 --max-steps 2 --checkpoint-dir "$T/c" --log-dir "$T/c"
cp -r "$T/c" "$T/c_part"
run env IMSHARD_TEST_TRAINED="$T/seen_c" "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 \
  --batch-size 32 --epochs 2 --checkpoint-dir "$T/c" --log-dir "$T/c" --resume --log-every 1
same "$rc" 0 "16 -> 32 resumed"
contains "$T/err" "resumed with 1 rank x batch 32 (was 1 x 16): global batch 32 (was 16), peak lr 0.2 (was 0.1)"
contains "$T/err" "the rest of epoch 1: 2 steps"
same "$(sed -n 's/.* step \([0-9]*\)\/\([0-9]*\) .*/\1 \2/p' "$T/err" | tr '\n' ' ')" "3 7 4 7 5 7 6 7 7 7 " "steps of the total"
IMSHARD_TEST_TRAINED="$T/seen_c32" expect 0 fit --batch-size 32 --epochs 1 --max-steps 3 --checkpoint-dir "$T/c32"
c32=$(seen "$T/seen_c32" 0)
same "${c32%% \[*}" "96 96" "an epoch at 32"
same "$(seen "$T/seen_c" 0)" "$c32" "16 -> 32: positions 0-95 of the epoch, each once"
same "$(json "$T/c/summary.json" '(j["steps"], j["images"], j["epochs"], len(j["parts"]))')" "(7, 192, 2, 2)" "16 -> 32 summary"
same "$(/usr/bin/python3 -c 'import json,sys
l = [json.loads(x) for x in open(sys.argv[1])]
r = [x for x in l if x["type"] == "resume"][0]
t = [x for x in l if x["type"] == "train"]
print(r["global_batch_was"], r["global_batch"], r["lr_peak"] / r["lr_peak_was"], r["rest_unused"], all(x["lr"] > 0 for x in t))' "$T/c/metrics.jsonl")" \
  "16 32 2.0 24 True" "16 -> 32 in metrics.jsonl"

# nothing to resume: one line, and no folder made (before: "cannot open
# safetensors '.../checkpoint.safetensors': No such file or directory",
# the mistyped folder made, a lock file in it; --log-dir's too)
expect 1 fit --batch-size 16 --epochs 2 --checkpoint-dir "$T/no_such" --log-dir "$T/no_such_log" --resume
one_line "$T/err"
contains "$T/err" "cannot resume from '$T/no_such': no such folder"
absent "$T/no_such"
absent "$T/no_such_log"
mkdir "$T/no_ckpt"
expect 1 fit --batch-size 16 --epochs 2 --checkpoint-dir "$T/no_ckpt" --resume
one_line "$T/err"
contains "$T/err" "cannot resume from '$T/no_ckpt': it holds no checkpoint.safetensors"
same "$(ls -A "$T/no_ckpt")" "" "a refused resume leaves its folder as it was"

# settings that change what the position means: one line naming both values
ck() { fit --batch-size 16 --epochs 2 --checkpoint-dir "$T/c_part" --resume "$@"; }
before=$(md5sum <"$T/c_part/checkpoint.safetensors")
expect 1 ck --seed 5
one_line "$T/err"
contains "$T/err" "with --seed 5: its run used --seed 1"
expect 1 ck --model resnet18
one_line "$T/err"
contains "$T/err" "with --model resnet18: its run trains convnet7"
expect 1 ck --size 24
one_line "$T/err"
contains "$T/err" "with --size 24: its run trains at --size 16"
expect 1 ck --epochs 3
one_line "$T/err"
contains "$T/err" "with --epochs 3: its run was set up for --epochs 2"
# the normalisation its weights learnt on (before: taken silently, and the
# model card rewritten with the new one)
expect 1 ck --mean 1,2,3
one_line "$T/err"
contains "$T/err" "with --mean 1,2,3: its run normalised its inputs with --mean 123.675,116.28,103.53, which its weights learnt on"
expect 1 ck --std 9,9,9
one_line "$T/err"
contains "$T/err" "with --std 9,9,9: its run normalised its inputs with --std 58.395,57.12,57.375"
# the optimiser state the checkpoint holds, named as the setting (before:
# "tensor 'optim.exp_avg.features.0.weight' is missing")
expect 1 ck --optimizer adam
one_line "$T/err"
contains "$T/err" "with --optimizer adam: its run used --optimizer sgd, whose state the checkpoint holds"
expect 1 ck --momentum 0
one_line "$T/err"
contains "$T/err" "with --momentum 0: its run used --momentum 0.9, and SGD keeps momentum buffers only with a momentum"
expect 0 "$IMSHARD" sample "$T/s3" --classes 3 --per-class 20 --quiet
expect 0 "$IMSHARD" convert folder "$T/s3" -o "$T/p3" --val-ratio 0.25 --seed 3 --quiet
expect 1 ck --train "$T/p3/train.json" --val "$T/p3/val.json"
one_line "$T/err"
contains "$T/err" "its run has 4 classes, the splits given now have 3"
expect 0 "$IMSHARD" convert folder "$T/s" -o "$T/p2" --val-ratio 0.3 --seed 3 --quiet
expect 1 ck --train "$T/p2/train.json"
one_line "$T/err"
contains "$T/err" "the training split differs: its run trained on split 'train' (120 records"
# another validation split: the run's best validation would compare
# epochs scored on two splits (before: resumed without a word)
expect 1 ck --val "$T/p2/val.json"
one_line "$T/err"
contains "$T/err" "the validation split differs: its run validated on split 'val' ($(json "$va" 'j["records"]') records"
contains "$T/err" "--val '$T/p2/val.json' is split 'val' ($(json "$T/p2/val.json" 'j["records"]') records"
same "$(md5sum <"$T/c_part/checkpoint.safetensors")" "$before" "refused resumes leave the checkpoint"
# without --val nothing is compared: it resumes
cp -r "$T/c_part" "$T/c_noval"
expect 0 "$IMSHARD_TRAIN" --train "$tr" --model convnet7 --size 16 --threads 1 --quiet --batch-size 16 --epochs 2 \
  --checkpoint-dir "$T/c_noval" --resume
# optimiser settings are taken as given, and listed
cp -r "$T/c_part" "$T/c_other"
expect 0 "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --batch-size 16 --epochs 2 \
  --checkpoint-dir "$T/c_other" --resume --weight-decay 0.001 --no-bn-bias-decay --label-smoothing 0.1
contains "$T/err" "imshard-train: resumed with other settings: weight_decay 0.0001 -> 0.001, no_bn_bias_decay off -> on, label_smoothing 0 -> 0.1"
# a float option is written as given (before: 0.1000000015)
st_tool get "$T/c_other/checkpoint.safetensors" options >"$T/opts.json"
same "$(json "$T/opts.json" 'j["label_smoothing"]')" "0.1" "label smoothing in the checkpoint's options"
# ... and a checkpoint that has it widened is the same setting: not listed
cp -r "$T/c_part" "$T/c_wide"
st_tool get "$T/c_wide/checkpoint.safetensors" options >"$T/opts.json"
st_tool set "$T/c_wide/checkpoint.safetensors" "options=$(/usr/bin/python3 -c 'import json,sys
j = json.load(open(sys.argv[1])); j["label_smoothing"] = 0.10000000149011612; print(json.dumps(j))' "$T/opts.json")"
expect 0 "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --batch-size 16 --epochs 2 \
  --checkpoint-dir "$T/c_wide" --resume --label-smoothing 0.1
lacks "$T/err" "resumed with other settings"

# --- 2. a finished run: nothing changes; a resumed run's summary ---------
expect 0 fit --batch-size 16 --epochs 1 --checkpoint-dir "$T/done" --log-dir "$T/done"
sums=$(md5sum "$T/done/"*.json* "$T/done/checkpoint.safetensors")
expect 0 fit --batch-size 16 --epochs 1 --checkpoint-dir "$T/done" --log-dir "$T/done" --resume
contains "$T/out" "nothing to train: the run in '$T/done' is complete at step 7 (1 epoch done); no file changed"
same "$(md5sum "$T/done/"*.json* "$T/done/checkpoint.safetensors")" "$sums" "a finished run resumed changes nothing"
# a run that stopped at --max-steps inside an epoch says where (before:
# "(1 epoch done)" after 3 of the epoch's 7 steps)
expect 0 fit --batch-size 16 --epochs 2 --max-steps 3 --checkpoint-dir "$T/ms" --log-dir "$T/ms"
expect 0 fit --batch-size 16 --epochs 2 --max-steps 3 --checkpoint-dir "$T/ms" --log-dir "$T/ms" --resume
contains "$T/out" "nothing to train: the run in '$T/ms' reached --max-steps at step 3 (in epoch 1 of 2); no file changed"
# the 16 -> 32 run's summary: both parts' images and time, the best
# validation over both (metrics.jsonl holds every val line)
same "$(/usr/bin/python3 -c 'import json,sys
s = json.load(open(sys.argv[2]))
v = [json.loads(x) for x in open(sys.argv[1]) if "\"val\"" in x]
best = max(v, key=lambda x: x["top1"])
p = s["parts"]
print(len(v), s["best_val_top1"] == best["top1"], s["best_epoch"] == best["epoch"],
      s["wall_s"] > p[0]["wall_s"] > 0, abs(s["wall_s"] - p[0]["wall_s"] - p[1]["wall_s"]) < 0.5,
      [(x["world"], x["batch_per_rank"], x["steps"], x["images"]) for x in p])' "$T/c/metrics.jsonl" "$T/c/summary.json")" \
  "3 True True True True [(1, 16, 2, 32), (1, 32, 5, 160)]" "a resumed run's summary covers both parts"

# --- 3. checksums ---------------------------------------------------------
cp -r "$T/c_part" "$T/flip"
st_tool flip "$T/flip/checkpoint.safetensors" features.0.weight 5
expect 1 fit --batch-size 16 --epochs 2 --checkpoint-dir "$T/flip" --resume
one_line "$T/err"
contains "$T/err" "cannot resume from '$T/flip/checkpoint.safetensors': its content does not match its checksum"
expect 1 fit --init "$T/flip/checkpoint.safetensors" --max-steps 1
one_line "$T/err"
contains "$T/err" "cannot load '$T/flip/checkpoint.safetensors': its content does not match its checksum"
# a damaged model card is the damage it is: one line, not first a
# warning that the file was trained on other classes or inputs (before:
# both warnings, then the refusal)
cp "$T/c_part/checkpoint.safetensors" "$T/card.safetensors"
st_tool set "$T/card.safetensors" 'class_names=["a","b","c","d"]' mean=1,2,3 --keep-checksum
expect 1 fit --init "$T/card.safetensors" --max-steps 1
one_line "$T/err"
contains "$T/err" "cannot load '$T/card.safetensors': its content does not match its checksum"
# verified, or said to have none (a PyTorch export)
run "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --max-steps 1 --init "$T/c_part/checkpoint.safetensors"
same "$rc" 0 "--init of a checkpoint"
contains "$T/err" "(checksum verified)"
cp "$T/c_part/checkpoint.safetensors" "$T/plain.safetensors"
st_tool strip "$T/plain.safetensors"
run "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --max-steps 1 --init "$T/plain.safetensors"
same "$rc" 0 "--init of a file without a checksum"
contains "$T/err" "(it has no checksum: nothing to verify)"
# --init and --resume open their file once: the card, the tensors, the
# CRC-32C recorded and (--resume) the settings and position are one
# file's, whatever replaces it meanwhile (a run writing its next
# checkpoint; before: each opened it twice). Seen with strace where it
# may trace.
if command -v strace >/dev/null && strace -f -qq -e trace=none true 2>/dev/null; then
  traced() {
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
      strace -f -qq -e trace=open,openat,openat2 -e signal=none -o "$T/opens" "$@"
  }
  opens() { grep -c "open[a-z0-9]*(.*\"$1\"" "$T/opens"; }
  expect 0 traced "$IMSHARD_TRAIN" --train "$tr" --model convnet7 --size 16 --threads 1 \
    --max-steps 1 --quiet --init "$T/c_part/checkpoint.safetensors"
  same "$(opens "$T/c_part/checkpoint.safetensors")" 1 "opens of --init's file"
  cp -r "$T/c_part" "$T/once_r"
  expect 0 traced "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 \
    --batch-size 16 --epochs 2 --max-steps 3 --quiet --checkpoint-dir "$T/once_r" --resume
  same "$(opens "$T/once_r/checkpoint.safetensors")" 1 "opens of the checkpoint by --resume"
fi
# a running mean far out of range in a file whose checksum matches: the
# weights are finite and load, the validation loss is NaN, and the run
# stops before its checkpoint
cp "$T/c_part/checkpoint.safetensors" "$T/farmean.safetensors"
st_tool poke "$T/farmean.safetensors" features.1.running_mean 0 -3e38
expect 1 fit --init "$T/farmean.safetensors" --max-steps 1 --checkpoint-dir "$T/farmean"
one_line "$T/err"
contains "$T/err" "validation loss is NaN after epoch 1"
absent "$T/farmean/checkpoint.safetensors"
# a running variance made negative in such a file is refused by --init,
# named with its element, before any file of the run is written, and so
# is a checkpoint holding one by --resume (before: both loaded, and
# batch norm divided by the square root of a negative number: a NaN
# validation loss after the first epoch, or below -eps silent garbage)
cp "$T/c_part/checkpoint.safetensors" "$T/negvar.safetensors"
st_tool poke "$T/negvar.safetensors" features.1.running_var 0 -1000
expect 1 fit --init "$T/negvar.safetensors" --max-steps 1 --checkpoint-dir "$T/negvar" --log-dir "$T/negvar"
one_line "$T/err"
contains "$T/err" "cannot load '$T/negvar.safetensors': tensor 'features.1.running_var' holds -1000 at element 0 (as float32): a running variance is a finite number not below 0"
absent "$T/negvar"
cp -r "$T/c_part" "$T/negvar_r"
st_tool poke "$T/negvar_r/checkpoint.safetensors" features.5.running_var 2 -1e-6
before=$(md5sum <"$T/negvar_r/checkpoint.safetensors")
expect 1 fit --batch-size 16 --epochs 2 --checkpoint-dir "$T/negvar_r" --resume
one_line "$T/err"
contains "$T/err" "cannot resume from '$T/negvar_r/checkpoint.safetensors': tensor 'features.5.running_var' holds -1e-06 at element 2 (as float32)"
same "$(md5sum <"$T/negvar_r/checkpoint.safetensors")" "$before" "a refused resume keeps its checkpoint"
# a running mean or optimiser state that is not finite is refused by
# --resume too, named with its element, the checkpoint kept (before: only
# --init looked; the run trained on and stopped at the next validation's
# NaN loss, or at its first step's)
cp -r "$T/c_part" "$T/infmean_r"
st_tool poke "$T/infmean_r/checkpoint.safetensors" features.1.running_mean 2 -inf
before=$(md5sum <"$T/infmean_r/checkpoint.safetensors")
expect 1 fit --batch-size 16 --epochs 2 --checkpoint-dir "$T/infmean_r" --resume
one_line "$T/err"
contains "$T/err" "cannot resume from '$T/infmean_r/checkpoint.safetensors': tensor 'features.1.running_mean' holds -inf at element 2 (as float32)"
same "$(md5sum <"$T/infmean_r/checkpoint.safetensors")" "$before" "a refused resume keeps its checkpoint"
cp -r "$T/c_part" "$T/nanmom_r"
st_tool poke "$T/nanmom_r/checkpoint.safetensors" optim.momentum_buffer.features.0.weight 5 nan
expect 1 fit --batch-size 16 --epochs 2 --checkpoint-dir "$T/nanmom_r" --resume
one_line "$T/err"
contains "$T/err" "cannot resume from '$T/nanmom_r/checkpoint.safetensors': tensor 'optim.momentum_buffer.features.0.weight' holds NaN at element 5 (as float32)"
# a weight that is not finite is refused by --init, named, before any
# file is written (before: the run started its logs and stopped at step
# 1's NaN loss, blaming --lr or the data)
cp "$T/c_part/checkpoint.safetensors" "$T/naninit.safetensors"
st_tool poke "$T/naninit.safetensors" features.0.weight 3 nan
expect 1 fit --init "$T/naninit.safetensors" --max-steps 1 --checkpoint-dir "$T/naninit" --log-dir "$T/naninit"
one_line "$T/err"
contains "$T/err" "cannot load '$T/naninit.safetensors': tensor 'features.0.weight' holds NaN at element 3 (as float32)"
absent "$T/naninit"
# an infinite head that --reset-head leaves out is never read
st_tool poke "$T/naninit.safetensors" features.0.weight 3 0
st_tool poke "$T/naninit.safetensors" classifier.3.weight 0 inf
expect 1 fit --init "$T/naninit.safetensors" --max-steps 1
contains "$T/err" "tensor 'classifier.3.weight' holds inf at element 0"
expect 0 fit --init "$T/naninit.safetensors" --max-steps 1 --reset-head

# --- 4. damaged records: counted, named, limited ---------------------------
cp -r "$T/p" "$T/pd"
edit() { /usr/bin/python3 "$IMS_SRC/tests/cli/split_edit.py" "$@"; }
expect 0 edit damage "$T/pd/train.json" 3 17 29 40 41 58 77 90 101 119
expect 0 edit damage "$T/pd/val.json" 2 20 33
bad() { "$IMSHARD_TRAIN" --train "$T/pd/train.json" --val "$T/pd/val.json" --model convnet7 --size 16 --threads 1 --batch-size 8 --quiet "$@"; }
expect 0 bad --epochs 2 --log-dir "$T/bad"
same "$(grep -c 'training records could not be loaded' "$T/err")" 2 "a warning line per epoch (under --quiet too)"
contains "$T/err" "imshard-train: warning: epoch 1: 10 training records could not be loaded, each replaced by another record of the epoch (records 3, 17, 29, 40, 41, 58, 77, 90, ...;"
contains "$T/err" "imshard-train: warning: epoch 1 validation: 3 records could not be loaded and were left out (records 2, 20, 33;"
contains "$T/out" "(37 records)"
same "$(/usr/bin/python3 -c 'import json,sys
l = [json.loads(x) for x in open(sys.argv[1])]
s = json.load(open(sys.argv[2]))
print([x["bad_records"] for x in l if x["type"] == "epoch"], [(x["records"], x["bad_records"]) for x in l if x["type"] == "val"],
      s["bad_records"], s["bad_record_indices"], s["val_records"], s["val_bad_records"])' "$T/bad/metrics.jsonl" "$T/bad/summary.json")" \
  "[10, 10] [(37, 3), (37, 3)] 20 [3, 17, 29, 40, 41, 58, 77, 90] 37 3" "bad records in metrics.jsonl and summary.json"
expect 1 bad --epochs 2 --max-bad-records 5
one_line "$T/err"
contains "$T/err" "6 training records of epoch 1 could not be loaded by step 6, more than"
contains "$T/err" "more than --max-bad-records 5"
# the limit is an epoch's: the same 10 records met again in epoch 2 are
# not 20 against it (before: a limit of 10 passed 1 epoch and ended the
# second, the data unchanged)
expect 0 bad --epochs 2 --max-bad-records 10
same "$(grep -c 'training records could not be loaded' "$T/err")" 2 "both epochs told under the limit"
expect 1 bad --epochs 2 --max-bad-records 9
contains "$T/err" "10 training records of epoch 1 could not be loaded by step"
# an intact split: no line, zero counts
expect 0 fit --epochs 1 --log-dir "$T/good"
lacks "$T/err" "could not be loaded"
same "$(json "$T/good/summary.json" '(j["bad_records"], j["bad_record_indices"], j["val_bad_records"], j["val_records"])')" "(0, [], 0, 40)" "an intact split's counts"

# a label the manifest has no class for (its class list cut short, or a
# record relabelled past it) is a damaged record: replaced and named, in
# training and in validation (before: the run stopped at the loss,
# "sample 5 has label 9", naming neither split nor record; for a
# validation record after the epoch's training, with no checkpoint)
cp -r "$T/p" "$T/pl"
expect 0 edit relabel "$T/pl/train.json" 5 9
expect 0 edit relabel "$T/pl/val.json" 2 9
expect 0 "$IMSHARD_TRAIN" --train "$T/pl/train.json" --val "$T/pl/val.json" --model convnet7 --size 16 --threads 1 --batch-size 8 --quiet --epochs 1 --log-dir "$T/pl/log"
contains "$T/err" "epoch 1: 1 training record could not be loaded"
contains "$T/err" "record 5 in shard '$T/pl/train-00000-of-00001.mdb': label 9 has no class (the manifest lists 4)"
lacks "$T/err" "record 5: record 5" # named once (before: twice, the loader's context first)
contains "$T/err" "epoch 1 validation: 1 record could not be loaded and was left out"
contains "$T/out" "(39 records)"
same "$(json "$T/pl/log/summary.json" '(j["bad_records"], j["bad_record_indices"], j["val_bad_records"])')" "(1, [5], 1)" "records without a class counted"
# one record over the limit is said in the singular (before: "1 training
# records ... (this rank's: records 5)")
expect 1 "$IMSHARD_TRAIN" --train "$T/pl/train.json" --model convnet7 --size 16 --threads 1 --batch-size 8 --quiet --epochs 1 --max-bad-records 0
one_line "$T/err"
contains "$T/err" "imshard: 1 training record of epoch 1 could not be loaded by step "
contains "$T/err" ", more than --max-bad-records 0 (this rank's: record 5): stopping"

# a record whose header gives another size than its image's is damaged:
# the sample was planned for that size (before: a header of 8x8 over an
# image of about 180x220 trained on its top-left corner, without a word)
cp -r "$T/p" "$T/pz"
expect 0 edit resize "$T/pz/train.json" 0 8 8
expect 0 "$IMSHARD_TRAIN" --train "$T/pz/train.json" --model convnet7 --size 16 --threads 1 --batch-size 8 --quiet --epochs 1
contains "$T/err" "epoch 1: 1 training record could not be loaded"
contains "$T/err" "(upright), not the 8x8 its header gives"

# at 2 ranks, the warning gives the reason when only rank 1 met the record
# (before: rank 0 printed the indices, and no reason, which only rank 1
# knew)
if have_mpi; then
  IMSHARD_TEST_TRAINED="$T/seen_r" expect 0 mpi -np 2 "$IMSHARD_TRAIN" --train "$tr" --model convnet7 --size 16 --threads 1 --batch-size 8 --quiet --epochs 1
  r1=$(awk '$1 == 0 { print $3; exit }' "$T/seen_r.1")
  cp -r "$T/p" "$T/pr"
  expect 0 edit resize "$T/pr/train.json" "$r1" 8 8
  expect 0 mpi -np 2 "$IMSHARD_TRAIN" --train "$T/pr/train.json" --model convnet7 --size 16 --threads 1 --batch-size 8 --quiet --epochs 1
  contains "$T/err" "epoch 1: 1 training record could not be loaded"
  contains "$T/err" "(records $r1; "
  contains "$T/err" "not the 8x8 its header gives"
  # every record rank 1 reads damaged: its loader gives up, and rank 0
  # learns so in the step's collectives. The job ends after that step with
  # rank 1's reason, once, and no abort (before: MPI_ABORT's banner, and
  # rank 0 killed in the gradients' allreduce)
  cp -r "$T/p" "$T/pa"
  awk '$1 == 0 { for (i = 3; i <= NF; i++) print $i }' "$T/seen_r.0" >"$T/mine0"
  expect 0 edit damage "$T/pa/train.json" $(seq 0 119 | grep -vxFf "$T/mine0")
  expect 1 mpi -np 2 "$IMSHARD_TRAIN" --train "$T/pa/train.json" --model convnet7 --size 16 --threads 1 --batch-size 8 --quiet --epochs 1
  same "$(grep -c '^imshard: ' "$T/err")" 1 "one line for a rank whose every record is damaged"
  contains "$T/err" "imshard: rank 1: 16 records in a row could not be loaded; the last: record "
  lacks "$T/err" "MPI_ABORT"
  # ... and so in validation: every validation record damaged, each
  # rank's loader gives up there, and the ranks end it together
  cp -r "$T/p" "$T/pv"
  expect 0 edit damage "$T/pv/val.json" $(seq 0 $(($(json "$va" 'j["records"]') - 1)))
  expect 1 mpi -np 2 "$IMSHARD_TRAIN" --train "$tr" --val "$T/pv/val.json" --model convnet7 --size 16 --threads 1 --batch-size 8 --quiet --epochs 1
  same "$(grep -c '^imshard: rank [01]: 16 records in a row could not be loaded' "$T/err")" 2 "(each rank's failed validation named)"
  lacks "$T/err" "MPI_ABORT"
  # past --max-bad-records: the count is summed over the ranks in the
  # step's collective, so both stop at that step together, each naming
  # itself and its records, and the job ends without an abort (before:
  # MPI_ABORT's banner, and a rank's line could be lost to it)
  expect 1 mpi -np 2 "$IMSHARD_TRAIN" --train "$T/pd/train.json" --model convnet7 --size 16 --threads 1 --batch-size 8 --quiet --epochs 1 --max-bad-records 5
  same "$(grep -c '^imshard: rank [01]: [0-9]* training records of epoch 1 could not be loaded by step [0-9]*, more than --max-bad-records 5' "$T/err")" 2 "(each rank's line past --max-bad-records)"
  lacks "$T/err" "MPI_ABORT"
fi

# --- 5. --init that loads too little ----------------------------------------
if have_mpi; then
  expect 1 fit --init "$T/u/checkpoint.safetensors" --max-steps 1
  one_line "$T/err"
  contains "$T/err" "cannot initialise convnet7 from '$T/u/checkpoint.safetensors': none of its"
  expect 1 fit --init "$T/u/checkpoint.safetensors" --max-steps 1 --freeze-backbone
  one_line "$T/err"
fi
cp "$T/c_part/checkpoint.safetensors" "$T/partial.safetensors"
st_tool drop "$T/partial.safetensors" features.4.weight features.4.bias
expect 1 fit --init "$T/partial.safetensors" --max-steps 1
one_line "$T/err"
contains "$T/err" "backbone tensors ('features.4."
contains "$T/err" "--init-partial"
# without --quiet too: no "loaded N tensors" before the refusal
run "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --max-steps 1 --init "$T/partial.safetensors"
same "$rc" 1 "(refused --init, not quiet)"
lacks "$T/err" "loaded"
contains "$T/err" "backbone tensors ('features.4."
run "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --max-steps 1 --init "$T/partial.safetensors" --init-partial
same "$rc" 0 "--init-partial"
contains "$T/err" "'features.4.weight' is not in '$T/partial.safetensors': kept as initialised"
expect 1 fit --init "$T/partial.safetensors" --init-partial --freeze-backbone --max-steps 1
one_line "$T/err"
contains "$T/err" "cannot freeze the backbone"
# batch norm's num_batches_tracked counters change no computation, and
# files from before PyTorch 0.4.1 or converters lack them: such a file
# loads whole, and freezes (before: refused without --init-partial, and
# always with --freeze-backbone, "frozen they would never train")
cp "$T/c_part/checkpoint.safetensors" "$T/nonbt.safetensors"
st_tool drop "$T/nonbt.safetensors" features.1.num_batches_tracked features.5.num_batches_tracked \
  features.9.num_batches_tracked features.13.num_batches_tracked features.17.num_batches_tracked
run "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --max-steps 1 --init "$T/nonbt.safetensors" --freeze-backbone
same "$rc" 0 "--init of a file without num_batches_tracked, frozen"
contains "$T/err" "loaded 29 tensors from '$T/nonbt.safetensors'"
contains "$T/err" "'features.17.num_batches_tracked' is not in '$T/nonbt.safetensors': kept as initialised"
# a missing running statistic still counts
st_tool drop "$T/nonbt.safetensors" features.5.running_var
expect 1 fit --init "$T/nonbt.safetensors" --max-steps 1
one_line "$T/err"
# refused, it is not first said to be normalised otherwise
expect 1 fit --init "$T/nonbt.safetensors" --max-steps 1 --mean 1,2,3
one_line "$T/err"
contains "$T/err" "it holds 26 of the 27 backbone tensors ('features.5.running_var' is missing)"
run "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --max-steps 1 --init "$T/c_part/checkpoint.safetensors" --reset-head
same "$rc" 0 "--reset-head"
contains "$T/err" "head 'classifier.3.weight' (--reset-head): re-initialised"
lacks "$T/err" "normalised with"
# weights learnt on inputs normalised otherwise: said, not refused
# (before: nothing said)
run "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --max-steps 1 \
  --init "$T/c_part/checkpoint.safetensors" --mean 1,2,3
same "$rc" 0 "--init with another --mean"
contains "$T/err" "imshard-train: warning: '$T/c_part/checkpoint.safetensors' was trained on inputs normalised with --mean 123.675,116.28,103.53 --std 58.395,57.12,57.375; this run normalises with --mean 1,2,3 --std 58.395,57.12,57.375 (give its values to match)"
# with --reset-head too: the backbone is loaded all the same (before:
# nothing said)
run "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --max-steps 1 \
  --init "$T/c_part/checkpoint.safetensors" --mean 1,2,3 --reset-head
same "$rc" 0 "--init with another --mean and --reset-head"
contains "$T/err" "was trained on inputs normalised with --mean 123.675,116.28,103.53"
# as many classes under other names: the head scores other classes, and
# is not loaded (before: loaded, label 0 silently meaning another class)
cp -r "$T/s" "$T/sR"
first=$(ls "$T/s" | head -1)
mv "$T/sR/$first" "$T/sR/zz_$first"
expect 0 "$IMSHARD" convert folder "$T/sR" -o "$T/pR" --val-ratio 0.25 --seed 3 --quiet
run "$IMSHARD_TRAIN" --train "$T/pR/train.json" --val "$T/pR/val.json" --model convnet7 --size 16 --threads 1 --max-steps 1 \
  --init "$T/c_part/checkpoint.safetensors"
same "$rc" 0 "--init of other class names"
contains "$T/err" "imshard-train: warning: '$T/c_part/checkpoint.safetensors' was trained on other classes (its class 0 is '$first', this run's is "
contains "$T/err" "head 'classifier.3.bias' (trained on other classes): re-initialised"
expect 2 fit --reset-head
one_line "$T/err"
expect 2 fit --init-partial
one_line "$T/err"

# --- 6. one trainer per folder; a failed metrics write ---------------------
# hold LOCKFILE: a process that holds flock on it (pid in $holder)
hold() {
  /usr/bin/python3 -c 'import fcntl, sys, time
f = open(sys.argv[1], "a"); fcntl.flock(f, fcntl.LOCK_EX); open(sys.argv[1] + ".held", "w").close(); time.sleep(120)' "$1" &
  holder=$!
  for _ in $(seq 200); do [ -e "$1.held" ] && break; sleep 0.05; done
}
mkdir -p "$T/lk" "$T/lkc"
hold "$T/lk/imshard-train.lock"
expect 1 fit --max-steps 1 --log-dir "$T/lk"
one_line "$T/err"
contains "$T/err" "cannot train into '$T/lk': another imshard-train"
contains "$T/err" "give this run its own --log-dir"
absent "$T/lk/metrics.jsonl"
kill "$holder"; wait "$holder" 2>/dev/null
hold "$T/lkc/imshard-train.lock"
expect 1 fit --max-steps 1 --checkpoint-dir "$T/lkc"
one_line "$T/err"
contains "$T/err" "give this run its own --checkpoint-dir"
kill "$holder"; wait "$holder" 2>/dev/null
expect 0 fit --max-steps 1 --checkpoint-dir "$T/lkc" --log-dir "$T/lkc"
# a trainer against a trainer: the refused one names the running one
"$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --quiet --epochs 1000 --log-dir "$T/lk2" >/dev/null 2>&1 &
first=$!
for _ in $(seq 400); do grep -qs "$first" "$T/lk2/imshard-train.lock" && break; sleep 0.05; done
expect 1 fit --max-steps 1 --log-dir "$T/lk2"
one_line "$T/err"
contains "$T/err" "another imshard-train (pid $first) is using it"
kill "$first"; wait "$first" 2>/dev/null
# the fourth metrics write (after the start line and two train lines)
# fails as on a full disk: the run ends there
expect 1 env IMSHARD_INJECT_METRICS_ENOSPC=4 "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --quiet \
  --epochs 3 --log-every 1 --log-dir "$T/full" --checkpoint-dir "$T/full" --checkpoint-every 1
one_line "$T/err"
contains "$T/err" "cannot write '$T/full/metrics.jsonl': No space left on device: stopping"
same "$(wc -l <"$T/full/metrics.jsonl")" 3 "metrics lines before the failed write"
absent "$T/full/summary.json"
same "$(st_tool get "$T/full/checkpoint.safetensors" step)" 2 "stopped at the step of the failed write"

# --- 6b. a new run where an earlier one left its files -----------------------
# (a forgotten --resume would have replaced the earlier run's checkpoint at
# the first save, and left its summary and evaluation files beside the
# new run's metrics, as if they were the new run's)
expect 0 fit --epochs 1 --batch-size 8 --checkpoint-dir "$T/er" --log-dir "$T/er"
cp "$T/er/checkpoint.safetensors" "$T/er.ckpt"
cp "$T/er/metrics.jsonl" "$T/er.metrics"
all_files="checkpoint.safetensors, metrics.jsonl, summary.json, eval.json, per_class.csv, confusion.csv, predictions.csv"
expect 1 fit --max-steps 2 --batch-size 8 --checkpoint-dir "$T/er" --log-dir "$T/er"
one_line "$T/err"
same "$(cat "$T/err")" "imshard: cannot start a new run in '$T/er': it holds an earlier run's $all_files (--resume continues that run; --force starts a new one, removing them)"
expect 0 cmp "$T/er/checkpoint.safetensors" "$T/er.ckpt"
expect 0 cmp "$T/er/metrics.jsonl" "$T/er.metrics"
# two folders, each with its part; one folder alone
expect 0 fit --max-steps 1 --batch-size 8 --log-dir "$T/er2"
expect 1 fit --max-steps 1 --batch-size 8 --checkpoint-dir "$T/er" --log-dir "$T/er2"
contains "$T/err" "cannot start a new run in '$T/er' and '$T/er2': they hold an earlier run's $all_files ("
expect 1 fit --max-steps 1 --batch-size 8 --checkpoint-dir "$T/er" --log-dir "$T/er3"
contains "$T/err" "in '$T/er': it holds an earlier run's checkpoint.safetensors (--resume continues that run; --force starts a new one, removing it)"
absent "$T/er3/metrics.jsonl"
# an empty metrics.jsonl tells nothing: not an earlier run
mkdir -p "$T/er4" && : >"$T/er4/metrics.jsonl"
expect 0 fit --max-steps 1 --batch-size 8 --log-dir "$T/er4"
expect 2 fit --max-steps 1 --checkpoint-dir "$T/er" --resume --force
one_line "$T/err"
contains "$T/err" "--resume and --force exclude each other"
# --force: removed first and said so; a new run that fails then leaves no
# earlier summary to be taken for its own
expect 1 "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --batch-size 8 \
  --epochs 2 --lr 1e6 --checkpoint-dir "$T/er" --log-dir "$T/er" --force
contains "$T/err" "imshard-train: warning: removed an earlier run's $all_files from '$T/er' (--force)"
contains "$T/err" "is NaN"
for f in summary.json eval.json per_class.csv confusion.csv predictions.csv; do absent "$T/er/$f"; done
# a resumed run whose --log-dir holds another run's logs (before: it
# appended to that run's metrics.jsonl and replaced its summary)
expect 0 fit --epochs 1 --batch-size 8 --log-dir "$T/la" --checkpoint-dir "$T/ca"
expect 0 fit --epochs 2 --max-steps 2 --batch-size 8 --checkpoint-dir "$T/cb" --log-dir "$T/lb"
cp "$T/la/metrics.jsonl" "$T/la.metrics"
expect 1 fit --epochs 2 --batch-size 8 --checkpoint-dir "$T/cb" --log-dir "$T/la" --resume
one_line "$T/err"
contains "$T/err" "cannot resume into --log-dir '$T/la': it holds the logs of another run (its summary.json is run $(json "$T/la/summary.json" 'j["run_id"]')'s"
expect 0 cmp "$T/la/metrics.jsonl" "$T/la.metrics"
# a run killed before its summary: its metrics.jsonl's first line, the
# "start" line, names it (before: the resumed run appended to it)
same "$(head -n1 "$T/la/metrics.jsonl" | python3 -c 'import json,sys; j=json.loads(sys.stdin.read()); print(j["type"], j["run_id"], j["step"], j["world"])')" "start $(json "$T/la/summary.json" 'j["run_id"]') 0 1" "(each part's start line)"
mkdir -p "$T/lk"
cp "$T/la/metrics.jsonl" "$T/lk/"
expect 1 fit --epochs 2 --batch-size 8 --checkpoint-dir "$T/cb" --log-dir "$T/lk" --resume
one_line "$T/err"
contains "$T/err" "cannot resume into --log-dir '$T/lk': it holds the logs of another run (its metrics.jsonl is run $(json "$T/la/summary.json" 'j["run_id"]')'s"
expect 0 cmp "$T/lk/metrics.jsonl" "$T/la.metrics"
absent "$T/lk/summary.json"
# its own --log-dir: the run's id carried through its parts
expect 0 fit --epochs 2 --batch-size 8 --checkpoint-dir "$T/cb" --log-dir "$T/lb" --resume
same "$(json "$T/lb/summary.json" 'j["run_id"]')" "$(st_tool get "$T/cb/checkpoint.safetensors" run_id)" "(the run's id in both)"
same "$(python3 -c 'import json,sys; print(" ".join("%s:%s" % (j["run_id"], j["step"]) for j in map(json.loads, open(sys.argv[1])) if j["type"] == "start"))' "$T/lb/metrics.jsonl")" "$(json "$T/lb/summary.json" 'j["run_id"]'):0 $(json "$T/lb/summary.json" 'j["run_id"]'):2" "(a start line per part, the same id)"
# --force never removes an earlier run for a run refused anyway: a FIFO
# (or link) at metrics.jsonl is refused first; a file that cannot be
# moved leaves every earlier file in place (before: the checkpoint and
# summary removed, then the run refused)
expect 0 fit --max-steps 1 --batch-size 8 --checkpoint-dir "$T/ef" --log-dir "$T/ef"
rm "$T/ef/metrics.jsonl" && mkfifo "$T/ef/metrics.jsonl"
expect 1 fit --max-steps 1 --batch-size 8 --checkpoint-dir "$T/ef" --log-dir "$T/ef" --force
one_line "$T/err"
contains "$T/err" "metrics.jsonl': not a regular file (a FIFO)"
exists "$T/ef/checkpoint.safetensors"
exists "$T/ef/summary.json"
expect 0 fit --max-steps 1 --batch-size 8 --checkpoint-dir "$T/eg" --log-dir "$T/eg"
if chattr +i "$T/eg/summary.json" 2>/dev/null; then
  expect 1 fit --max-steps 1 --batch-size 8 --checkpoint-dir "$T/eg" --log-dir "$T/eg" --force
  chattr -i "$T/eg/summary.json"
  contains "$T/err" "cannot remove '$T/eg/summary.json' (--force): Operation not permitted; the earlier run's files are left as they were"
  for f in checkpoint.safetensors metrics.jsonl summary.json; do exists "$T/eg/$f"; done
  same "$(ls "$T/eg" | grep -c removed)" 0 "nothing left moved aside"
else
  echo "note: chattr +i not permitted here: --force's all-or-nothing not checked"
fi

# --- 6c. ranks started with different options or splits --------------------
# (before: another --model corrupted memory in the weights' broadcast,
# another --epochs or split hung until --collective-timeout, another --lr
# trained apart without a word); what may differ per rank does, and a copy
# of the split at another path is the same split
if have_mpi; then
  cp -r "$T/p" "$T/pcopy"
  two() { mpi -np 1 "$IMSHARD_TRAIN" "${rk[@]}" $1 : -np 1 "$IMSHARD_TRAIN" "${rk[@]}" $2; }
  rk=(--val "$va" --model convnet7 --size 16 --batch-size 4 --max-steps 2 --quiet --collective-timeout 30)
  for d in "--model resnet18|--model" "--epochs 2|--epochs" "--lr 0.2|--lr" "--precision bf16|--precision" \
    "--train $T/p2/train.json|--train (the split's records)" "--val $T/p2/val.json|--val (the split's records, or none)"; do
    other=${d%|*}
    flag=${d#*|}
    # shellcheck disable=SC2086
    case "$other" in --train*) expect 1 two "--train $tr" "$other" ;; *) expect 1 two "--train $tr" "--train $tr $other" ;; esac
    contains "$T/err" "cannot train: ranks 0 and 1 were started with different $flag: every rank must be started with the same options and splits"
    # every rank refuses alike: rank 0's line alone, no abort (before:
    # a line per rank, interleaved, then MPI_ABORT's banner)
    same "$(grep -c 'cannot train: ranks 0 and 1' "$T/err")" 1 "the refusal told once ($flag)"
    lacks "$T/err" "MPI_ABORT"
  done
  # what each rank sets up alone and fails alike is told once too: a
  # split no rank has, a batch larger than each rank's share, more ranks
  # than shards under --shard-owning (before: once per rank, interleaved),
  # a model that cannot be made (a missing --init; before: a line per
  # rank and MPI_ABORT's banner), a batch of one where batch norm would
  # see one value per channel (before: the first step failed on each
  # rank, MPI_ABORT), nothing to resume
  head -n 1 "$T/p/train.lst" >"$T/one.lst"
  expect 0 "$IMSHARD" pack "$T/one.lst" "$T/s" -o "$T/p1r/train" --classes "$T/p/classes.txt" --quiet
  for d in "--train $T/none.json|cannot open manifest '$T/none.json'" \
    "--train $T/p1r/train.json|imshard: '$T/p1r/train.json' holds 1 record, fewer than the 2 ranks" \
    "--train $tr --batch-size 64|imshard: '$tr' gives each of the 2 ranks 60 records, not enough for one batch of 64 (a batch is per rank)" \
    "--train $tr --cudnn-algo heuristic|imshard: cannot use --cudnn-algo heuristic with --device cpu" \
    "--train $tr --init $T/none.safetensors|imshard: cannot open safetensors '$T/none.safetensors'" \
    "--train $tr --batch-size 1|imshard: cannot train convnet7 at 16x16 with batches of 1: its batch norm 'features.17' would see 1 value per channel" \
    "--train $tr --checkpoint-dir $T/nowhere --resume|imshard: cannot resume from '$T/nowhere': no such folder" \
    "--train $tr --shard-owning|shard-owning mode: 1 shard cannot give each of 2 ranks records (pack the split into at least 2 shards"; do
    # shellcheck disable=SC2086
    expect 1 mpi -np 2 "$IMSHARD_TRAIN" "${rk[@]}" ${d%|*}
    same "$(grep -c "^imshard: " "$T/err")" 1 "one line for ${d%|*}"
    contains "$T/err" "${d#*|}"
    lacks "$T/err" "rank 1"
    lacks "$T/err" "MPI_ABORT"
  done
  # a rank that cannot load its batch mid-run (its share's one record
  # damaged) still joins the step's collectives: it is named with its
  # reason, once, and the other rank ends with it, no abort
  head -n 2 "$T/p/train.lst" >"$T/two.lst"
  expect 0 "$IMSHARD" pack "$T/two.lst" "$T/s" -o "$T/p2d/train" --classes "$T/p/classes.txt" --quiet
  expect 0 /usr/bin/python3 "$IMS_SRC/tests/cli/split_edit.py" damage "$T/p2d/train.json" 0
  expect 1 mpi -np 2 "$IMSHARD_TRAIN" --train "$T/p2d/train.json" --model convnet7 --size 32 --batch-size 1 \
    --epochs 1 --quiet --collective-timeout 30
  same "$(grep -c "^imshard: " "$T/err")" 1 "one line for a rank without its batch"
  contains "$T/err" "'s share could not be loaded: record 0 in shard '$T/p2d/train-00000-of-00001.mdb'"
  lacks "$T/err" "MPI_ABORT"
  # a rank that fails alone is named, the other ranks end with it
  expect 1 two "--train $tr" "--train $T/none.json"
  same "$(grep -c "^imshard: " "$T/err")" 1 "one line for rank 1's own failure"
  contains "$T/err" "imshard: rank 1: cannot open manifest '$T/none.json'"
  lacks "$T/err" "MPI_ABORT"
  expect 0 two "--train $tr --threads 1" "--train $T/pcopy/train.json --val $T/pcopy/val.json --threads 2"
  # a default given on one rank and left out on the other is the same
  # setting (before: refused as different --cudnn-algo)
  expect 0 two "--train $tr --cudnn-algo deterministic --tf32 off --channels-last auto --cuda-graphs auto" "--train $tr"
  # the same records under other class names (before: trained, rank 1's
  # labels meaning other classes)
  sed 's/^/x_/' "$T/p/classes.txt" >"$T/names.txt"
  for split in train val; do
    expect 0 "$IMSHARD" pack "$T/p/$split.lst" "$T/s" -o "$T/pn/$split" --classes "$T/names.txt" --quiet
  done
  expect 1 two "--train $tr" "--train $T/pn/train.json --val $T/pn/val.json"
  contains "$T/err" "ranks 0 and 1 were started with different --train (its class names)"
  # each rank resuming its own --checkpoint-dir (node-local folders):
  # other checkpoints are refused (before: another position hung until
  # the timeout, the same position with other weights trained apart)
  res=(--val "$va" --model convnet7 --size 16 --batch-size 4 --epochs 3 --quiet --collective-timeout 30 --train "$tr")
  expect 0 mpi -np 2 "$IMSHARD_TRAIN" "${res[@]}" --max-steps 2 --checkpoint-dir "$T/rkA"
  cp -r "$T/rkA" "$T/rkB"
  expect 0 mpi -np 2 "$IMSHARD_TRAIN" "${res[@]}" --max-steps 3 --checkpoint-dir "$T/rkB" --resume
  expect 1 mpi -np 1 "$IMSHARD_TRAIN" "${res[@]}" --checkpoint-dir "$T/rkA" --resume : \
    -np 1 "$IMSHARD_TRAIN" "${res[@]}" --checkpoint-dir "$T/rkB" --resume
  contains "$T/err" "cannot resume: ranks 0 and 1 read different checkpoints (rank 0's is at step 2 of epoch 1, rank 1's at step 3 of epoch 1): every rank must resume from the same file"
  # at the same step, other weights (another run's): said so (before:
  # "rank 0's is at step 2 of epoch 1, rank 1's at step 2 of epoch 1")
  expect 0 mpi -np 2 "$IMSHARD_TRAIN" "${res[@]}" --max-steps 2 --lr 0.05 --checkpoint-dir "$T/rkL"
  expect 1 mpi -np 1 "$IMSHARD_TRAIN" "${res[@]}" --checkpoint-dir "$T/rkA" --resume : \
    -np 1 "$IMSHARD_TRAIN" "${res[@]}" --checkpoint-dir "$T/rkL" --resume
  same "$(grep -c '^imshard: ' "$T/err")" 1 "one line for checkpoints at one step"
  contains "$T/err" "cannot resume: ranks 0 and 1 read different checkpoints (both at step 2 of epoch 1, with other contents: other weights or another position in the epoch): every rank must resume from the same file"
  # a setting every rank's checkpoint refuses alike is told once, with no
  # abort (before: a line per rank, then MPI_ABORT's banner)
  expect 1 mpi -np 2 "$IMSHARD_TRAIN" "${res[@]}" --checkpoint-dir "$T/rkA" --resume --seed 5
  same "$(grep -c '^imshard: ' "$T/err")" 1 "one line for a resume both ranks refuse"
  contains "$T/err" "imshard: cannot resume from '$T/rkA/checkpoint.safetensors' with --seed 5"
  lacks "$T/err" "MPI_ABORT"
  cp -r "$T/rkA" "$T/rkC"
  expect 0 mpi -np 1 "$IMSHARD_TRAIN" "${res[@]}" --checkpoint-dir "$T/rkA" --resume --max-steps 4 : \
    -np 1 "$IMSHARD_TRAIN" "${res[@]}" --checkpoint-dir "$T/rkC" --resume --max-steps 4
  # rank 1's folder is not rank 0's: only rank 0 writes the checkpoint, so
  # rank 0 says the next resume needs its file copied (before: nothing,
  # until that resume refused, each rank having read another checkpoint)
  contains "$T/err" "imshard-train: warning: --checkpoint-dir is another folder than rank 0's ('$T/rkA') on 1 rank (storage local to a node; rank 1 first): only rank 0 writes the checkpoint, so a --resume needs rank 0's checkpoint.safetensors copied there first"
  # each rank's own --log-dir (node-local folders): a rank whose folder is
  # not rank 0's locks it, starts its metrics.jsonl anew, refuses an
  # earlier run's, and rank 0 says the logs are split (before: rank 1
  # appended its lines to whatever run its folder held, without a word;
  # then the warning named rank 0's own folder as "another folder")
  lg=(--val "$va" --model convnet7 --size 16 --batch-size 4 --max-steps 2 --log-every 1 --quiet --collective-timeout 30 --train "$tr")
  logs() { mpi -np 1 "$IMSHARD_TRAIN" "${lg[@]}" --log-dir "$1" ${3:-} : -np 1 "$IMSHARD_TRAIN" "${lg[@]}" --log-dir "$2" ${3:-}; }
  starts() { grep -c '"type":"start"' "$1/metrics.jsonl"; }
  run_of() { head -n 1 "$1/metrics.jsonl" | sed 's/.*"run_id":"\([^"]*\)".*/\1/'; }
  expect 0 logs "$T/lgA" "$T/lgB"
  contains "$T/err" "imshard-train: warning: --log-dir is another folder than rank 0's ('$T/lgA') on 1 rank (storage local to a node; rank 1 first): its metrics.jsonl lines go there; summary.json and the evaluation files are in rank 0's alone"
  same "$(starts "$T/lgB")" 1 "rank 1's own folder starts with the run's line"
  same "$(run_of "$T/lgB")" "$(run_of "$T/lgA")" "rank 1's folder names rank 0's run"
  [ -n "$(run_of "$T/lgA")" ] || fail "no run_id without --checkpoint-dir"
  # with a --checkpoint-dir too (before: each rank made an id of its own,
  # and without one the start lines named none)
  expect 0 logs "$T/lgD" "$T/lgE" "--checkpoint-dir $T/ckD"
  same "$(run_of "$T/lgE")" "$(run_of "$T/lgD")" "rank 1's folder names rank 0's run (--checkpoint-dir)"
  same "$(run_of "$T/lgD")" "$(json "$T/lgD/summary.json" 'j["run_id"]')" "the start line's run is summary.json's"
  # node-local storage, one folder per rank for both: rank 1 locks its
  # own --log-dir with the job's mark, and its --checkpoint-dir is still
  # not rank 0's (before: the mark just written there passed it for rank
  # 0's folder, and the checkpoint warning was not given)
  expect 0 mpi -np 1 "$IMSHARD_TRAIN" "${lg[@]}" --log-dir "$T/nlA" --checkpoint-dir "$T/nlA" : \
    -np 1 "$IMSHARD_TRAIN" "${lg[@]}" --log-dir "$T/nlB" --checkpoint-dir "$T/nlB"
  contains "$T/err" "imshard-train: warning: --log-dir is another folder than rank 0's ('$T/nlA') on 1 rank"
  contains "$T/err" "imshard-train: warning: --checkpoint-dir is another folder than rank 0's ('$T/nlA') on 1 rank (storage local to a node; rank 1 first)"
  # one shared folder for both: no warning
  expect 0 mpi -np 2 "$IMSHARD_TRAIN" "${lg[@]}" --log-dir "$T/nlC" --checkpoint-dir "$T/nlC"
  lacks "$T/err" "another folder"
  exists "$T/lgB/imshard-train.lock"
  expect 1 logs "$T/lgA2" "$T/lgB"
  same "$(grep -c '^imshard: ' "$T/err")" 1 "one line for rank 1's earlier run"
  contains "$T/err" "imshard: rank 1: cannot start a new run in '$T/lgB': it holds an earlier run's metrics.jsonl (--resume continues that run; --force starts a new one, removing it)"
  lacks "$T/err" "MPI_ABORT"
  lines_before=$(wc -l <"$T/lgB/metrics.jsonl")
  expect 0 logs "$T/lgA3" "$T/lgB" --force
  contains "$T/err" "removed an earlier run's metrics.jsonl"
  same "$(starts "$T/lgB")" 1 "rank 1's earlier run removed (--force)"
  same "$(run_of "$T/lgB")" "$(run_of "$T/lgA3")" "rank 1's folder holds this run alone"
  same "$(wc -l <"$T/lgB/metrics.jsonl")" "$lines_before" "the same lines as the first run"
  # the same folder under another path is rank 0's: nothing split
  expect 0 logs "$T/lgC" "$T/./lgC"
  lacks "$T/err" "another folder"
  same "$(starts "$T/lgC")" 1 "one start line in a shared folder"
fi

# --- 7. a memory limit too small for OpenBLAS's buffers --------------------
# (AddressSanitizer reserves terabytes of address space: no ulimit -v there)
if ! asan_build; then
  # capped KB SECONDS ARGS...: a one-step run under ulimit -v KB, killed
  # after SECONDS
  capped() {
    bash -c 'ulimit -v "$1"; exec timeout "$2" "${@:3}"' _ "$1" "$2" "$IMSHARD_TRAIN" \
      --train "$tr" --val "$va" --model convnet7 --size 32 --quiet --max-steps 1 "${@:3}"
  }
  # four buffers of 128 MiB do not fit in 586 MiB, whatever else a build maps
  expect 1 capped 600000 60 --threads 4
  one_line "$T/err"
  contains "$T/err" "imshard: the address-space (ulimit -v) limit of 586 MiB is too small"
  contains "$T/err" "use fewer --threads"
  # limits around what the buffers need: each run trains or ends with a
  # word, none spins (before: a step whose GEMMs overlapped asked OpenBLAS
  # for a buffer the set-up had not made, and OpenBLAS retried for ever;
  # the set-up's own buffers did not fit when the compute threads, started
  # after the check, took the room with their stacks and malloc heaps;
  # and below what OpenBLAS's own threads take as it loads, 128 MiB each,
  # one of them retried for ever and the exit waited for it, after the
  # refusal). Near the limit a run may also end as others make it: what
  # is allocated after the check fails with imshard's own line, or
  # libgomp's for a thread it cannot start; and before main, a library
  # that cannot be mapped (exit 127), or OpenBLAS unable to start its
  # threads (SIGINT, which it raises then) in a build that maps more.
  under_limits "150000 175000 350000 400000 450000 500000 550000 600000 650000 700000" \
    "1 2 3 4" "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 32 \
    --quiet --max-steps 1
fi
finish
