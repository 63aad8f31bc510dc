#!/usr/bin/env bash
# scripts/gpu-check.sh without a GPU: whatever nvidia-smi says (missing,
# no driver, no device), one line and exit 1 before anything is built;
# bad usage exits 2. With a GPU listed but no driver (a fake nvidia-smi):
# --only runs the groups named alone, on the build there, each failing
# with the trainer's line. (With a GPU the script is the check itself.)
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1
check="$IMS_SRC/scripts/gpu-check.sh"
fake="$T/bin"
mkdir -p "$fake"
no_gpu_line="gpu-check: no GPU: nvidia-smi lists none (this check needs a CUDA GPU and its driver)"

# --help names every option, with the folders' defaults and where a
# relative one is taken from
expect 0 bash "$check" --help
for o in "--build DIR" "--out DIR" "--only GROUPS" "--skip GROUPS" "--no-bench" "-h, --help" \
  "build folder (default build-gpu" "relative to the repository root" "relative to the current folder"; do
  contains "$T/out" "$o"
done
expect 2 bash "$check" --bogus
contains "$T/err" "unknown argument '--bogus'"
expect 2 bash "$check" --build
contains "$T/err" "--build needs a folder"
expect 2 bash "$check" --only
contains "$T/err" "--only needs a list of groups (build,gpu-tests,models,resume,graphs,errors,ranks,python,bench)"
expect 2 bash "$check" --only ,
contains "$T/err" "--only needs a list of groups (build,gpu-tests,models,resume,graphs,errors,ranks,python,bench)"
expect 2 bash "$check" --only models,bogus
contains "$T/err" "unknown group 'bogus' in --only"
expect 2 bash "$check" --only models --no-bench
contains "$T/err" "--only and --skip (or --no-bench) do not go together"
expect 2 bash "$check" --skip build,gpu-tests,models,resume,graphs,errors,ranks,python,bench
contains "$T/err" "--skip leaves no group to run"
expect 2 bash "$check" --skip build --build "$T/nobuild"
contains "$T/err" "no CUDA build in $T/nobuild to use without the build group"
absent "$T/nobuild"

# nvidia-smi missing: a PATH holding only what the script's first lines need
for tool in bash grep dirname sed cat timeout; do ln -sf "$(command -v $tool)" "$fake/$tool"; done
expect 1 env PATH="$fake" bash "$check" --build "$T/b0"
same "$(cat "$T/err")" "$no_gpu_line" "(no nvidia-smi)"
absent "$T/b0"
absent "$T/b0.configure.log"
# nvidia-smi without a driver, and with a driver but no device
printf '#!/bin/sh\necho "NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver." >&2\nexit 9\n' >"$fake/nvidia-smi"
chmod +x "$fake/nvidia-smi"
expect 1 env PATH="$fake" bash "$check" --build "$T/b1"
same "$(cat "$T/err")" "$no_gpu_line" "(no driver)"
absent "$T/b1"
printf '#!/bin/sh\necho "No devices were found"\nexit 6\n' >"$fake/nvidia-smi"
expect 1 env PATH="$fake:$PATH" bash "$check" --build "$T/b2"
same "$(cat "$T/err")" "$no_gpu_line" "(no device)"
absent "$T/b2"
# a hung driver: nvidia-smi never answers (before: gpu-check waited with it)
printf '#!/bin/sh\nexec sleep 30\n' >"$fake/nvidia-smi"
expect 1 timeout 60 env NVIDIA_SMI_TIMEOUT=2 PATH="$fake:$PATH" bash "$check" --build "$T/b3"
same "$(cat "$T/err")" "gpu-check: nvidia-smi did not answer within 2 s (a hung driver?): nothing checked" "(nvidia-smi hung)"
absent "$T/b3"

# one GPU listed, no driver: the groups asked for run on the build there
# (no build group: nothing built), each check failing with its line
printf '#!/bin/sh\ncase "$1" in -L) echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)" ;; *) echo "0, NVIDIA H100 80GB HBM3, 81559 MiB, 580.65.06" ;; esac\n' >"$fake/nvidia-smi"

