#!/usr/bin/env bash
# scripts/gpu-check.sh - everything about the CUDA backend that needs a
# GPU, in one command, on a machine with one (or more):
#
#   scripts/gpu-check.sh [--build DIR] [--out DIR] [--only GROUPS]
#                        [--skip GROUPS] [--no-bench]
#
#   --build DIR     the build folder (default build-gpu; a relative DIR is
#                   relative to the repository root, as for scripts/build.sh)
#   --out DIR       where results.tsv and the logs go (default DIR/gpu-check;
#                   a relative DIR is relative to the current folder)
#   --only GROUPS   run these groups alone
#   --skip GROUPS   run all groups but these
#   --no-bench      --skip bench
#   -h, --help      this text
#
# GROUPS is a comma-separated list of the numbered groups below (build,
# gpu-tests, models, resume, graphs, errors, ranks, python, bench: run in
# that order). Without the build group, --build DIR must already hold a CUDA
# build (made by scripts/build.sh or an earlier gpu-check), which is used
# as it is: a long check can so be run in parts, or one failing group
# again.
#
#  1. build        scripts/build.sh DIR -DIMSHARD_WITH_CUDA=ON (-Werror)
#  2. gpu-tests    ctest -L gpu with IMSHARD_REQUIRE_GPU=1: a skip fails
#  3. models       a short imshard-train --device cuda run of every model
#                  in fp32, bf16 and fp16; each must end 0 and write gpu
#                  lines (NVML) into metrics.jsonl
#  4. resume       a checkpoint written on the device, resumed there: the
#                  same tensors as the uninterrupted run
#  5. graphs       --cuda-graphs on and off: the same tensors
#  6. errors       a NaN batch stops the run with its line (under
#                  compute-sanitizer where there is one); an fp16 forward
#                  overflow is skipped with its statistics put back
#  7. ranks        two ranks through NCCL, one stopped (SIGSTOP) after it
#                  started: the other must end within --collective-timeout
#                  with its one line, with --cuda-graphs off and on; two
#                  ranks with the allreduce recorded (--cuda-graphs on)
#                  train the queued run's tensors. NCCL refuses two ranks
#                  on one GPU, so with one GPU this checks that refusal
#                  instead and the rest is reported "not run"
#  8. python       the Python package built into OUT/python (pip, with
#                  the machine's scikit-build-core), and imshard.torch's
#                  tests on the device with IMSHARD_REQUIRE_GPU=1
#                  (tests/python/test_torch_cuda.py: a non_blocking copy
#                  reads its own batch; test_torch.py, test_torch_fork.py);
#                  not run where python3's torch sees no CUDA device
#  9. bench        bench/train-gpu/run.sh: imshard against PyTorch (when
#                  torch with CUDA imports), its results.json kept; its
#                  sample data in OUT/bench-data, made once; run.sh's
#                  settings from the table below alone (TORCH_PYTHON and
#                  PYTHON from the environment)
#
# Writes results.tsv in --out (DIR/gpu-check by default; a new or empty
# folder, or one an earlier gpu-check wrote: one line per
# check run: name, pass, fail or not-run, seconds, detail; a header names
# the GPU, driver, commit and the groups run; the last line is the tally,
# "# end: ...", or "# interrupted by SIGINT ..." where a signal stopped
# the run part-way, which then exits 128 + the signal's number) with each check's logs
# beside it, prints a summary, and exits 0 when nothing failed, 1
# otherwise; a check run again replaces its own logs and leaves the
# others'. Without a GPU (nvidia-smi lists none) it exits 1 at once with
# one line, before building anything, as it does where nvidia-smi does
# not answer within NVIDIA_SMI_TIMEOUT seconds (120; a hung driver would
# otherwise hang the check); bad usage exits 2.
#
# Adding a run is one line: a model run in `model_runs` below, a bench
# setting in `bench_runs` (another batch size, say).
set -euo pipefail
export LC_ALL=C
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

