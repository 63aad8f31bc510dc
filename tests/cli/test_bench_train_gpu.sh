#!/usr/bin/env bash
# bench/train-gpu/run.sh without a GPU: a fake nvidia-smi, a fake
# imshard-train (its metrics.jsonl and summary.json) and a fake torch
# (its one line), each rate set round by round, so what run.sh and
# summarize.py make of them is known exactly: every model of MODELS runs
# (the default two), ONLY picks contenders, the ratio against PyTorch is
# the median of the rounds' own ratios (not a ratio of medians), and the
# whole-run rate and the environment are kept beside it. Settings that
# are not numbers (here, in bench/scaling/run.sh and in the CPU
# benchmarks' run.sh) stop with one line.
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1
run_sh="$IMS_SRC/bench/train-gpu/run.sh"
fake="$T/bin"
mkdir -p "$fake" "$T/count"

printf '#!/bin/sh\ncase "$1" in -L) echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)" ;; *) echo "NVIDIA H100 80GB HBM3, 81559 MiB, 580.65.06" ;; esac\n' >"$fake/nvidia-smi"

# imshard-train: round N of a contender (counted per model, precision and
# input) trains at the Nth rate of RATES_<model>; every flag a contender
# is run with must be there
cat >"$fake/imshard-train" <<'EOF'
#!/usr/bin/env bash
set -eu
log="" model="" size="" prec="" input=loader
while [ $# -gt 0 ]; do
  case "$1" in
  --log-dir) log=$2; shift ;;
  --model) model=$2; shift ;;
  --size) size=$2; shift ;;
  --precision) prec=$2; shift ;;
  --synthetic) input=syn ;;
  esac
  shift
done
[ -n "$size" ] || { echo "imshard-train: --size needs a value" >&2; exit 2; }
if [ -z "$log" ]; then # the probe
  [ -z "${FAKE_PROBE_FAIL:-}" ] && exit 0
  echo "imshard-train: a note before the error" >&2
  echo "imshard: $FAKE_PROBE_FAIL" >&2
  exit 1
