#!/usr/bin/env bash
# imshard-train: usage and data errors exit 2 / 1 with one line; a short
# run writes metrics.jsonl and summary.json with every key; validation
# counts each record once at 1 and 3 ranks (uneven shares); --device cuda
# fails with one line without a GPU (and trains with one), and with 2
# ranks; resuming from
# a checkpoint inside an epoch gives the bytes of an uninterrupted run;
# mpirun -np 2 at batch B equals one rank at batch 2B (frozen batch norm)
# within 1e-5, and plainly differs with per-rank batch statistics.
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1
: "${IMSHARD_TRAIN:?IMSHARD_TRAIN must point at imshard-train}"
cmp_st() { /usr/bin/python3 "$IMS_SRC/tests/cli/st_compare.py" "$@"; }
# the same tensors, bit for bit, and metadata but the run's wall times
st_same() { /usr/bin/python3 "$IMS_SRC/tests/cli/st_tool.py" same "$@" >/dev/null; }
st_tool() { /usr/bin/python3 "$IMS_SRC/tests/cli/st_tool.py" "$@"; }
# OpenMPI's own components leak at MPI_Finalize (LeakSanitizer names
# ompi_op_base_op_select and unloaded plugins): leak checking stays on for
# every other run here, off for the processes mpirun starts.
mpi() { ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" mpirun "$@"; }

expect 0 "$IMSHARD" sample "$T/s" --classes 4 --per-class 15 --quiet
expect 0 "$IMSHARD" convert folder "$T/s" -o "$T/p" --val-ratio 0.25 --seed 3 --quiet
tr="$T/p/train.json"
va="$T/p/val.json"
expect 0 "$IMSHARD" info "$va" --json
val_records=$(json "$T/out" 'j["records"]')
train_records=$(json "$tr" 'j["records"]')
fit() { "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --batch-size 8 --quiet "$@"; }

# --- usage errors: exit 2, one line --------------------------------------
expect 2 "$IMSHARD_TRAIN"
one_line "$T/err"
contains "$T/err" "--train is required"
expect 2 fit --model resnet19
one_line "$T/err"
contains "$T/err" "unknown model 'resnet19'"
expect 2 fit --no-such-flag
one_line "$T/err"
expect 2 fit --epochs 0
one_line "$T/err"
expect 2 fit --optimizer rmsprop
contains "$T/err" "--optimizer must be sgd, adam or adamw"
expect 2 fit --freeze-backbone
contains "$T/err" "--freeze-backbone needs --init"
expect 2 fit --resume
contains "$T/err" "--resume needs --checkpoint-dir"
expect 2 fit --std 1,0,1
# a std whose inverse is no float made every sample infinite (before:
# taken, as it is above 0)
expect 2 fit --std 1e-45,1,1
contains "$T/err" "1/std a finite float"
one_line "$T/err"
expect 0 "$IMSHARD_TRAIN" --help
contains "$T/out" "--checkpoint-every"
contains "$T/out" "--freeze-bn"

# --- data and run-time errors: exit 1, one line --------------------------
expect 1 "$IMSHARD_TRAIN" --train "$T/none.json" --val "$va" --quiet
one_line "$T/err"
contains "$T/err" "none.json"
expect 0 "$IMSHARD" sample "$T/s3" --classes 3 --per-class 4 --quiet
expect 0 "$IMSHARD" convert folder "$T/s3" -o "$T/p3" --val-ratio 0.5 --quiet
expect 1 fit --val "$T/p3/val.json"
one_line "$T/err"
contains "$T/err" "has 4 classes but"
# --shard-owning on records packed in list order (sorted by class): one
# warning; none on the shuffled records convert writes by default.
expect 0 "$IMSHARD" convert folder "$T/s" -o "$T/pns" --val-ratio 0.25 --seed 3 --no-shuffle --shards 2 --quiet
expect 0 "$IMSHARD_TRAIN" --train "$T/pns/train.json" --val "$T/pns/val.json" --model convnet7 --size 16 \
  --threads 1 --batch-size 8 --shard-owning --max-steps 1 --epochs 1
contains "$T/err" "imshard-train: warning: shard-owning mode on '$T/pns/train.json', whose records are not shuffled"
same "$(grep -c 'shard-owning mode' "$T/err")" 1 "(warned once)"
expect 0 "$IMSHARD" convert folder "$T/s" -o "$T/psh" --val-ratio 0.25 --seed 3 --shards 2 --quiet
expect 0 "$IMSHARD_TRAIN" --train "$T/psh/train.json" --val "$T/psh/val.json" --model convnet7 --size 16 \
  --threads 1 --batch-size 8 --shard-owning --max-steps 1 --epochs 1
lacks "$T/err" "shard-owning"

# --device cuda: without a GPU (or a CUDA backend) nn_ctx_init_cuda's one
# line, which names the way out; with one, it trains (tests/train's gpu
# test checks what).
if fit --device cuda --max-steps 1 >"$T/out" 2>"$T/err"; then
  echo "--device cuda trained: a GPU is present"
  # mixed precision: bf16 trains without loss scaling; fp16 with one
  # injected Inf gradient (step 3) skips that step and halves the scale
  # (steps 1-2 may overflow on their own at S = 65536: compared with the
  # line before, not with fixed values)
  expect 0 fit --device cuda --precision bf16 --max-steps 3 --log-every 1 --log-dir "$T/bf16"
  same "$(json "$T/bf16/summary.json" '(j["loss_scale"], j["skipped_steps"], j["options"]["precision"])')" "(1, 0, 'bf16')" "bf16 summary"
  # what the device runs on: one line, the same in summary.json, naming
  # the files cuDNN and cuBLAS were loaded from
  expect 0 "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --batch-size 8 --device cuda --precision bf16 --max-steps 1 --log-dir "$T/stack"
  contains "$T/err" "imshard-train: cuda: "
  contains "$T/err" "; cuDNN 9."
  same "$(json "$T/stack/summary.json" '"/libcudnn.so" in j["device_stack"] and "/libcublas.so" in j["device_stack"]')" True "(device_stack names the libraries' files)"
  same "$(grep -cxF "imshard-train: cuda: $(json "$T/stack/summary.json" 'j["device_stack"]')" "$T/err")" 1 "(the line is summary.json's)"
  export IMSHARD_INJECT_INF_GRAD_STEP=3
  expect 0 fit --device cuda --precision fp16 --max-steps 3 --log-every 1 --log-dir "$T/fp16" --checkpoint-dir "$T/fp16ck"
  unset IMSHARD_INJECT_INF_GRAD_STEP
  python3 - "$T/fp16/metrics.jsonl" "$T/fp16/summary.json" >"$T/m" 2>&1 <<'PY'
import json, sys
t = [json.loads(l) for l in open(sys.argv[1]) if '"train"' in l]
s = json.load(open(sys.argv[2]))
assert [l["step"] for l in t] == [1, 2, 3], t
a, b = t[1], t[2]
assert b["skipped_steps"] == a["skipped_steps"] + 1, t
assert b["loss_scale"] == max(a["loss_scale"] / 2, 1), t
assert (s["loss_scale"], s["skipped_steps"]) == (b["loss_scale"], b["skipped_steps"]), s
print("ok")
PY
  contains "$T/m" "ok"
  # the scaler's state comes back with --resume
  scale=$(json "$T/fp16/summary.json" 'j["loss_scale"]')
  skipped=$(json "$T/fp16/summary.json" 'j["skipped_steps"]')
  expect 0 fit --device cuda --precision fp16 --max-steps 4 --log-every 1 --log-dir "$T/fp16" --checkpoint-dir "$T/fp16ck" --resume
  same "$(python3 -c 'import json,sys; l=[json.loads(x) for x in open(sys.argv[1]) if "\"train\"" in x][-1]; print(l["step"], l["skipped_steps"] >= '"$skipped"', l["loss_scale"] <= '"$scale"')' "$T/fp16/metrics.jsonl")" "4 True True" "fp16 resumed from the saved scale"
  # a loss that is not finite (step 2's batch poisoned, as an overflowed
  # fp16 forward pass leaves it): fp16 skips the step, bf16 stops
  run env IMSHARD_INJECT_NAN_STEP=2 "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --batch-size 8 --device cuda --precision fp16 --max-steps 3
  same "$rc" 0 "(fp16 on cuda fed a NaN at step 2)"
  contains "$T/err" "step 2: fp16 forward pass (loss not finite) overflowed"
  run env IMSHARD_INJECT_NAN_STEP=2 "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --batch-size 8 --device cuda --precision bf16 --max-steps 3
  same "$rc" 1 "(bf16 on cuda fed a NaN at step 2)"
  contains "$T/err" "loss is NaN at step 2: stopping"
  # --cuda-graphs: passes recorded once and replayed train the bits the
  # queued ones do (resnet18 records forward and backward), in fp32 and
  # bf16; the summary counts them, and says why when off
  # The counters are the CPU twin's (IMSHARD_TEST_HOST_STAGE takes the
  # device's path): with 44 training images, one epoch is 5 batches of 8
  # and one of 4, so steps 3-4 record a slot each, step 5 replays, and the
  # short batch is queued: a second epoch replays from its third step on.
  for p in fp32 bf16; do
    g_flags=(--train "$tr" --val "$va" --model resnet18 --size 32 --threads 1 --batch-size 8 --quiet
      --precision $p --tf32 off --cudnn-algo deterministic --epochs 2 --log-every 1)
    for g in on off; do
      expect 0 "$IMSHARD_TRAIN" "${g_flags[@]}" --device cuda \
        --log-dir "$T/graph_${p}_$g" --checkpoint-dir "$T/graphk_${p}_$g" --cuda-graphs $g
    done
    expect 0 env IMSHARD_TEST_HOST_STAGE=1 "$IMSHARD_TRAIN" "${g_flags[@]}" --log-dir "$T/graph_${p}_twin"
    twin=$(json "$T/graph_${p}_twin/summary.json" '(j["cuda_graphs"]["recorded"], j["cuda_graphs"]["replayed"])')
    same "$(json "$T/graph_${p}_twin/summary.json" 'j["cuda_graphs"]["replayed"] >= 4')" True "$p: the CPU twin's replayed passes"
    same "$(json "$T/graph_${p}_on/summary.json" '(j["cuda_graphs"]["recorded"], j["cuda_graphs"]["replayed"])')" "$twin" "$p: passes recorded and replayed, as on the CPU twin"
    same "$(json "$T/graph_${p}_on/summary.json" 'j["cuda_graphs"]["off"]')" None "$p: graphs on"
    same "$(json "$T/graph_${p}_off/summary.json" '(j["cuda_graphs"]["recorded"], j["cuda_graphs"]["off"])')" "(0, '--cuda-graphs off')" "$p: none with --cuda-graphs off"
    same "$(grep -o '"loss":[^,]*' "$T/graph_${p}_on/metrics.jsonl")" "$(grep -o '"loss":[^,]*' "$T/graph_${p}_off/metrics.jsonl")" "$p: replayed steps' losses"
    expect 0 cmp_st "$T/graphk_${p}_on/checkpoint.safetensors" "$T/graphk_${p}_off/checkpoint.safetensors" --rtol 0 --prefix ""
  done
  # fp16 decides each step on the host: on is refused, auto says why not
  run "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model resnet18 --size 32 --threads 1 --batch-size 8 --device cuda --precision fp16 --max-steps 1 --cuda-graphs on
  same "$rc" 1 "(fp16 with --cuda-graphs on)"
  contains "$T/err" "cannot use --cuda-graphs on: fp16 reads its loss and gradients every step"
else
  one_line "$T/err"
  contains "$T/err" "use --device cpu"
  contains "$T/err" "cannot use --device cuda: "
  # 16-bit precisions are accepted for cuda: the same no-GPU line
  expect 1 fit --device cuda --precision bf16
  one_line "$T/err"
  contains "$T/err" "cannot use --device cuda: "
  # the device is told before a --resume folder that is not there (a
  # host without a GPU hears so at once; before, the folder came first)
  expect 1 fit --device cuda --checkpoint-dir "$T/nowhere" --resume
  one_line "$T/err"
  contains "$T/err" "cannot use --device cuda: "
fi
# --cuda-graphs is a device's: on the CPU, on is refused, auto and off
# say nothing
run "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --batch-size 8 --max-steps 1 --cuda-graphs on
same "$rc" 1 "(--cuda-graphs on, --device cpu)"
one_line "$T/err"
contains "$T/err" "cannot use --cuda-graphs on: the device runs work as it is queued (--device cpu)"
expect 0 fit --max-steps 1 --cuda-graphs off --log-dir "$T/graph_cpu"
same "$(json "$T/graph_cpu/summary.json" '(j["options"]["cuda_graphs"], j["cuda_graphs"]["recorded"], j["cuda_graphs"]["off"])')" "('off', 0, '--cuda-graphs off')" "cpu summary"
same "$(json "$T/graph_cpu/summary.json" '"device_stack" in j')" False "(no device_stack on the CPU)"
run "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --batch-size 8 --max-steps 1 --cuda-graphs maybe
same "$rc" 2 "(--cuda-graphs maybe)"
contains "$T/err" "--cuda-graphs must be auto, on or off, got 'maybe'"
# mixed precision on the CPU (the device's reference graph): bf16 trains
# without loss scaling; fp16 with an injected Inf gradient at step 3
# skips that step and halves the scale; the options say what ran
expect 0 fit --precision bf16 --max-steps 3 --log-every 1 --log-dir "$T/cbf16" --cudnn-algo deterministic --tf32 off
same "$(json "$T/cbf16/summary.json" '(j["loss_scale"], j["skipped_steps"], j["options"]["precision"], j["options"]["cudnn_algo"], j["options"]["tf32"])')" "(1, 0, 'bf16', 'deterministic', False)" "cpu bf16 summary"
python3 -c 'import json,sys,math; t=[json.loads(l) for l in open(sys.argv[1]) if "\"train\"" in l]; assert len(t)==3 and all(math.isfinite(l["loss"]) for l in t), t' "$T/cbf16/metrics.jsonl" || fail "cpu bf16 metrics"
export IMSHARD_INJECT_INF_GRAD_STEP=3
expect 0 fit --precision fp16 --max-steps 3 --log-every 1 --log-dir "$T/cfp16"
unset IMSHARD_INJECT_INF_GRAD_STEP
# the per-step line is progress (--quiet hides it): the end still counts
contains "$T/out" "; 1 fp16 step skipped (gradients or loss overflowed), loss scale now 32768"
python3 - "$T/cfp16/metrics.jsonl" "$T/cfp16/summary.json" >"$T/m" 2>&1 <<'PY'
import json, sys
t = [json.loads(l) for l in open(sys.argv[1]) if '"train"' in l]
s = json.load(open(sys.argv[2]))
assert [l["step"] for l in t] == [1, 2, 3], t
a, b = t[1], t[2]
assert b["skipped_steps"] == a["skipped_steps"] + 1, t
assert b["loss_scale"] == max(a["loss_scale"] / 2, 1), t
assert s["options"]["precision"] == "fp16", s
print("ok")
PY
contains "$T/m" "ok"
# gradients that overflow with the scale already at 1 (a checkpoint's
# scale set to 1, resumed): the run stops alike (before: skipped, and
# every later step could be, the run ending in success)
expect 0 fit --precision fp16 --max-steps 2 --checkpoint-dir "$T/cfl"
/usr/bin/python3 "$IMS_SRC/tests/cli/st_edit.py" "$T/cfl/checkpoint.safetensors" "$T/cfl/x" --set loss_scale=1
mv "$T/cfl/x" "$T/cfl/checkpoint.safetensors"
before=$(md5sum <"$T/cfl/checkpoint.safetensors")
expect 1 env IMSHARD_INJECT_INF_GRAD_STEP=3 "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --batch-size 8 --quiet --precision fp16 --max-steps 4 --checkpoint-dir "$T/cfl" --resume
contains "$T/err" "imshard: gradients overflowed at step 3 with the fp16 loss scale at 1: stopping (lower --lr, or train in bf16, whose range is fp32's; the last checkpoint written before this step is kept)"
same "$(md5sum <"$T/cfl/checkpoint.safetensors")" "$before" "(the checkpoint before the overflow kept)"
# every step's fp16 forward pass overflows (inputs of about 1e5): an
# interval of skipped steps has no loss, not a loss of 0, and its images
# still count in the total images/s
run "$IMSHARD_TRAIN" --train "$tr" --model convnet7 --size 16 --threads 1 --batch-size 8 --precision fp16 --std 0.001,0.001,0.001 --max-steps 2 --log-every 2 --log-dir "$T/ovf"
same "$rc" 0 "(fp16, every step overflowed)"
contains "$T/err" "epoch 1 step 2/5 no loss (every step skipped) lr"
lacks "$T/err" " 0 img/s total"
contains "$T/out" "; 2 fp16 steps skipped (gradients or loss overflowed), loss scale now 16384"
same "$(python3 -c 'import json,sys; l=[json.loads(x) for x in open(sys.argv[1]) if "\"train\"" in x]; print([(x["step"], x["loss"], x["accuracy"], x["skipped_steps"]) for x in l])' "$T/ovf/metrics.jsonl")" "[(2, None, None, 2)]" "(the interval of skipped steps)"
expect 2 fit --cudnn-algo fastest
one_line "$T/err"
contains "$T/err" "--cudnn-algo must be benchmark, heuristic or deterministic, got 'fastest'"
expect 2 fit --tf32 maybe
one_line "$T/err"
contains "$T/err" "--tf32 must be on or off, got 'maybe'"
# a device's settings on the CPU would be recorded and do nothing:
# refused, but for what the CPU does anyway (off, deterministic: above)
expect 1 fit --tf32 on
one_line "$T/err"
contains "$T/err" "cannot use --tf32 on with --device cpu: TF32 is a GPU's tensor-core format"
for a in benchmark heuristic; do
  expect 1 fit --cudnn-algo $a
  one_line "$T/err"
  contains "$T/err" "cannot use --cudnn-algo $a with --device cpu: it chooses cuDNN's algorithms on a GPU"