usage() { echo "gpu-check: $*" >&2; exit 2; }
groups_all="build gpu-tests models resume graphs errors ranks python bench"
# groups LIST OPTION: LIST's names, space-separated, each one of groups_all
groups() {
  local g out=""
  [ -n "$1" ] || usage "$2 needs a list of groups ($(echo $groups_all | tr ' ' ,))"
  for g in $(echo "$1" | tr , ' '); do
    case " $groups_all " in
    *" $g "*) out="$out $g" ;;
    *) usage "unknown group '$g' in $2 (groups: $(echo $groups_all | tr ' ' ,))" ;;
    esac
  done
  [ -n "$out" ] || usage "$2 needs a list of groups ($(echo $groups_all | tr ' ' ,))"
  echo "$out"
}
build="build-gpu"
out=""
only=""
skip=""
while [ $# -gt 0 ]; do
  case "$1" in
  --build | --out | --only | --skip)
    [ $# -ge 2 ] || case "$1" in
      --build | --out) usage "$1 needs a folder" ;;
      *) usage "$1 needs a list of groups ($(echo $groups_all | tr ' ' ,))" ;;
      esac
    case "$1" in
    --build) build=$2 ;;
    --out) out=$2 ;;
    --only) only="$only $(groups "$2" "$1")" ;;
    --skip) skip="$skip $(groups "$2" "$1")" ;;
    esac
    shift 2
    ;;
  --no-bench) skip="$skip bench"; shift ;;
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) usage "unknown argument '$1' (see --help)" ;;
  esac
done
[ -z "$only" ] || [ -z "$skip" ] || usage "--only and --skip (or --no-bench) do not go together: name the groups to run"
run_groups=""
for g in $groups_all; do
  if [ -n "$only" ]; then
    case " $only " in *" $g "*) run_groups="$run_groups $g" ;; esac
  else
    case " $skip " in *" $g "*) ;; *) run_groups="$run_groups $g" ;; esac
  fi