fi
key="$model-$prec-$input"
n=$(($(cat "$COUNT/$key" 2>/dev/null || echo 0) + 1))
echo "$n" >"$COUNT/$key"
var="RATES_$model"
rate=$(echo "${!var}" | cut -d' ' -f"$n")
[ "$rate" != fail ] || { echo "imshard-train: cannot use --device cuda (a failed round)" >&2; exit 1; }
mkdir -p "$log"
{
  echo '{"type":"train","step":1,"images_per_s":1,"data_wait_ms":9}'
  echo "{\"type\":\"train\",\"step\":2,\"images_per_s\":$rate,\"data_wait_ms\":0.5}"
  echo "{\"type\":\"train\",\"step\":3,\"images_per_s\":$rate,\"data_wait_ms\":0.5}"
  echo '{"type":"gpu","mem_used_mib":300}'
} >"$log/metrics.jsonl"
echo "{\"images_per_s\": $((rate / 2)), \"device_stack\": \"GPU; cuDNN 9.19.0 ($n)\"}" >"$log/summary.json"
echo "validation top-1 10.00% ($key round $n at $rate images/s)"
EOF
# torch: "python -c" is the import probe; torch_gpu.py's line otherwise
cat >"$fake/python-torch" <<'EOF'
#!/usr/bin/env bash
[ "$1" = -c ] && exit 0
model=""
while [ $# -gt 0 ]; do [ "$1" = --model ] && model=$2; shift; done
n=$(($(cat "$COUNT/torch-$model" 2>/dev/null || echo 0) + 1))
echo "$n" >"$COUNT/torch-$model"
var="TORCH_$model"
echo "model=$model images_per_s=$(echo "${!var}" | cut -d' ' -f"$n") max_mem_mib=100 used_mib=200 torch=fake"
EOF
chmod +x "$fake"/*

bench() {
  rm -rf "$T/count"/* "$T/work"
  env PATH="$fake:$PATH" COUNT="$T/count" IMSHARD_TRAIN="$fake/imshard-train" TORCH_PYTHON="$fake/python-torch" \
    DATA="$T/data" WORK="$T/work" PER_CLASS=20 STEPS=2 BATCH=2 PROFILE=0 PRECISIONS=bf16 \
    LD_LIBRARY_PATH=/opt/one:/opt/two "$@" bash "$run_sh"
}
res="$T/work/results.json"

# imshard 100 400 120 against torch 50 100 200: the rounds' ratios are
# 2, 4 and 0.6, their median 2 (the medians' ratio, 120/100, would be 1.2)
expect 0 bench RATES_resnet50="100 400 120" RATES_resnet18="30 30 30" TORCH_resnet50="50 100 200" TORCH_resnet18="10 20 30" ROUNDS=3
same "$(json "$res" 'sorted(j["contenders"])')" "['resnet18_bf16_loader', 'resnet18_bf16_syn', 'resnet50_bf16_loader', 'resnet50_bf16_syn', 'torch_resnet18_bf16', 'torch_resnet50_bf16']" "(both default models ran)"
same "$(json "$res" 'j["ratio_rounds"]["resnet50_bf16_syn / torch_resnet50_bf16"]')" "[2.0, 4.0, 0.6]" "(rounds' ratios)"
same "$(json "$res" 'j["ratios"]["resnet50_bf16_syn / torch_resnet50_bf16"]')" "2.0" "(median of the rounds' ratios)"
same "$(json "$res" 'j["ratios"]["resnet18_bf16_loader / torch_resnet18_bf16"]')" "1.5" "(resnet18: 3, 1.5, 1)"
same "$(json "$res" 'j["contenders"]["resnet50_bf16_syn"]["images_per_s"]')" "120.0" "(interval rate: the median round)"
same "$(json "$res" 'j["contenders"]["resnet50_bf16_syn"]["run_images_per_s"]')" "60" "(whole-run rate)"
same "$(json "$res" 'j["memory_ratios"]["resnet50_bf16_syn / torch_resnet50_bf16"]')" "1.5" "(GPU memory, like for like)"
same "$(json "$res" 'j["meta"]["ld_library_path"]')" "/opt/one:/opt/two" "(the libraries' search path)"
same "$(json "$res" '"cores" in j["meta"]["cpu"]')" "True" "(the host)"
contains "$T/out" "resnet50_bf16_syn / torch_resnet50_bf16          2.000 (median of rounds: 2.000 4.000 0.600)"
# each round's imshard runs said what they ran on: three lines here
same "$(json "$res" 'j["device_stacks"]')" "['GPU; cuDNN 9.19.0 (1)', 'GPU; cuDNN 9.19.0 (2)', 'GPU; cuDNN 9.19.0 (3)']" "(the stacks the runs named)"
contains "$T/out" "note: the imshard runs ran on 3 different GPU stacks:"

# one run before round 1, not recorded (the first model and precision,
# synthetic input, STEPS steps): round 1's first contender no longer
# runs on a cold machine (before: no such run)
same "$(grep -c '^warm-up: ' "$T/work/logs/commands.txt")" 1 "(one warm-up run)"
contains "$T/work/logs/commands.txt" "--model resnet50 --size 224 --batch-size 2 --lr 0.01 --epochs 1 --precision bf16"
same "$(grep '^warm-up: ' "$T/work/logs/commands.txt" | grep -c -- '--max-steps 2 --synthetic --quiet')" 1 "(STEPS steps, synthetic)"
contains "$T/err" "run.sh: warm-up, not recorded: resnet50 bf16, 2 steps"
expect 0 bench RATES_resnet50="100" TORCH_resnet50="50" MODELS="resnet50:224" ROUNDS=1 WARMUP=0
lacks "$T/work/logs/commands.txt" "warm-up"

# ONLY: the contenders named, no others
expect 0 bench RATES_resnet50="100" TORCH_resnet50="50" MODELS="resnet50:224 resnet18:224" ROUNDS=1 ONLY="resnet50_bf16_syn torch_resnet50_bf16"
same "$(json "$res" 'sorted(j["contenders"])')" "['resnet50_bf16_syn', 'torch_resnet50_bf16']" "(ONLY)"
same "$(json "$res" 'j["device_stacks"]')" "['GPU; cuDNN 9.19.0 (1)']" "(one stack)"
lacks "$T/out" "note: "

# a name ONLY holds that is no contender (a typo) is said, not dropped
# without a word
expect 0 bench RATES_resnet50="100" TORCH_resnet50="50" MODELS="resnet50:224" ROUNDS=1 ONLY="resnet50_bf16_syn torch_resnet50_bf61"
contains "$T/err" "run.sh: ONLY names torch_resnet50_bf61, which is none of the contenders here: left out"
same "$(json "$res" 'sorted(j["contenders"])')" "['resnet50_bf16_syn']" "(ONLY with a typo)"

# a failed round has no ratio; the others' median stands
expect 0 bench RATES_resnet50="100 fail 300" TORCH_resnet50="50 50 100" MODELS="resnet50:224" ROUNDS=3 ONLY="resnet50_bf16_syn torch_resnet50_bf16"
same "$(json "$res" 'j["ratio_rounds"]["resnet50_bf16_syn / torch_resnet50_bf16"]')" "[2.0, None, 3.0]" "(a round without a rate)"
same "$(json "$res" 'j["ratios"]["resnet50_bf16_syn / torch_resnet50_bf16"]')" "2.5" "(median of the rounds that ran)"
# a contender none of whose runs ran (a batch too large for the GPU, say)
# fails the benchmark: its results say so, and so does the exit status
expect 1 bench RATES_resnet50="fail fail" TORCH_resnet50="50 50" MODELS="resnet50:224" ROUNDS=2 ONLY="resnet50_bf16_syn torch_resnet50_bf16"
same "$(tail -n1 "$T/err")" "summarize.py: every run of resnet50_bf16_syn failed (2 of 2): no figures for it in $res" "(a contender without a run)"
same "$(json "$res" 'j["contenders"]["resnet50_bf16_syn"]["failed"]')" 2 "(its failures recorded)"

# settings that are not numbers, or numbers out of range: one line, exit
# 1, before anything is made (ROUNDS=abc was "abc: unbound variable";
# ROUNDS=0 or 1.5 ran nothing and exited 0 with an empty table; BATCH=0
# or -4 passed on to every run)
for bad in BATCH=0 BATCH=-4 ROUNDS=abc ROUNDS=0 ROUNDS=1.5 STEPS=abc LOG_EVERY=0 THREADS=0 TORCH_SECONDS=x PER_CLASS=0; do
  rm -rf "$T/work"
  expect 1 bench "$bad"
  same "$(cat "$T/err")" "run.sh: ${bad%%=*} must be a whole number of 1 or more, got '${bad#*=}'" "($bad)"
  absent "$T/work"
done
for bad in "resnet50" "resnet50:" "resnet50:224 resnet18:x" ":224"; do
  rm -rf "$T/work"
  expect 1 bench MODELS="$bad"
  same "$(cat "$T/err")" "run.sh: MODELS holds model:size words (resnet50:224), got '${bad##* }'" "(MODELS=$bad)"
  absent "$T/work"
done
expect 1 bench WARMUP=x
same "$(cat "$T/err")" "run.sh: WARMUP must be a whole number of 0 or more, got 'x'" "(WARMUP=x)"
for bad in PROFILE=2 KERNELS=yes; do
  expect 1 bench "$bad"
  same "$(cat "$T/err")" "run.sh: ${bad%%=*} must be 0 or 1, got '${bad#*=}'" "($bad)"
done
# bench/scaling/run.sh's settings, through the same checks
scaling() { env IMSHARD="$IMSHARD" IMSHARD_TRAIN="$fake/imshard-train" DATA="$T/sdata" WORK="$T/swork" "$@" bash "$IMS_SRC/bench/scaling/run.sh"; }
for bad in "ROUNDS=abc|abc" "EPOCHS=0|0" "BATCHES=16 x|x" "WORLDS=0 2|0" "LOG_EVERY=-1|-1"; do
  expect 1 scaling "${bad%|*}"
  same "$(cat "$T/err")" "run.sh: ${bad%%=*} must be a whole number of 1 or more, got '${bad#*|}'" "(scaling: ${bad%|*})"
  absent "$T/swork"
  absent "$T/sdata"
done
expect 1 scaling MPI_PIN=yes
same "$(cat "$T/err")" "run.sh: MPI_PIN must be 0 or 1, got 'yes'" "(scaling: MPI_PIN)"
expect 1 scaling LR32=abc
same "$(cat "$T/err")" "run.sh: LR32 must be a number above 0, got 'abc'" "(scaling: LR32)"
# the CPU benchmarks' settings too (before: ROUNDS=abc stopped deep in
# the script on an unbound variable, ROUNDS=0 ran nothing, SEED=-1 made a
# corpus named for it), each before anything is made or installed
for bad in "train|ROUNDS=abc|a whole number of 1 or more" "train|BATCH=0|a whole number of 1 or more" \
  "train|SGEMM_SECONDS=x|a number above 0" "train|BUCKET_MB=-1|a number above 0" "train|MPI=2|0 or 1" \
  "load|ROUNDS=0|a whole number of 1 or more" "load|SEED=-1|a whole number of 0 or more" \
  "pack|N_IMAGES=1.5|a whole number of 1 or more" "pack|DRY_RUN=yes|0 or 1" \
  "convert|N_VAL=x|a whole number of 1 or more"; do
  IFS='|' read -r script setting what <<<"$bad"
  expect 1 env WORK="$T/cwork" CORPUS="$T/corpus" DATA="$T/cdata" "$setting" bash "$IMS_SRC/bench/$script/run.sh"
  same "$(cat "$T/err")" "run.sh: ${setting%%=*} must be $what, got '${setting#*=}'" "(bench/$script: $setting)"
  absent "$T/cwork"
  absent "$T/corpus"
done

# WORK naming a folder of other things: run.sh empties WORK/logs and
# scaling's removes WORK/r1, r2 ... by name, so it is refused, its files
# kept; an earlier run's WORK is used again
mkdir -p "$T/mine/logs" "$T/mine/r1"
echo keep | tee "$T/mine/logs/notes.txt" >"$T/mine/r1/notes.txt"
expect 1 bench WORK="$T/mine"
same "$(cat "$T/err")" "run.sh: WORK='$T/mine' holds files of its own (no runs.tsv of an earlier run): name a new or empty folder" "(WORK of other things)"
expect 1 scaling WORK="$T/mine"
same "$(cat "$T/err")" "run.sh: WORK='$T/mine' holds files of its own (no commands.txt of an earlier run): name a new or empty folder" "(scaling: WORK of other things)"
same "$(cat "$T/mine/logs/notes.txt" "$T/mine/r1/notes.txt" | tr '\n' ' ')" "keep keep " "(its files kept)"
# the CPU benchmarks the same (before: bench/convert removed the whole of
# WORK, bench/load emptied its logs/ and packed/, bench/pack its logs/ and
# out/), each before anything is made
mkdir -p "$T/mine/packed" "$T/mine/out" "$T/mine/root"
echo keep | tee "$T/mine/packed/notes.txt" "$T/mine/out/notes.txt" >"$T/mine/root/notes.txt"
for b in load pack convert; do
  expect 1 env WORK="$T/mine" CORPUS="$T/corpus" ROUNDS=1 bash "$IMS_SRC/bench/$b/run.sh"
  same "$(cat "$T/err")" "run.sh: WORK='$T/mine' holds files of its own (no .bench-$b of an earlier run): name a new or empty folder" "(bench/$b: WORK of other things)"
  absent "$T/corpus"
done
same "$(cat "$T/mine/logs/notes.txt" "$T/mine/r1/notes.txt" "$T/mine"/{packed,out,root}/notes.txt | tr '\n' ' ')" \
  "keep keep keep keep keep " "(their files kept)"
touch "$T/wfile"
expect 1 bench WORK="$T/wfile"
same "$(cat "$T/err")" "run.sh: WORK='$T/wfile' is not a folder" "(WORK a file)"
expect 0 bench RATES_resnet50="100" TORCH_resnet50="50" MODELS="resnet50:224" ROUNDS=1 ONLY="resnet50_bf16_syn torch_resnet50_bf16"
rm -rf "$T/count"/*
expect 0 env PATH="$fake:$PATH" COUNT="$T/count" IMSHARD_TRAIN="$fake/imshard-train" TORCH_PYTHON="$fake/python-torch" \
  DATA="$T/data" WORK="$T/work" PER_CLASS=20 STEPS=2 BATCH=2 PROFILE=0 PRECISIONS=bf16 RATES_resnet50="100" \
  TORCH_resnet50="50" MODELS="resnet50:224" ROUNDS=1 ONLY="resnet50_bf16_syn torch_resnet50_bf16" bash "$run_sh"

# DATA with the sample's mark but not the whole sample (a run stopped
# while it was made, a copy cut short): one line that says what to do
mkdir -p "$T/part/packed"
touch "$T/part/.data-pc20"
echo '{}' | tee "$T/part/packed/train.json" >"$T/part/packed/val.json"
expect 1 bench DATA="$T/part"
same "$(cat "$T/err")" "run.sh: '$T/part' holds an incomplete sample (no train.lst, no val.lst, no shards): remove it, and the next run makes it again" "(an incomplete sample)"

# the probe fails (here as damaged shards would make it): its error line,
# not the note before it, and not said to be the GPU's
expect 1 bench ROUNDS=1 FAKE_PROBE_FAIL="cannot read shard 'x.mdb': corrupt"
same "$(cat "$T/err")" "run.sh: a one-step probe (convnet7, --device cuda, DATA's splits) failed: imshard: cannot read shard 'x.mdb': corrupt" "(the probe's error line)"

# no GPU: one line, exit 1
printf '#!/bin/sh\necho "No devices were found"\nexit 6\n' >"$fake/nvidia-smi"
expect 1 bench ROUNDS=1
contains "$T/err" "no GPU: nvidia-smi lists none"
# a hung driver: nvidia-smi never answers (before: run.sh waited with it)
printf '#!/bin/sh\nexec sleep 30\n' >"$fake/nvidia-smi"
NVIDIA_SMI_TIMEOUT=2 expect 1 bench ROUNDS=1
same "$(cat "$T/err")" "run.sh: nvidia-smi did not answer within 2 s (a hung driver?)" "(nvidia-smi hung)"

finish