done
# bad usage, before anything is read (before: exit 1 from the loader, a
# run that took 1e-300, a momentum adam ignored)
expect 2 fit --augment flip,bogus
one_line "$T/err"
contains "$T/err" "--augment: cannot parse transform option 'bogus': unknown option"
expect 2 fit --val-crop-frac 1e-300
one_line "$T/err"
contains "$T/err" "--val-crop-frac must be between 0.001 and 1, got 1e-300"
expect 2 fit --optimizer adam --momentum 0.5
one_line "$T/err"
contains "$T/err" "--momentum is for --optimizer sgd"
# --nesterov needs SGD with a momentum, as --help and docs/TRAINING.md say
expect 2 fit --nesterov --optimizer adam
one_line "$T/err"
contains "$T/err" "--nesterov is for --optimizer sgd"
expect 2 fit --nesterov --momentum 0
one_line "$T/err"
contains "$T/err" "--nesterov needs --momentum above 0"
# channels-last: the CPU's twin computes the NCHW run's bits (resnet18
# bf16: the same losses and checkpoint tensors, optimiser state too; fp32
# convnet7 likewise); refused for a model whose classifier reads a wider
# map; auto stays NCHW on the CPU; the log and summary say which ran
expect 2 fit --channels-last maybe
one_line "$T/err"
contains "$T/err" "--channels-last must be auto, on or off, got 'maybe'"
for cl in on off; do
  expect 0 fit --channels-last $cl --max-steps 3 --log-every 1 --log-dir "$T/cl32_$cl" --checkpoint-dir "$T/cl32k_$cl"