# a stand-in CUDA build (its configure log says so; its imshard-train
# fails as on a machine without a driver, after FAKE_SLEEP seconds), so
# that what follows needs neither CUDA nor a GPU
fb="$T/fb"
mkdir -p "$fb/tools"
echo "-- imshard: CUDA backend ON" >"$fb.configure.log"
printf '#!/bin/sh\n[ "$1" != sample ] || mkdir -p "$2"\n' >"$fb/tools/imshard"
printf '#!/bin/sh\nsleep "${FAKE_SLEEP:-0}"\necho "imshard: cannot use --device cuda: no NVIDIA driver" >&2\nexit 1\n' >"$fb/tools/imshard-train"
chmod +x "$fb/tools/imshard" "$fb/tools/imshard-train"
# --out naming a folder of other things: the checks' logs and data
# (data/, build.log, ...) would replace what is there under those names.
# Refused before anything runs, as is a file; an earlier gpu-check's
# folder (its results.tsv) or an empty one is used
mkdir -p "$T/mine/data"
echo keep >"$T/mine/data/notes.txt"
expect 2 env PATH="$fake:$PATH" bash "$check" --build "$fb" --out "$T/mine" --only errors
same "$(cat "$T/err")" "gpu-check: --out '$T/mine' holds files of its own (not an earlier gpu-check's results.tsv), which the checks' logs and data could replace: name a new or empty folder" "(--out a folder of other things)"
same "$(cat "$T/mine/data/notes.txt")" keep "(its files kept)"
absent "$T/mine/results.tsv"
touch "$T/ofile"
expect 2 env PATH="$fake:$PATH" bash "$check" --build "$fb" --out "$T/ofile" --only errors
same "$(cat "$T/err")" "gpu-check: --out '$T/ofile' is not a folder" "(--out a file)"
mkdir "$T/o0"
expect 1 env PATH="$fake:$PATH" bash "$check" --build "$fb" --out "$T/o0" --only errors
contains "$T/err" "gpu-check: 0 passed, 2 failed, 0 not run; results in $T/o0/results.tsv"
expect 1 env PATH="$fake:$PATH" bash "$check" --build "$fb" --out "$T/o0" --only errors
contains "$T/err" "gpu-check: 0 passed, 2 failed, 0 not run; results in $T/o0/results.tsv"
# the bench group hands run.sh its folders as they are, a quote in them
# too, and keeps its sample data in --out, not where a DATA of the
# environment (or run.sh's default in /tmp) says (run.sh then stops on
# the stand-in's empty sample data)
expect 1 env PATH="$fake:$PATH" DATA="$T/bdata" bash "$check" --build "$fb" --out "$T/it's" --only bench
exists "$T/it's/bench_bf16/runs.tsv"
same "$(grep '^bench_bf16' "$T/it's/results.tsv" | cut -f4)" "run.sh: no packed splits in '$T/it's/bench-data/packed'" "(bench with a quote in --out)"
absent "$T/bdata"
# run.sh's settings come from the bench group's table alone: ones the
# environment holds (for another tool, or left from a bench session) do
# not change the check, nor send its results elsewhere
expect 1 env PATH="$fake:$PATH" BATCH=0 ONLY=bogus RESULTS="$T/elsewhere.json" bash "$check" --build "$fb" --out "$T/it's" --only bench
same "$(grep '^bench_bf16' "$T/it's/results.tsv" | cut -f4)" "run.sh: no packed splits in '$T/it's/bench-data/packed'" "(bench with run.sh's settings in the environment)"
absent "$T/elsewhere.json"

# the python group: not run (said why) where python3's torch sees no
# CUDA device, as here; nothing built
mkdir "$T/op"
expect 0 env PATH="$fake:$PATH" bash "$check" --build "$fb" --out "$T/op" --only python
same "$(grep -v '^#' "$T/op/results.tsv" | cut -f1,2,4)" "python	not-run	python3's torch does not import, or sees no CUDA device" "(python group without torch on a GPU)"
absent "$T/op/python"

# --build as a shell completes it, with a trailing slash: the same build
# (its configure log beside it, not in it)
expect 1 env PATH="$fake:$PATH" bash "$check" --build "$fb/" --out "$T/o0" --only errors
contains "$T/err" "gpu-check: 0 passed, 2 failed, 0 not run; results in $T/o0/results.tsv"

# a whole run ends its results.tsv with the tally; one interrupted
# (Ctrl-C: SIGINT to its process group, here in a session of its own with
# SIGINT's default action) says so there and on stderr, exits 130, and
# never looks whole
same "$(tail -n1 "$T/o0/results.tsv")" "# end: 0 passed, 2 failed, 0 not run" "(a whole run's last line)"
mkdir "$T/oi"
FAKE_SLEEP=2 PATH="$fake:$PATH" setsid env --default-signal=INT bash "$check" --build "$fb" --out "$T/oi" --only errors >"$T/oi.out" 2>"$T/oi.err" &
pid=$!
for _ in $(seq 1 150); do
  grep -q '^nan_stop' "$T/oi/results.tsv" 2>/dev/null && break
  sleep 0.1
done
sleep 0.5
kill -INT -- -"$pid"
wait "$pid"
same "$?" 130 "(exit status of an interrupted run)"
same "$(grep -v '^#' "$T/oi/results.tsv" | cut -f1 | tr '\n' ' ')" "nan_stop " "(the checks that finished)"
same "$(tail -n1 "$T/oi/results.tsv")" "# interrupted by SIGINT in the errors group: the check it ran and the groups after it did not finish" "(an interrupted run's last line)"
lacks "$T/oi/results.tsv" "# end:"
same "$(tail -n1 "$T/oi.err")" "gpu-check: interrupted by SIGINT in the errors group after 0 passed, 1 failed, 0 not run; results in $T/oi/results.tsv are not a whole run" "(what an interrupted run says)"

build=$(dirname "$(dirname "$IMSHARD")")
if grep -q 'CUDA backend ON' "$build.configure.log" 2>/dev/null; then
  res="$T/o/results.tsv"
  had_dir=$([ -e "$build/gpu-check" ] && echo 1 || echo 0)
  expect 1 env PATH="$fake:$PATH" bash "$check" --build "$build" --out "$T/o" --only errors,resume
  contains "$T/err" "gpu-check: 0 passed, 4 failed, 0 not run; results in $res"
  contains "$res" "# groups resume errors"
  contains "$res" "# gpu 0, NVIDIA H100 80GB HBM3, 81559 MiB, 580.65.06"
  same "$(grep -v '^#' "$res" | cut -f1,2 | tr '\t\n' ': ')" "resume_fp32:fail resume_fp16:fail nan_stop:fail fp16_overflow:fail " "(checks run)"
  for c in resume_fp32 resume_fp16 fp16_overflow; do
    same "$(grep "^$c	" "$res" | cut -f4)" "imshard: cannot use --device cuda: no NVIDIA driver is installed (cudaErrorInsufficientDriver); use --device cpu" "($c's line)"
  done
  exists "$T/o/data/packed/train.json"
  exists "$T/o/resume_fp32.full.log"
  absent "$T/o/build.log"
  absent "$T/o/ctest-gpu.log"
  same "$([ -e "$build/gpu-check" ] && echo 1 || echo 0)" "$had_dir" "(nothing written in the build folder)"
  # a group run again: its own logs replaced, the others' kept
  echo stale >"$T/o/nan_stop.stale"
  expect 1 env PATH="$fake:$PATH" bash "$check" --build "$build" --out "$T/o" --only errors
  same "$(grep -v '^#' "$res" | cut -f1 | tr '\n' ' ')" "nan_stop fp16_overflow " "(errors again)"
  absent "$T/o/nan_stop.stale"
  exists "$T/o/resume_fp32.full.log"
  # one GPU: the multirank tests (a GPU per rank) are left out and said
  # so, not failed by their refusal
  expect 1 env PATH="$fake:$PATH" bash "$check" --build "$build" --out "$T/o" --only gpu-tests
  same "$(grep '^ctest_multirank	' "$res" | cut -f2,4 | tr '\t' '|')" "not-run|the multirank tests need a GPU per rank (2); this machine has 1" "(multirank tests with one GPU)"
  lacks "$T/o/ctest-gpu.log" "test_nccl_np2"
  contains "$T/o/ctest-gpu.log" "test_backend_cuda"
else
  echo "cli_gpu_check: $build has no CUDA build (scripts/build.sh makes one where the toolkit is): --only on a build not checked"
fi
finish