done
[ -n "$run_groups" ] || usage "--skip leaves no group to run"
# want GROUP: GROUP is one of those this run runs
want() { case " $run_groups " in *" $1 "*) return 0 ;; esac; return 1; }
case "$build" in /*) ;; *) build="$repo/$build" ;; esac
# DIR/ as a shell completes it is DIR: its configure log is DIR.configure.log
while [ "${build%/}" != "$build" ] && [ "$build" != / ]; do build=${build%/}; done
[ -n "$out" ] || out="$build/gpu-check"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
# --out is the checks' own: each removes its logs and data there by name
# (data/, build.log, ...) before it runs, so a folder of other things is
# refused rather than have a "data" of its own replaced
if [ -e "$out" ]; then
  [ -d "$out" ] || usage "--out '$out' is not a folder"
  [ -z "$(ls -A "$out")" ] || head -n1 "$out/results.tsv" 2>/dev/null | grep -q '^# imshard gpu-check' ||
    usage "--out '$out' holds files of its own (not an earlier gpu-check's results.tsv), which the checks' logs and data could replace: name a new or empty folder"
fi
# without the build group, the folder must hold a CUDA build already
if ! want build; then
  grep -q 'CUDA backend ON' "$build.configure.log" 2>/dev/null && [ -x "$build/tools/imshard-train" ] ||
    usage "no CUDA build in $build to use without the build group (scripts/build.sh $build -DIMSHARD_WITH_CUDA=ON makes one)"
fi

# --- a GPU, or one line --------------------------------------------------------
smi_wait=${NVIDIA_SMI_TIMEOUT:-120}
smi_rc=0
smi_list=$(timeout "$smi_wait" nvidia-smi -L 2>/dev/null) || smi_rc=$?
[ "$smi_rc" != 124 ] || {
  echo "gpu-check: nvidia-smi did not answer within $smi_wait s (a hung driver?): nothing checked" >&2
  exit 1
}
gpus=$(printf '%s\n' "$smi_list" | grep -c '^GPU ' || true)
[ "${gpus:-0}" -gt 0 ] || {
  echo "gpu-check: no GPU: nvidia-smi lists none (this check needs a CUDA GPU and its driver)" >&2
  exit 1
}

# --- cuDNN and NCCL: the toolkit's, or PyTorch's wheels --------------------------
# A GPU machine with PyTorch from pip often has cuDNN and NCCL only as its
# wheels (nvidia-cudnn-cu13, nvidia-nccl-cu13): where the toolkit has no
# header of its own and no CUDNN_ROOT / NCCL_ROOT is set, the build is
# pointed at them (CMakeLists.txt takes their versioned library files)
wheel_root() {
  python3 -c 'import importlib, sys; print(list(importlib.import_module("nvidia." + sys.argv[1]).__path__)[0])' "$1" 2>/dev/null || true
}
cuda_inc=$(dirname "$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)")/../include
libs_from=""
for lib in cudnn nccl; do
  var=$(echo "$lib" | tr a-z A-Z)_ROOT
  [ -z "${!var:-}" ] && [ ! -e "$cuda_inc/$lib.h" ] && [ ! -e "/usr/include/$lib.h" ] || continue
  w=$(wheel_root "$lib")
  [ -n "$w" ] && [ -e "$w/include/$lib.h" ] || continue
  export "$var=$w"
  export LD_LIBRARY_PATH="$w/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  libs_from="$libs_from $lib from $w;"
done

# --- what each model run is: name|model|precision|extra imshard-train flags ----
model_runs=()
for m in convnet7 resnet18 resnet50 vgg16; do
  for p in fp32 bf16 fp16; do
    model_runs+=("${m}_$p|$m|$p|")
  done
done
# 16 bits run channels-last by default (all but vgg16): NCHW too
for m in convnet7 resnet18 resnet50; do
  model_runs+=("${m}_bf16_nchw|$m|bf16|--channels-last off")
done
model_runs+=("resnet50_fp32_tf32off|resnet50|fp32|--tf32 off")
# fp32 with TF32 runs channels-last by default: NCHW too; and a step of
# queued passes (no CUDA graphs)
model_runs+=("resnet50_fp32_nchw|resnet50|fp32|--channels-last off")
model_runs+=("resnet50_bf16_nograph|resnet50|bf16|--cuda-graphs off")

# --- bench/train-gpu settings: name|environment for run.sh ---------------------
bench_runs=(
  "bench_bf16|PRECISIONS='bf16 bf16-nograph bf16-nchw' MODELS='resnet50:224 resnet18:224' ROUNDS=1"
  "bench_fp32|PRECISIONS='fp32 tf32 tf32-nchw' MODELS='resnet50:224 resnet18:224' ROUNDS=1"
  "bench_kernels|PRECISIONS=bf16 MODELS='resnet50:224' ROUNDS=1 PROFILE=0 KERNELS=1"
)
# a setting run.sh learns is one more line here, e.g.
# "bench_b128|PRECISIONS=bf16 BATCH=128 MODELS='resnet50:224' ROUNDS=1"

mkdir -p "$out"
results="$out/results.tsv"
{
  echo "# imshard gpu-check, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "# groups$run_groups"
  echo "# commit $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$repo" diff --quiet 2>/dev/null || echo ' (modified)')"
  timeout "$smi_wait" nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader | sed 's/^/# gpu /'
  [ -z "$libs_from" ] || echo "# wheels:$libs_from"
  printf '# check\tstatus\tseconds\tdetail\n'
} >"$results"

# A run stopped part-way (Ctrl-C, the end of a session) says so as the
# last line of results.tsv, which is otherwise the tally ("# end: ..."):
# a file with neither was cut off harder (SIGKILL, a lost machine). The
# ranks group's mpirun and stopped rank go too (a background job does
# not get the terminal's SIGINT).
group=""
launcher=""
victim=""
exec {stderr}>&2 # the trap may run inside a check's redirection
stopped() {
  trap - INT TERM HUP
  [ -z "$launcher" ] || kill "$launcher" 2>/dev/null || true
  [ -z "$victim" ] || kill -KILL "$victim" 2>/dev/null || true
  echo "# interrupted by SIG$1${group:+ in the $group group}: the check it ran and the groups after it did not finish" >>"$results"
  echo "gpu-check: interrupted by SIG$1${group:+ in the $group group} after $passed passed, $failed failed, $notrun not run; results in $results are not a whole run" >&"$stderr"
  exit $((128 + $2))
}
trap 'stopped INT 2' INT
trap 'stopped TERM 15' TERM
trap 'stopped HUP 1' HUP

failed=0
passed=0
notrun=0
# record NAME STATUS SECONDS DETAIL
record() {
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$(printf '%s' "$4" | tr '\t\n' '  ' | cut -c1-300)" >>"$results"
  case "$2" in pass) passed=$((passed + 1)) ;; fail) failed=$((failed + 1)) ;; *) notrun=$((notrun + 1)) ;; esac
  printf 'gpu-check: %-28s %-7s %7ss  %s\n' "$1" "$2" "$3" "$(printf '%s' "$4" | head -c 120)" >&2
}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
# fresh NAME: the logs an earlier run of check NAME left, removed (never
# the whole folder: --out may name one that holds other things)
fresh() { rm -rf "${out:?}/$1" "${out:?}/$1".*; }
first_line() { grep -m1 -E "^(imshard|gpu-check|run.sh|CMake Error|FAIL|.*Error)" "$@" 2>/dev/null || tail -n1 "$1"; }

# --- 1. build --------------------------------------------------------------------
check_build() {
  t=$(now)
  fresh build
  if bash "$repo/scripts/build.sh" "$build" -DIMSHARD_WITH_CUDA=ON >"$out/build.log" 2>&1 &&
    grep -q 'CUDA backend ON' "$build.configure.log"; then
    record build pass "$(since "$t")" "$(grep -o 'imshard: MPI.*' "$build.configure.log" | head -1)"
  else
    record build fail "$(since "$t")" "$(first_line "$out/build.log")"
    echo "# end: the build failed; nothing else ran" >>"$results"
    echo "gpu-check: the build failed: nothing else can run (log: $out/build.log); results in $results" >&2
    exit 1
  fi
}
imshard="$build/tools/imshard"
train="$build/tools/imshard-train"

# --- 2. gpu-tests ------------------------------------------------------------------
# A build without NCCL (neither the toolkit nor a wheel has it) has no
# multi-rank device path to test: test_nccl would refuse as a skip, which
# IMSHARD_REQUIRE_GPU turns into a failure. It is left out and said so.
# (Without MPI, NCCL is built for one rank: test_nccl runs that.)
check_gpu_tests() {
  t=$(now)
  fresh ctest-gpu
  ctest_skip=()
  if ! grep -q 'NCCL ON' "$build.configure.log"; then
    ctest_skip=(-E '^test_nccl')
    record ctest_nccl not-run 0 "this build has no NCCL (set NCCL_ROOT, or install NCCL or PyTorch's nvidia-nccl wheel)"
  fi
  # the multirank tests put a rank on each GPU: with one GPU they refuse
  # (a skip, which IMSHARD_REQUIRE_GPU makes a failure) and say nothing
  # of the device path
  if [ "$gpus" -lt 2 ]; then
    ctest_skip+=(-LE multirank)
    record ctest_multirank not-run 0 "the multirank tests need a GPU per rank (2); this machine has $gpus"
  fi
  if (cd "$build" && IMSHARD_REQUIRE_GPU=1 ctest -L gpu "${ctest_skip[@]}" --output-on-failure) >"$out/ctest-gpu.log" 2>&1; then
    record ctest_gpu pass "$(since "$t")" "$(grep -m1 'tests passed' "$out/ctest-gpu.log")"
  else
    record ctest_gpu fail "$(since "$t")" "$(grep -m1 'tests passed' "$out/ctest-gpu.log"); failed: $(grep -E '^\s+[0-9]+ - ' "$out/ctest-gpu.log" | awk '{print $3}' | tr '\n' ' ')"
  fi
}

# --- data for the runs -------------------------------------------------------------
data="$out/data"
tr_json="$data/packed/train.json"
va_json="$data/packed/val.json"
make_data() {
  fresh data
  "$imshard" sample "$data/images" --classes 4 --per-class 40 --quiet >"$out/data.log" 2>&1 &&
    "$imshard" convert folder "$data/images" -o "$data/packed" --val-ratio 0.25 --seed 1 --quiet >>"$out/data.log" 2>&1 || {
    record data fail 0 "$(first_line "$out/data.log")"
    echo "# end: no data for the runs; nothing else ran" >>"$results"
    exit 1
  }
}
# --lr 0.01: these runs check the device's path, not convergence; at the
# default 0.1, resnet18 and resnet50 in fp16 diverged within 12 steps on
# an H100 and validation overflowed fp16's range (the run then stops)
fit() { "$train" --train "$tr_json" --val "$va_json" --device cuda --size 64 --batch-size 16 --lr 0.01 "$@"; }

# --- 3. every model in every precision ---------------------------------------------
check_models() {
  for spec in "${model_runs[@]}"; do
    IFS='|' read -r name model prec extra <<<"$spec"
    d="$out/$name"
    t=$(now)
    fresh "$name"
    # shellcheck disable=SC2086
    if fit --model "$model" --precision "$prec" --max-steps 12 --log-every 4 --log-dir "$d" $extra >"$d.out" 2>"$d.err"; then
      gpu_lines=$(grep -c '"type":"gpu"' "$d/metrics.jsonl" || true)
      rate=$(python3 -c 'import json,sys; print("%.1f images/s" % json.load(open(sys.argv[1]))["images_per_s"])' "$d/summary.json" 2>/dev/null || echo "no summary")
      if [ "${gpu_lines:-0}" -gt 0 ]; then
        record "$name" pass "$(since "$t")" "$rate, $gpu_lines gpu lines, skipped steps $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("skipped_steps"))' "$d/summary.json" 2>/dev/null)"
      else
        record "$name" fail "$(since "$t")" "no gpu lines in metrics.jsonl: $(grep -m1 'gpu lines' "$d.err" || echo 'NVML said nothing')"
      fi
    else
      record "$name" fail "$(since "$t")" "$(first_line "$d.err")"
    fi
  done
}

# --- 4. checkpoint and resume on the device ----------------------------------------
# deterministic algorithms: benchmarking again in the resumed process may
# choose others, whose sums round differently (seen on an H100 in fp32)
check_resume() {
  for prec in fp32 fp16; do
    t=$(now)
    d="$out/resume_$prec"
    fresh "resume_$prec"
    det=(--cudnn-algo deterministic)
    if fit --model resnet18 --precision "$prec" --epochs 2 --seed 5 "${det[@]}" --checkpoint-dir "$d/full" >"$d.full.log" 2>&1 &&
      fit --model resnet18 --precision "$prec" --epochs 2 --seed 5 "${det[@]}" --checkpoint-dir "$d/part" --max-steps 9 >"$d.part.log" 2>&1 &&
      fit --model resnet18 --precision "$prec" --epochs 2 --seed 5 "${det[@]}" --checkpoint-dir "$d/part" --resume >"$d.resume.log" 2>&1 &&
      grep -q 'resuming from' "$d.resume.log"; then
      if cmp_out=$(python3 "$repo/tests/cli/st_compare.py" "$d/full/checkpoint.safetensors" "$d/part/checkpoint.safetensors" --rtol 0); then
        record "resume_$prec" pass "$(since "$t")" "resumed at step 9: the uninterrupted run's tensors, bit for bit"
      else
        record "resume_$prec" fail "$(since "$t")" "resumed run differs from the uninterrupted one: $cmp_out"
      fi
    else
      record "resume_$prec" fail "$(since "$t")" "$(cat "$d".*.log | grep -m1 '^imshard' || echo 'no resume line')"
    fi
  done
}

# --- 5. graphs: replayed passes train the queued ones' bits --------------------
# graphs_check NAME PREC RUNNER...: resnet18 trained by RUNNER (a command
# taking imshard-train's flags) with --cuda-graphs on and off: replayed
# passes, and the same tensors bit for bit
graphs_check() {
  local name=$1 prec=$2 t d cmp_out="" replayed
  shift 2
  t=$(now)
  d="$out/$name"
  fresh "$name"
  local same=(--model resnet18 --precision "$prec" --epochs 2 --seed 5 --cudnn-algo deterministic --tf32 off)
  if "$@" "${same[@]}" --cuda-graphs on --checkpoint-dir "$d/on" --log-dir "$d/on" >"$d.on.log" 2>&1 &&
    "$@" "${same[@]}" --cuda-graphs off --checkpoint-dir "$d/off" >"$d.off.log" 2>&1; then
    replayed=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["cuda_graphs"]["replayed"])' "$d/on/summary.json" 2>/dev/null || echo 0)
    if [ "${replayed:-0}" -gt 0 ] &&
      cmp_out=$(python3 "$repo/tests/cli/st_compare.py" "$d/on/checkpoint.safetensors" "$d/off/checkpoint.safetensors" --rtol 0 --prefix ""); then
      record "$name" pass "$(since "$t")" "$replayed passes replayed: the queued run's tensors, bit for bit"
    else
      record "$name" fail "$(since "$t")" "replayed $replayed passes; ${cmp_out:-no comparison}"
    fi
  else
    record "$name" fail "$(since "$t")" "$(cat "$d".*.log | grep -m1 '^imshard' || echo 'no line')"
  fi
}
check_graphs() {
  for prec in fp32 bf16; do
    graphs_check "graphs_$prec" "$prec" fit
  done
}

# --- 6. errors: the device's error paths ---------------------------------------------------
# A NaN fed at step 4 (IMSHARD_INJECT_NAN_STEP: the batch poisoned before
# its copy is queued) stops the run with its one line, after a step that
# took the next batch ahead: the staging slots are freed, their copy
# stream synchronised, before the loader's pinned ring they copy from.
# Under compute-sanitizer's memcheck where the toolkit has it, so a
# device access to freed memory on that exit fails the check.
check_errors() {
  t=$(now)
  d="$out/nan_stop"
  fresh nan_stop
  sanitizer=()
  if command -v compute-sanitizer >/dev/null; then
    sanitizer=(compute-sanitizer --tool memcheck --error-exitcode 99)
  fi
  rc=0
  IMSHARD_INJECT_NAN_STEP=4 "${sanitizer[@]}" "$train" --train "$tr_json" --val "$va_json" --device cuda --size 64 \
    --batch-size 16 --lr 0.01 --model convnet7 --epochs 2 --quiet >"$d.log" 2>&1 || rc=$?
  if [ "$rc" = 1 ] && grep -q 'loss is NaN at step 4' "$d.log"; then
    record nan_stop pass "$(since "$t")" "stopped at step 4 with its line${sanitizer[*]:+, memcheck clean}"
  else
    record nan_stop fail "$(since "$t")" "exit $rc: $(first_line "$d.log")"
  fi
  # fp16: a forward pass that overflowed (a NaN batch at step 3) is skipped
  # and the scale halved, the batch-norm statistics it changed put back:
  # against the same run skipping step 3 for a gradient overflow
  # (IMSHARD_INJECT_INF_GRAD_STEP), the same weights, its own finite
  # statistics and the counters one batch behind
  t=$(now)
  d="$out/fp16_overflow"
  fresh fp16_overflow
  same=(--model resnet18 --precision fp16 --seed 9 --max-steps 6 --log-every 1 --cudnn-algo deterministic)
  if IMSHARD_INJECT_NAN_STEP=3 fit "${same[@]}" --checkpoint-dir "$d/fwd" --log-dir "$d/fwd" >"$d.fwd.log" 2>&1 &&
    IMSHARD_INJECT_INF_GRAD_STEP=3 fit "${same[@]}" --checkpoint-dir "$d/grad" >"$d.grad.log" 2>&1; then
    verdict=$(python3 "$repo/tests/cli/st_tool.py" overflow "$d/fwd/checkpoint.safetensors" "$d/grad/checkpoint.safetensors")
    skipped=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["skipped_steps"])' "$d/fwd/summary.json" 2>/dev/null || echo "?")
    if [ "$verdict" = "counter stat weight" ] && [ "$skipped" = 1 ] &&
      grep -q 'step 3: fp16 forward pass (loss not finite) overflowed' "$d.fwd.log"; then
      record fp16_overflow pass "$(since "$t")" "step 3 skipped, statistics put back: $verdict"
    else
      record fp16_overflow fail "$(since "$t")" "skipped $skipped; checkpoint against a gradient overflow: $verdict"
    fi
  else
    record fp16_overflow fail "$(since "$t")" "$(cat "$d".*.log | grep -m1 '^imshard' || echo 'no line')"
  fi
}

# --- 7. ranks: two ranks through NCCL, one of them stopped ---------------------------------
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
check_ranks() {
  t=$(now)
  if ! grep -q 'NCCL ON' "$build.configure.log" || ! command -v mpirun >/dev/null; then
    record nccl_ranks not-run 0 "this build has no NCCL or mpirun is missing: $(grep -o 'NCCL [A-Z]*[^;]*' "$build.configure.log" | head -1)"
  elif [ "$gpus" -lt 2 ]; then
    # one GPU: NCCL cannot hold two ranks on it; both must refuse at once
    fresh nccl
    if timeout 120 mpirun -np 2 "$train" --train "$tr_json" --val "$va_json" --device cuda --size 64 \
      --batch-size 16 --model convnet7 --max-steps 4 --quiet >"$out/nccl.log" 2>&1; then
      record nccl_one_gpu fail "$(since "$t")" "two ranks on one GPU trained: NCCL should have been refused"
    elif [ "$(grep -c 'would share one GPU' "$out/nccl.log")" -ge 1 ]; then
      record nccl_one_gpu pass "$(since "$t")" "two ranks on one GPU refused: $(grep -m1 'would share one GPU' "$out/nccl.log")"
    else
      record nccl_one_gpu fail "$(since "$t")" "$(first_line "$out/nccl.log")"
    fi
    record nccl_ranks not-run 0 "needs 2 GPUs (the timeout with graphs off and on, two ranks' graphs): NCCL refuses two ranks on one GPU (one visible)"
  else
    # rank 1 stopped (SIGSTOP) once both train: rank 0 must end by itself
    # within the timeout, with its line; queued passes (graphs off) and
    # replayed ones (on: the host waits after the replay)
    limit=20
    for g in off on; do
      t=$(now)
      d="$out/nccl_$g"
      fresh "nccl_$g"
      mkdir -p "$d"
      mpirun -np 2 "$train" --train "$tr_json" --val "$va_json" --device cuda --size 64 --batch-size 16 \
        --model resnet18 --epochs 50 --log-every 1 --log-dir "$d" --collective-timeout "$limit" --cuda-graphs "$g" \
        >"$d.out" 2>"$d.err" &
      launcher=$!
      # the ranks' processes: this session's imshard-train children, told
      # apart by the rank mpirun put in their environment
      victim=""
      survivor=""
      for _ in $(seq 1 600); do
        if [ -s "$d/metrics.jsonl" ] && [ "$(grep -c '"type":"train"' "$d/metrics.jsonl")" -ge 4 ]; then
          for pid in $(pgrep -s 0 -x imshard-train || true); do
            case "$(tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -m1 '^OMPI_COMM_WORLD_RANK=')" in
            *=1) victim=$pid ;;
            *=0) survivor=$pid ;;
            esac
          done
          break
        fi
        kill -0 "$launcher" 2>/dev/null || break
        sleep 0.2
      done
      if [ -z "$victim" ] || [ -z "$survivor" ]; then
        kill "$launcher" 2>/dev/null || true
        wait "$launcher" 2>/dev/null || true
        launcher=""
        record "nccl_timeout_graphs_$g" fail "$(since "$t")" "the two ranks did not start training: $(first_line "$d.err")"
        continue
      fi
      kill -STOP "$victim" 2>/dev/null || true
      t_stop=$(now)
      rc=0
      # the stopped rank is killed afterwards (a stopped process takes no
      # SIGTERM from mpirun)
      timeout $((limit + 60)) tail --pid="$survivor" -f /dev/null || rc=$?
      waited=$(since "$t_stop")
      kill -KILL "$victim" 2>/dev/null || true
      [ "$rc" = 0 ] || kill -KILL "$survivor" 2>/dev/null || true
      wait "$launcher" 2>/dev/null || true
      launcher="" victim=""
      if [ "$rc" != 0 ]; then
        record "nccl_timeout_graphs_$g" fail "$waited" "rank 0 still ran $((limit + 60)) s after rank 1 stopped (--collective-timeout $limit)"
      elif grep -qE "rank 0:? waited" "$d.err"; then
        # NCCL's poll (gradients) or MPI's watchdog (the step's statistics)
        record "nccl_timeout_graphs_$g" pass "$waited" "rank 0 ended ${waited} s after rank 1 stopped (--collective-timeout $limit): $(grep -m1 -E 'rank 0:? waited' "$d.err")"
      else
        record "nccl_timeout_graphs_$g" fail "$waited" "rank 0 ended without the timeout's line: $(first_line "$d.err")"
      fi
    done

    # two ranks, the allreduce recorded with backward and replayed: the
    # queued run's tensors, bit for bit
    fit2() { mpirun -np 2 "$train" --train "$tr_json" --val "$va_json" --device cuda --size 64 --batch-size 16 --lr 0.01 "$@"; }
    for prec in fp32 bf16; do
      graphs_check "nccl_graphs_$prec" "$prec" fit2
    done
  fi
}

# --- 8. python: imshard.torch on the device -------------------------------------------
check_python() {
  t=$(now)
  fresh python
  if ! python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
    record python not-run 0 "python3's torch does not import, or sees no CUDA device"
    return
  fi
  # pip builds in python/build (pyproject.toml's build-dir) and installs
  # into --out, never into the machine's site-packages
  if ! python3 -m pip install -q --no-build-isolation --no-deps --no-cache-dir \
    --target "$out/python" "$repo/python" >"$out/python.build.log" 2>&1; then
    record python fail "$(since "$t")" "the package did not build: $(grep -m1 -iE 'error' "$out/python.build.log" || tail -n1 "$out/python.build.log")"
    return
  fi
  if (cd "$repo" && PYTHONPATH="$out/python${PYTHONPATH:+:$PYTHONPATH}" IMSHARD_REQUIRE_GPU=1 \
    IMSHARD="$imshard" MAKE_IMAGES="$build/tests/fixtures/make_images" \
    python3 -m pytest -q -p no:cacheprovider tests/python/test_torch_cuda.py \
    tests/python/test_torch.py tests/python/test_torch_fork.py) >"$out/python.log" 2>&1; then
    record python pass "$(since "$t")" "$(tail -n1 "$out/python.log")"
  else
    record python fail "$(since "$t")" "$(grep -m1 '^FAILED' "$out/python.log" || tail -n1 "$out/python.log")"
  fi
}

# --- 9. bench: against PyTorch ---------------------------------------------------------------
check_bench() {
  for spec in "${bench_runs[@]}"; do
    IFS='|' read -r name envs <<<"$spec"
    t=$(now)
    fresh "$name"
    # only the setting's own words go through eval: the paths, which may
    # hold a quote, are passed as they are. The sample data stays in
    # --out (kept between runs: run.sh makes it once), not in run.sh's
    # default in /tmp or a DATA the environment holds for something else.
    # run.sh's other settings come from the line alone (BATCH, ONLY or
    # RESULTS left in the environment would change the check or send its
    # results elsewhere); the interpreters, TORCH_PYTHON and PYTHON, are
    # the machine's, and pass
    if (
      unset MODELS BATCH PRECISIONS STEPS LOG_EVERY WARMUP ROUNDS THREADS PER_CLASS ONLY TORCH \
        TORCH_SECONDS RESULTS PROFILE KERNELS
      eval "export $envs"
      IMSHARD=$imshard IMSHARD_TRAIN=$train WORK=$out/$name DATA=$out/bench-data \
        exec bash "$repo/bench/train-gpu/run.sh"
    ) >"$out/$name.log" 2>&1; then
      record "$name" pass "$(since "$t")" "$(grep -m1 -E 'resnet50' "$out/$name.log" || echo "see $out/$name/results.json")"
    else
      record "$name" fail "$(since "$t")" "$(first_line "$out/$name.log")"
    fi
  done
}

# --- the groups asked for, in order ------------------------------------------------
data_made=0
for g in $run_groups; do
  group=$g
  case "$g" in
  models | resume | graphs | errors | ranks) [ "$data_made" = 1 ] || { make_data; data_made=1; } ;;
  esac
  "check_${g//-/_}"
done

echo "# end: $passed passed, $failed failed, $notrun not run" >>"$results"
echo "gpu-check: $passed passed, $failed failed, $notrun not run; results in $results" >&2
[ "$failed" = 0 ]