done
expect 1 fit --channels-last on --precision bf16 --model vgg16 --size 32
one_line "$T/err"
contains "$T/err" "cannot build vgg16 channels-last: its classifier reads a 512x7x7 map in NCHW order"
for cl in off auto on; do
  expect 0 "$IMSHARD_TRAIN" --train "$tr" --model resnet18 --size 32 --threads 2 --batch-size 8 --precision bf16 --channels-last $cl --max-steps 3 --log-every 1 --log-dir "$T/cl_$cl" --checkpoint-dir "$T/clk_$cl"
done
contains "$T/err" "(0.22 MiB per image), channels-last (NHWC)"
same "$(json "$T/cl_on/summary.json" '(j["options"]["channels_last"], j["options"]["precision"])')" "(True, 'bf16')" "channels-last summary"
same "$(json "$T/cl_auto/summary.json" 'j["options"]["channels_last"]')" "False" "auto on the cpu"
losses() { python3 -c 'import json,sys; print([json.loads(l)["loss"] for l in open(sys.argv[1]) if "\"train\"" in l])' "$1/metrics.jsonl"; }
same "$(losses "$T/cl_on")" "$(losses "$T/cl_off")" "channels-last losses"
expect 0 /usr/bin/python3 "$IMS_SRC/tests/cli/st_compare.py" "$T/clk_on/checkpoint.safetensors" "$T/clk_off/checkpoint.safetensors" --rtol 0 --prefix ""
same "$(json "$T/cl32_on/summary.json" '(j["options"]["channels_last"], j["options"]["precision"])')" "(True, 'fp32')" "fp32 channels-last summary"
same "$(losses "$T/cl32_on")" "$(losses "$T/cl32_off")" "fp32 channels-last losses"
expect 0 /usr/bin/python3 "$IMS_SRC/tests/cli/st_compare.py" "$T/cl32k_on/checkpoint.safetensors" "$T/cl32k_off/checkpoint.safetensors" --rtol 0 --prefix ""
expect 2 fit --precision fp8
one_line "$T/err"
contains "$T/err" "--precision must be fp32, bf16 or fp16, got 'fp8'"
# the overflow injection is for fp16 alone
export IMSHARD_INJECT_INF_GRAD_STEP=1
expect 1 fit --max-steps 1
unset IMSHARD_INJECT_INF_GRAD_STEP
one_line "$T/err"
contains "$T/err" "IMSHARD_INJECT_INF_GRAD_STEP needs --precision fp16"
expect 1 fit --init "$T/none.safetensors"
contains "$T/err" "none.safetensors"

# --- a short run: metrics and summary ------------------------------------
expect 0 fit --epochs 2 --log-dir "$T/run" --log-every 2
contains "$T/out" "validation top-1"
exists "$T/run/metrics.jsonl"
exists "$T/run/summary.json"
same "$(json "$T/run/summary.json" 'sorted(k for k in "world busy_s data_wait_s_per_rank comm_s_per_rank busy_max_min_ratio wall_s train_s startup_s images_per_s best_val_top1 best_epoch best_wall_s lr_per_rank lr_peak val_s checkpoint_s loss_scale skipped_steps activation_bytes activation_bytes_per_image options".split() if k not in j)')" "[]" "summary keys"
same "$(json "$T/run/summary.json" 'j["activation_bytes"] > 0 and j["activation_bytes_per_image"] * 8 == j["activation_bytes"]')" "True" "activation bytes per image"
same "$(json "$T/run/summary.json" '(j["loss_scale"], j["skipped_steps"])')" "(1, 0)" "fp32: no loss scaling"
same "$(json "$T/run/summary.json" '(j["options"]["model"], j["options"]["optimizer"], j["options"]["schedule"], j["options"]["synthetic"])')" "('convnet7', 'sgd', 'cosine', False)" "summary options"
same "$(json "$T/run/summary.json" '(j["world"], j["epochs"], j["steps"])')" "(1, 2, $((2 * (train_records / 8))))" "summary counts"
python3 - "$T/run/metrics.jsonl" "$val_records" >"$T/m" 2>&1 <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
train = [l for l in lines if l["type"] == "train"]
val = [l for l in lines if l["type"] == "val"]
keys = "rank epoch step loss accuracy lr images_per_s data_wait_ms compute_ms comm_ms steps wall_s loss_scale skipped_steps".split()
assert train and all(all(k in l for k in keys) for l in train), "train keys"
assert all(l["loss_scale"] == 1 and l["skipped_steps"] == 0 for l in train), "fp32: no loss scaling"
assert [v["epoch"] for v in val] == [0, 1], "one val line per epoch"
assert all(v["records"] == int(sys.argv[2]) for v in val), "val counts every record once"
assert all(0 <= v["top1"] <= v["top5"] <= 1 for v in val), "top1 <= top5"
print("ok")
PY
contains "$T/m" "ok"

# --- --synthetic: one fixed random batch, nothing decoded ----------------
# Training on the same batch every step memorises it: the loss halves and
# the batch ends classified right (4 classes: chance is 0.25). Epochs keep
# --train's length.
expect 0 fit --synthetic --epochs 3 --max-steps 12 --log-every 4 --lr 0.05 --log-dir "$T/syn"
python3 - "$T/syn/metrics.jsonl" "$T/syn/summary.json" >"$T/m" 2>&1 <<'PY'
import json, sys
train = [json.loads(l) for l in open(sys.argv[1]) if '"train"' in l]
s = json.load(open(sys.argv[2]))
assert [t["step"] for t in train] == [4, 5, 8, 10, 12], train
assert train[-1]["accuracy"] >= 0.9 and train[-1]["loss"] < train[0]["loss"] / 2, [(t["accuracy"], t["loss"]) for t in train]
assert s["options"]["synthetic"] is True and s["steps"] == 12, s
print("ok")
PY
contains "$T/m" "ok"

# validation with 3 ranks: uneven shares, each record counted once
if have_mpi; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  expect 0 mpi -np 3 "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --batch-size 4 --max-steps 2 --log-dir "$T/run3" --quiet
  same "$(json "$T/run3/summary.json" 'j["world"]')" 3 "world 3"
  same "$(grep '"val"' "$T/run3/metrics.jsonl" | python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["records"])')" "$val_records" "val records at 3 ranks"
  same "$(grep -c '"train"' "$T/run3/metrics.jsonl")" 3 "a train line per rank"
  # a bad flag under mpirun: one line from rank 0, not one per rank
  run mpi -np 3 "$IMSHARD_TRAIN" --train "$tr" --model resnet19
  same "$rc" 2 "(bad flag under mpirun)"
  same "$(grep -c "unknown model 'resnet19'" "$T/err")" 1 "lines about a bad flag from 3 ranks"
  # several ranks on cuda: refused without NCCL in the build; with it,
  # without two GPUs, the backend's line (no GPU) or NCCL's set-up's (two
  # ranks would share the one GPU); with two, it trains
  run mpi -np 2 "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --device cuda --max-steps 2 --quiet
  checks=$((checks + 1))
  if [ "$rc" != 0 ]; then
    grep -qF "cannot train on cuda with 2 ranks" "$T/err" || grep -qF "would share one GPU" "$T/err" ||
      contains "$T/err" "cannot use --device cuda: "
  fi
elif command -v mpirun >/dev/null; then
  # a build without MPI started as several ranks refuses (each process
  # would train alone), every rank with its line (two processes' writes
  # to one stderr may interleave: the message is counted, not the lines)
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  expect 1 mpi -np 2 "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --max-steps 1 --quiet
  same "$(grep -o 'cannot run as one of 2 ranks: this build has no MPI' "$T/err" | wc -l)" 2 "no-MPI build under mpirun"
fi

# --- the device loop's host side, on the CPU --------------------------------
# IMSHARD_TEST_HOST_STAGE runs the loop a GPU run takes (batches staged
# into two slots, the next taken from the loader while a step runs, its
# labels kept, logits read back, validation's loss on a host context) with
# host memory as the "device": it must train exactly as the plain loop.
hs() { IMSHARD_TEST_HOST_STAGE=1 fit "$@"; }
expect 0 fit --epochs 2 --seed 9 --checkpoint-dir "$T/hs0" --log-dir "$T/hs0" --log-every 1
expect 0 hs --epochs 2 --seed 9 --checkpoint-dir "$T/hs1" --log-dir "$T/hs1" --log-every 1
st_same "$T/hs0/checkpoint.safetensors" "$T/hs1/checkpoint.safetensors" ||
  fail "the staged loop's checkpoint differs from the plain loop's"
checks=$((checks + 1))
# loss and accuracy of every step, and the validation lines
hs_lines() { python3 -c 'import json,sys
for l in map(json.loads, open(sys.argv[1])):
    if l["type"] in ("train", "val"):
        print(l["type"], l.get("step"), l.get("loss"), l.get("accuracy"), l.get("top1"), l.get("top5"))' "$1"; }
same "$(hs_lines "$T/hs1/metrics.jsonl")" "$(hs_lines "$T/hs0/metrics.jsonl")" "staged loop's metrics"
same "$(hs_lines "$T/hs1/metrics.jsonl" | grep -c '^train')" "$(hs_lines "$T/hs0/metrics.jsonl" | grep -c '^train')" "staged loop's step count"
# The twin records its passes and replays them as a device does (CUDA
# graphs: train/record_host.c, --cuda-graphs auto): convnet7 above
# replayed its backward passes (its forward draws dropout); resnet18
# records forward and backward for each of the two staging slots, then
# replays them, and trains the plain loop's bits: in fp32 NCHW, whose
# first convolution's weight gradient reads the batch itself (a
# backward recording not keyed by the batch's address differs here), and
# in bf16 channels-last.
same "$(json "$T/hs1/summary.json" 'j["cuda_graphs"]["recorded"] > 0, j["cuda_graphs"]["replayed"] > 0, j["cuda_graphs"]["off"]')" "True True None" "(staged convnet7's recorded passes)"
for hp in "fp32" "bf16 --channels-last on"; do
  # shellcheck disable=SC2206 # the precision and its flags
  hg=(--model resnet18 --precision $hp --seed 9 --epochs 2 --max-steps 8)
  hn=${hp%% *}
  expect 0 fit "${hg[@]}" --checkpoint-dir "$T/hg0$hn"
  expect 0 hs "${hg[@]}" --checkpoint-dir "$T/hg1$hn" --log-dir "$T/hg1$hn"
  st_same "$T/hg0$hn/checkpoint.safetensors" "$T/hg1$hn/checkpoint.safetensors" ||
    fail "the staged loop's replayed resnet18 ($hp) differs from the plain loop's"
  checks=$((checks + 1))
  same "$(json "$T/hg1$hn/summary.json" 'j["cuda_graphs"]["recorded"], j["cuda_graphs"]["replayed"]')" "4 8" "(resnet18 $hp: 2 slots x forward and backward recorded, steps 3-8 replayed)"
done
# the head alone (--freeze-backbone): its backward passes are keyed
# apart and stop at the head
hh=(--model resnet18 --seed 9 --epochs 2 --max-steps 8 --init "$T/hg0fp32/checkpoint.safetensors" --freeze-backbone --reset-head)
expect 0 fit "${hh[@]}" --checkpoint-dir "$T/hh0"
expect 0 hs "${hh[@]}" --checkpoint-dir "$T/hh1" --log-dir "$T/hh1"
st_same "$T/hh0/checkpoint.safetensors" "$T/hh1/checkpoint.safetensors" ||
  fail "the staged loop's replayed head-only resnet18 differs from the plain loop's"
checks=$((checks + 1))
same "$(json "$T/hh1/summary.json" 'j["cuda_graphs"]["recorded"], j["cuda_graphs"]["replayed"]')" "4 8" "(head-only resnet18's recorded passes)"
# on: the same; off: nothing recorded, the same tensors
hg=(--model resnet18 --precision fp32 --seed 9 --epochs 2 --max-steps 8)
expect 0 hs "${hg[@]}" --checkpoint-dir "$T/hg2" --log-dir "$T/hg2" --cuda-graphs on
expect 0 hs "${hg[@]}" --checkpoint-dir "$T/hg3" --log-dir "$T/hg3" --cuda-graphs off
same "$(json "$T/hg2/summary.json" 'j["cuda_graphs"]["replayed"]')" 8 "(staged run with --cuda-graphs on)"
same "$(json "$T/hg3/summary.json" 'j["cuda_graphs"]["recorded"], j["cuda_graphs"]["off"]')" "0 --cuda-graphs off" "(staged run with --cuda-graphs off)"
for d in hg2 hg3; do
  cmp_st "$T/hg0fp32/checkpoint.safetensors" "$T/$d/checkpoint.safetensors" --rtol 0 --prefix "" >/dev/null ||
    fail "the staged loop's resnet18 ($d) differs from the plain loop's"
  checks=$((checks + 1))
done
# the loader's batches are in the backend's host memory for batches (a
# GPU's pinned memory), passed through the loader's allocator callbacks,
# only on a device run (here its CPU twin); a cpu run keeps the loader's
# own page-aligned memory, and the loader loads no CUDA runtime itself
expect 0 "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --batch-size 8 --max-steps 1 --verbose
same "$(grep '^imshard: loader:' "$T/err")" "imshard: loader: batches in page-aligned host memory" "cpu run's batch memory"
expect 0 env IMSHARD_TEST_HOST_STAGE=1 "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --batch-size 8 --max-steps 1 --verbose
same "$(grep '^imshard: loader:' "$T/err")" "imshard: loader: batches in page-aligned host memory (staged as for a device)" "staged run's batch memory"
# nor does a cpu run of a CUDA build ask the dynamic loader for the CUDA
# driver, cuBLAS, NVML or a second, unversioned CUDA runtime: nothing of
# it touches a GPU (a --device cuda run, the control, asks for the
# driver). The staged twin takes a device run's path, NVML's gpu lines
# included, but no CUDA library either.
cuda_libs='find library=(libcuda\.so|libcublas|libnvidia-ml|libcudart\.so )'
run env LD_DEBUG=libs "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --batch-size 8 --max-steps 1 --quiet
same "$rc" 0 "(cpu run under LD_DEBUG)"
same "$(grep -cE "$cuda_libs" "$T/err")" 0 "(CUDA libraries a cpu run looked for)"
# On a GPU host NVML, which the staged run opens for its gpu lines, opens
# the driver itself: the dynamic loader names who asked ("file=LIB;
# dynamically loaded by WHO", just before "find library=LIB"), and only
# what NVML did not ask for counts.
run env LD_DEBUG=libs,files IMSHARD_TEST_HOST_STAGE=1 "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --batch-size 8 --max-steps 1 --quiet
same "$rc" 0 "(staged run under LD_DEBUG)"
# not_nvml_asks LOG: the CUDA libraries LOG shows looked for, less those
# libnvidia-ml asked for
not_nvml_asks() {
  awk '/\tfile=[^ ]+ \[[0-9]+\];  (needed|dynamically loaded) by / { by = $0 }
    /find library=(libcuda\.so|libcublas|libcudart\.so )/ && by !~ /libnvidia-ml/ { print }' "$1"
}
same "$(not_nvml_asks "$T/err" | wc -l)" 0 "(CUDA libraries a staged run looked for: $(not_nvml_asks "$T/err" | head -n1))"
# grep reads all of ldd's output (see memcap in lib.sh)
if ldd "$IMSHARD_TRAIN" | grep libcudart >/dev/null; then
  run env LD_DEBUG=libs "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --batch-size 8 --max-steps 1 --quiet --device cuda
  grep -qE "$cuda_libs" "$T/err" || fail "a --device cuda run asked for no CUDA driver: the check above sees nothing"
  checks=$((checks + 1))
fi
# resumed in the middle of an epoch, and --max-steps ending mid-epoch
expect 0 hs --epochs 2 --seed 9 --checkpoint-dir "$T/hs2" --max-steps 5
expect 0 hs --epochs 2 --seed 9 --checkpoint-dir "$T/hs2" --resume
st_same "$T/hs0/checkpoint.safetensors" "$T/hs2/checkpoint.safetensors" ||
  fail "the staged loop resumed mid-epoch ends with other bytes"
checks=$((checks + 1))
# a NaN in a batch taken ahead is still in its copy: the run stops there
run env IMSHARD_INJECT_NAN_STEP=4 IMSHARD_TEST_HOST_STAGE=1 "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --batch-size 8 --quiet --epochs 2
same "$rc" 1 "staged loop fed a NaN at step 4"
contains "$T/err" "loss is NaN at step 4"
# fp16 (its 16-bit activations and loss scaling) runs on the twin as on
# the plain cpu: the same bits, so the staged loop is held to the plain
# one in fp16 too
expect 0 fit --seed 9 --max-steps 6 --checkpoint-dir "$T/hf0" --precision fp16
expect 0 hs --seed 9 --max-steps 6 --checkpoint-dir "$T/hf1" --precision fp16
st_same "$T/hf0/checkpoint.safetensors" "$T/hf1/checkpoint.safetensors" ||
  fail "the staged loop's fp16 run differs from the plain loop's"
checks=$((checks + 1))
# a loss that is not finite (step 3's batch poisoned, as an fp16 forward
# pass that overflowed leaves it): with fp16 the step is skipped and S
# halved, the run goes on; the statistics the step spoiled are put back
expect 0 env IMSHARD_INJECT_NAN_STEP=3 IMSHARD_TEST_HOST_STAGE=1 "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --batch-size 8 --seed 9 --max-steps 6 --precision fp16 --checkpoint-dir "$T/hf2" --log-dir "$T/hf2" --log-every 1
contains "$T/err" "step 3: fp16 forward pass (loss not finite) overflowed at loss scale 65536: step skipped, scale now 32768"
same "$(json "$T/hf2/summary.json" 'j["skipped_steps"], j["loss_scale"]')" "1 32768" "(skipped overflowed forward pass)"
# (step 3's interval is that step alone: no loss, null)
same "$(python3 -c 'import json,math,sys
print(all(l["loss"] is None if l["step"] == 3 else math.isfinite(l["loss"]) for l in map(json.loads, open(sys.argv[1])) if l["type"] == "train"))' "$T/hf2/metrics.jsonl")" True "(train lines' loss finite, step 3's none)"
# its weights are those of a run whose step 3 overflowed in backward (also
# skipped); its batch-norm statistics lack step 3's batch: finite, and
# the counters one batch behind
expect 0 env IMSHARD_INJECT_INF_GRAD_STEP=3 IMSHARD_TEST_HOST_STAGE=1 "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --batch-size 8 --quiet --seed 9 --max-steps 6 --precision fp16 --checkpoint-dir "$T/hf3"
same "$(st_tool overflow "$T/hf2/checkpoint.safetensors" "$T/hf3/checkpoint.safetensors")" "counter stat weight" "(forward overflow against gradient overflow: checkpoint)"
# fp32 and bf16 on a device read the loss only when an interval is
# reported (--log-every) or a checkpoint written: the twin, reporting
# every 4 steps and checkpointing every 3, trains and reports exactly as
# the plain loop does with the same flags
expect 0 fit --epochs 2 --seed 9 --checkpoint-dir "$T/hd0" --log-dir "$T/hd0" --log-every 4 --checkpoint-every 3
expect 0 hs --epochs 2 --seed 9 --checkpoint-dir "$T/hd1" --log-dir "$T/hd1" --log-every 4 --checkpoint-every 3
st_same "$T/hd0/checkpoint.safetensors" "$T/hd1/checkpoint.safetensors" ||
  fail "the loop reading its loss every 4 steps ends with other bytes"
checks=$((checks + 1))
same "$(hs_lines "$T/hd1/metrics.jsonl")" "$(hs_lines "$T/hd0/metrics.jsonl")" "deferred-loss loop's metrics"
# a checkpoint every 3 steps and at each epoch's end, written once
# where they fall on the same step (the epoch's end is written after its
# validation): counted in summary.json
n=$(json "$T/hd0/summary.json" 'j["steps"]')
per=$((n / 2))
want=$(( n / 3 - (per % 3 == 0) - (n % 3 == 0) + 2 ))
same "$(json "$T/hd0/summary.json" 'j["checkpoints"]')" "$want" "(checkpoints written in $n steps, every 3 and at the ends of 2 epochs)"
expect 0 fit --epochs 3 --max-steps $((2 * per)) --seed 9 --checkpoint-dir "$T/hd4" --log-dir "$T/hd4" --checkpoint-every "$per"
same "$(json "$T/hd4/summary.json" 'j["checkpoints"]')" 2 "(checkpoints written every epoch's $per steps, to --max-steps at the second's end)"
# a NaN loss at step 3, read at step 4's checkpoint: the run stops there
# naming step 3, and the checkpoint kept is step 2's, as the plain loop
# (which reads every step) keeps
run env IMSHARD_INJECT_NAN_STEP=3 "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --batch-size 8 --quiet --seed 9 --max-steps 8 --checkpoint-every 2 --checkpoint-dir "$T/hd2"
same "$rc" 1 "(plain run fed a NaN at step 3)"
run env IMSHARD_INJECT_NAN_STEP=3 IMSHARD_TEST_HOST_STAGE=1 "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --batch-size 8 --quiet --seed 9 --max-steps 8 --checkpoint-every 2 --checkpoint-dir "$T/hd3"
same "$rc" 1 "(deferred-loss run fed a NaN at step 3)"
contains "$T/err" "loss is NaN at step 3: stopping"
st_same "$T/hd2/checkpoint.safetensors" "$T/hd3/checkpoint.safetensors" ||
  fail "a run whose step 3 went NaN kept another checkpoint than step 2's"
checks=$((checks + 1))
# --profile K: steps 3 to K + 2 timed piece by piece, the same results
expect 0 fit --epochs 2 --seed 9 --checkpoint-dir "$T/pf0"
expect 0 fit --epochs 2 --seed 9 --checkpoint-dir "$T/pf1" --log-dir "$T/pf1" --profile 2
st_same "$T/pf0/checkpoint.safetensors" "$T/pf1/checkpoint.safetensors" ||
  fail "a profiled run ends with other bytes"
checks=$((checks + 1))
same "$(json "$T/pf1/summary.json" '(lambda p: (p["steps"], p["forward_ms"]["conv"] > 0, p["backward_ms"]["batchnorm"] > 0, p["update_ms"] > 0, sum(p["forward_ms"].values()) + sum(p["backward_ms"].values()) + p["loss_ms"] + p["allreduce_ms"] + p["update_ms"] <= p["step_ms"]))(j["profile"])')" "(2, True, True, True, True)" "(profile in summary.json)"
run "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --batch-size 8 --epochs 2 --seed 9 --profile 2
same "$rc" 0 "(profiled run, not quiet)"
contains "$T/out" "profile of 2 steps"
contains "$T/out" "  conv "
run "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --batch-size 8 --max-steps 2 --seed 9 --profile 2
contains "$T/err" "--profile 2: the run ended before step 3, nothing was timed"
# the memory the first steps will touch, against what is free: a run
# the OOM killer would end is said to be at risk before it starts
run env IMSHARD_TEST_MEM_ROOM=1000000 "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --batch-size 8 --max-steps 1
same "$rc" 0 "(run over the test's memory room)"
contains "$T/err" "warning: the first steps will touch about"
contains "$T/err" "the OOM killer may end this run"
run "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --batch-size 8 --max-steps 1
lacks "$T/err" "OOM killer"
# the validation ring holds the rank's share when the batch is larger
# (16 records, batches of 32 at 64 px: 4.5 MiB for training's three
# batches ahead, 2.25 for validation's; before: 4.5 counted for both)
run env IMSHARD_TEST_MEM_ROOM=1000000 "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 64 --threads 1 --batch-size 32 --max-steps 1 --quiet
same "$(json "$va" 'j["records"]')" 16 "(validation records)"
contains "$T/err" ", batches 7) than the test's room"
# bf16 and fp32 still stop at a loss that is not finite
run env IMSHARD_INJECT_NAN_STEP=3 IMSHARD_TEST_HOST_STAGE=1 "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --batch-size 8 --quiet --seed 9 --max-steps 6
same "$rc" 1 "(fp32 staged run fed a NaN at step 3)"
contains "$T/err" "loss is NaN at step 3: stopping"
# the synthetic batch's device copy
expect 0 fit --epochs 1 --seed 9 --synthetic --max-steps 4 --checkpoint-dir "$T/hs3"
expect 0 hs --epochs 1 --seed 9 --synthetic --max-steps 4 --checkpoint-dir "$T/hs4"
st_same "$T/hs3/checkpoint.safetensors" "$T/hs4/checkpoint.safetensors" ||
  fail "the staged loop's synthetic run differs from the plain loop's"
checks=$((checks + 1))

# --- resume inside an epoch = uninterrupted, byte for byte ---------------
expect 0 fit --epochs 2 --checkpoint-dir "$T/full" --seed 5
expect 0 fit --epochs 2 --checkpoint-dir "$T/part" --seed 5 --max-steps 3
expect 0 fit --epochs 2 --checkpoint-dir "$T/part" --seed 5 --resume
st_same "$T/full/checkpoint.safetensors" "$T/part/checkpoint.safetensors" ||
  fail "resumed run's checkpoint differs from the uninterrupted run's"
checks=$((checks + 1))
expect 1 fit --epochs 2 --checkpoint-dir "$T/part" --seed 5 --resume --model resnet18
contains "$T/err" "cannot resume"
# --freeze-backbone: the backbone's weights keep their bits, and its
# activations are not kept for a backward that never reaches them
expect 0 fit --epochs 1 --init "$T/full/checkpoint.safetensors" --freeze-backbone --log-dir "$T/frozen" --checkpoint-dir "$T/frozen"
# Names from outside reach the terminal escaped: an --init file whose
# name holds an ESC sequence is named with \x1b, never the raw byte; its
# record in summary.json and the checkpoint (below) is escaped alike, a
# byte that is not UTF-8 too (metadata must be UTF-8: a raw one would
# fail every checkpoint)
esc=$(printf 'init\033[31m\377.safetensors')
cp "$T/full/checkpoint.safetensors" "$T/$esc"
expect 0 "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 \
  --batch-size 8 --epochs 1 --max-steps 1 --init "$T/$esc" --log-dir "$T/escinit" --checkpoint-dir "$T/escinit"
contains "$T/err" 'init\x1b[31m\xff.safetensors'
checks=$((checks + 1))
grep -q "$(printf '\033')" "$T/err" && fail "a raw ESC byte reached stderr"
same "$(json "$T/escinit/summary.json" 'j["init"]["path"]')" "$T/init\x1b[31m\xff.safetensors" "--init's path escaped in summary.json"
same "$(st_tool get "$T/escinit/checkpoint.safetensors" run | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["init"]["path"])')" \
  "$T/init\x1b[31m\xff.safetensors" "--init's path escaped in the checkpoint"
cmp_st "$T/full/checkpoint.safetensors" "$T/frozen/checkpoint.safetensors" --rtol 0 --prefix features.0. >/dev/null ||
  fail "--freeze-backbone changed the backbone"
checks=$((checks + 1))
# its batch norm still normalises by batch statistics and updates its
# running statistics (as PyTorch's requires_grad=False in train mode);
# with --freeze-bn too, not one float32 of the backbone moves
cmp_st "$T/full/checkpoint.safetensors" "$T/frozen/checkpoint.safetensors" --rtol 0 --prefix features.1.running_mean >/dev/null &&
  fail "--freeze-backbone without --freeze-bn kept the backbone's running statistics"
checks=$((checks + 1))
expect 0 fit --epochs 1 --init "$T/full/checkpoint.safetensors" --freeze-backbone --freeze-bn --weight-decay 0.1 --checkpoint-dir "$T/frozen_bn"
for pre in features. classifier.0.; do
  cmp_st "$T/full/checkpoint.safetensors" "$T/frozen_bn/checkpoint.safetensors" --rtol 0 --prefix $pre >/dev/null ||
    fail "--freeze-backbone --freeze-bn changed the backbone ($pre)"
  checks=$((checks + 1))
done
# ... at 3 ranks too, with validation and a checkpoint at each epoch's
# end: every rank holds the frozen statistics as loaded (before, each
# validation and checkpoint averaged them, and (x + x + x) / 3 moved
# about 1 in 6 of them by a bit)
if have_mpi; then
  expect 0 mpi -np 3 "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --batch-size 4 --quiet \
    --epochs 2 --init "$T/full/checkpoint.safetensors" --freeze-backbone --freeze-bn --checkpoint-dir "$T/frozen_bn3"
  for pre in features. classifier.0.; do
    cmp_st "$T/full/checkpoint.safetensors" "$T/frozen_bn3/checkpoint.safetensors" --rtol 0 --prefix $pre >/dev/null ||
      fail "--freeze-backbone --freeze-bn at 3 ranks changed the backbone ($pre)"
    checks=$((checks + 1))
  done
fi
# a frozen run resumes frozen when given --freeze-backbone again
# (before: refused as "needs --init", while --init excludes --resume, so
# a frozen run could only resume with its backbone training): stopped
# and resumed, the bytes of the uninterrupted run
fz=(--epochs 2 --seed 5 --freeze-backbone)
expect 0 fit "${fz[@]}" --init "$T/full/checkpoint.safetensors" --checkpoint-dir "$T/fz_u"
expect 0 fit "${fz[@]}" --init "$T/full/checkpoint.safetensors" --checkpoint-dir "$T/fz_p" --max-steps 3
expect 0 fit "${fz[@]}" --checkpoint-dir "$T/fz_p" --resume
st_same "$T/fz_u/checkpoint.safetensors" "$T/fz_p/checkpoint.safetensors" ||
  fail "a frozen run stopped and resumed frozen differs from the uninterrupted one"
checks=$((checks + 1))
# resumed without it the backbone trains, as the resume line says
expect 0 fit "${fz[@]}" --init "$T/full/checkpoint.safetensors" --checkpoint-dir "$T/fz_q" --max-steps 3
run "$IMSHARD_TRAIN" --train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --batch-size 8 --epochs 2 --seed 5 --checkpoint-dir "$T/fz_q" --resume
same "$rc" 0 "(a frozen run resumed without --freeze-backbone)"
contains "$T/err" "resumed with other settings: freeze_backbone on -> off"
# --init's provenance: the file's path as given, its size and the
# CRC-32C of all its bytes, whether its own checksum matched, what was
# taken and the flags that decided it, in summary.json and in the
# checkpoint's run history, which a resumed part carries on (before:
# nothing recorded which file a fine-tuned run started from)
read -r isize icrc <<<"$(st_tool crc "$T/full/checkpoint.safetensors")"
pv=(--epochs 2 --seed 5 --freeze-backbone)
expect 0 fit "${pv[@]}" --init "$T/full/checkpoint.safetensors" --reset-head --checkpoint-dir "$T/pv" --log-dir "$T/pv" --max-steps 3
want="{'path': '$T/full/checkpoint.safetensors', 'bytes': $isize, 'crc32c': '$icrc', 'verified': True, 'loaded': 32, 'missing': 0, 'ignored': 0, 'reinit': 2, 'init_partial': False, 'reset_head': True, 'other_classes': False, 'freeze_backbone': True}"
ck_init() { st_tool get "$1" run | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin).get("init"))'; }
same "$(json "$T/pv/summary.json" 'j["init"]')" "$want" "summary.json's init"
same "$(ck_init "$T/pv/checkpoint.safetensors")" "$want" "the checkpoint's init"
expect 0 fit "${pv[@]}" --checkpoint-dir "$T/pv" --log-dir "$T/pv" --resume
same "$(json "$T/pv/summary.json" '(j["init"], len(j["parts"]))')" "($want, 2)" "a resumed run's summary.json keeps its init"
same "$(ck_init "$T/pv/checkpoint.safetensors")" "$want" "a resumed run's checkpoint keeps its init"
# a run from scratch records none, and resumes (as checkpoints from
# before the record do)
same "$(json "$T/run/summary.json" '"init" in j')" "False" "no init in a run from scratch"
same "$(ck_init "$T/part/checkpoint.safetensors")" "None" "no init in a checkpoint from scratch"
same "$(json "$T/frozen/summary.json" 'j["activation_bytes"] * 2 < '"$(json "$T/run/summary.json" 'j["activation_bytes"]')")" "True" "head-only training plans less memory"
# fp32 checkpoints carry the skipped count (0), not fp16's scale; a bad
# count is refused on resume with one line
meta() { python3 -c 'import json,struct,sys; d=open(sys.argv[1],"rb").read(); n=struct.unpack("<Q",d[:8])[0]; m=json.loads(d[8:8+n])["__metadata__"]; print(m.get("skipped_steps"), m.get("loss_scale"), m.get("loss_scale_good_steps"))' "$1"; }
same "$(meta "$T/part/checkpoint.safetensors")" "0 None None" "fp32 checkpoint's loss-scale metadata"
st_tool set "$T/part/checkpoint.safetensors" skipped_steps=x1
expect 1 fit --epochs 2 --checkpoint-dir "$T/part" --seed 5 --resume
one_line "$T/err"
contains "$T/err" "skipped_steps 'x1' is not a count"

# --- a diverging run stops at the step, the checkpoint before it is kept
expect 1 fit --lr 1e6 --epochs 3 --checkpoint-dir "$T/nan" --checkpoint-every 1
contains "$T/err" "loss is"
contains "$T/err" "at step"
exists "$T/nan/checkpoint.safetensors"
bad_step=$(sed -n 's/.*at step \([0-9]*\).*/\1/p' "$T/err")
kept_step=$(python3 -c 'import json,struct,sys; d=open(sys.argv[1],"rb").read(); n=struct.unpack("<Q",d[:8])[0]; print(json.loads(d[8:8+n])["__metadata__"]["step"])' "$T/nan/checkpoint.safetensors")
same "$kept_step" "$((bad_step - 1))" "checkpoint kept from the step before the NaN"

# --- N ranks = 1 rank on the same global batch ---------------------------
if have_mpi; then
  common=(--train "$tr" --val "$va" --model resnet18 --size 16 --threads 1 --max-steps 3 --no-lr-scaling --lr 0.05 --quiet)
  expect 0 "$IMSHARD_TRAIN" "${common[@]}" --batch-size 8 --freeze-bn --checkpoint-dir "$T/r1"
  expect 0 mpi -np 2 "$IMSHARD_TRAIN" "${common[@]}" --batch-size 4 --freeze-bn --checkpoint-dir "$T/r2"
  expect 0 cmp_st "$T/r1/checkpoint.safetensors" "$T/r2/checkpoint.safetensors" --rtol 1e-5
  expect 0 cmp_st "$T/r1/checkpoint.safetensors" "$T/r2/checkpoint.safetensors" --rtol 1e-5 --prefix optim.
  # dropout (convnet7): each rank draws its samples' masks from their
  # places in the global batch, so the ranks drop what one rank would
  drop=(--train "$tr" --val "$va" --model convnet7 --size 16 --threads 1 --max-steps 3 --no-lr-scaling --lr 0.05 --quiet --freeze-bn)
  expect 0 "$IMSHARD_TRAIN" "${drop[@]}" --batch-size 8 --checkpoint-dir "$T/d1"
  expect 0 mpi -np 2 "$IMSHARD_TRAIN" "${drop[@]}" --batch-size 4 --checkpoint-dir "$T/d2"
  expect 0 cmp_st "$T/d1/checkpoint.safetensors" "$T/d2/checkpoint.safetensors" --rtol 1e-5
  expect 0 cmp_st "$T/d1/checkpoint.safetensors" "$T/d2/checkpoint.safetensors" --rtol 1e-5 --prefix optim.
  # per-rank batch statistics: not the same computation (the check can fail)
  expect 0 "$IMSHARD_TRAIN" "${common[@]}" --batch-size 8 --checkpoint-dir "$T/b1"
  expect 0 mpi -np 2 "$IMSHARD_TRAIN" "${common[@]}" --batch-size 4 --checkpoint-dir "$T/b2"
  expect 1 cmp_st "$T/b1/checkpoint.safetensors" "$T/b2/checkpoint.safetensors" --rtol 1e-5
  # gradients summed in many small buckets while backward runs (resnet18
  # has 11M parameters: 40 MiB in 0.25 MiB buckets) = one allreduce of
  # everything after it (a single 1024 MiB bucket): the same bits
  expect 0 mpi -np 2 "$IMSHARD_TRAIN" "${common[@]}" --batch-size 4 --freeze-bn --bucket-mb 0.25 --checkpoint-dir "$T/k1"
  expect 0 mpi -np 2 "$IMSHARD_TRAIN" "${common[@]}" --batch-size 4 --freeze-bn --bucket-mb 1024 --checkpoint-dir "$T/k2"
  expect 0 cmp_st "$T/k1/checkpoint.safetensors" "$T/k2/checkpoint.safetensors" --rtol 0
  expect 0 cmp_st "$T/k1/checkpoint.safetensors" "$T/k2/checkpoint.safetensors" --rtol 0 --prefix optim.
  expect 2 fit --bucket-mb 0
  one_line "$T/err"
fi
finish
