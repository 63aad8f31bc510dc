#!/usr/bin/env bash
# bench/train/run.sh - the training benchmark: imshard-train on the CPU for
# convnet7 at 32x32 and resnet18 at 112x112 with 1 and 2 threads (images/s
# and the step split: data wait, compute, communication), the model FLOP
# rate as a fraction of OpenBLAS's own sgemm rate on the same threads
# (measured by model_flops in the same round), PyTorch on the same model,
# batch and threads where torch imports, and 2-rank MPI scaling (1 thread
# per rank, against 1 rank of 1 thread on the same global work),
# interleaved round by round.
#
#     bench/train/run.sh
#     CORETYPE=SkylakeX bench/train/run.sh      # OpenBLAS's AVX-512 kernels
#
# Builds nothing: build imshard, imshard-train and model_flops first (see
# bench/train/README.md). Settings come from the environment (defaults in
# brackets; relative paths are taken from the repository root):
#   IMSHARD        imshard binary [build/tools/imshard]
#   IMSHARD_TRAIN  imshard-train binary [build/tools/imshard-train]
#   MODEL_FLOPS    model_flops binary [build/bench/model_flops]
#   DATA           sample images and packed splits, made when absent
#                  [/tmp/imshard-bench-train-data-pcPER_CLASS]
#   PER_CLASS      sample images per class, 10 classes (80% train) [1000]
#   VAL_PER_CLASS  validation images per class (of the 20% held out) [6]
#   ONLY           run only these contenders, e.g. 'mpi_np1 mpi_np2' (names
#                  as in the results; default all)
#   ROUNDS         interleaved rounds; even rounds run the contenders in
#                  reverse order (ABBA), so drift does not favour one [3]
#   BATCH          batch size per rank, every contender [32]
#   C7_STEPS, C7_LOG_EVERY    convnet7 (--size 32) steps and metrics interval [25, 5]
#   R18_STEPS, R18_LOG_EVERY  resnet18 (--size 112) steps and metrics interval [8, 2]
#                  rates and the step split come from the metrics intervals
#                  after the first (warm-up) one
#   SGEMM_N        sgemm side: C = A B, all N x N [2048]
#   SGEMM_SECONDS  sgemm timing per run [2]
#   MPI            1: run the MPI pair (and mpi_indep: two independent
#                  1-rank runs of the 2-rank run's per-rank work at once,
#                  the machine's ceiling for the pair), 0: skip them [1]
#   MPI_MODEL, MPI_SIZE  model and input side of the MPI pair [convnet7, 32]
#   MPI_STEPS      steps of the 2-rank run; the 1-rank run does twice as
#                  many of the same per-rank batch (equal global work);
#                  runs of 20 steps measured 0.72-0.74 where 100 gave
#                  0.92-0.94 minutes apart (their first ~20 steps are
#                  slower, and the shorter run has more of them in its
#                  steady intervals) [100]
#   MPI_LOG_EVERY  metrics interval of the MPI pair [10]
#   BUCKET_MB      --bucket-mb of the 2-rank run: gradients summed in
#                  buckets of this many MiB as backward finishes them;
#                  empty: the trainer's default (one bucket on the CPU) []
#   BUCKET_MB_ALT  when set, one more contender, mpi_np2_alt: the 2-rank
#                  run again with --bucket-mb BUCKET_MB_ALT, interleaved
#                  with the others, so two bucket sizes are compared in
#                  one run (e.g. 1024: one bucket, summed after backward) []
#   MPIRUN         launcher [mpirun]
#   MPI_PIN        1: one core per rank: the 1-rank run under taskset -c 0,
#                  the 2 ranks with --bind-to core, so each rank's loader
#                  threads share its core (the 1-rank run cannot borrow
#                  the idle second core for its decoding, which made an
#                  unpinned baseline a 1-rank run on 2 cores: its
#                  ceiling with the loader was 0.83); 0: nothing
#                  pinned [1]
#   INPUT          loader: imshard-train reads and decodes the packed
#                  split (its loader threads share the cores); synthetic:
#                  --synthetic, one fixed random batch per rank, nothing
#                  decoded, as torch_step.py's input [loader]
#   PRIO           N: every contender runs under chrt -f N (real-time
#                  FIFO priority; needs root), and those with one thread
#                  (the _t1 contenders) under taskset -c 1 as well, so
#                  that other work on a shared machine cannot preempt
#                  them; empty: normal priority, nothing pinned []
#   CORETYPE       OPENBLAS_CORETYPE for every contender, e.g. SkylakeX;
#                  empty: OpenBLAS's own choice (Prescott on this CPU) []
#   TORCH          auto: PyTorch contenders when torch imports, 1: also
#                  pip-install torch and torchvision into TORCH_LIB first
#                  when it does not, 0: none [auto]
#   TORCH_PYTHON   interpreter for torch [python3]
#   TORCH_LIB      pip --target folder, added to PYTHONPATH when present [/tmp/imshard-torchlib]
#   TORCH_SECONDS  timed seconds per torch run (after 2 warm-up steps, at
#                  least 3 steps) [4]
#   WORK           scratch folder for logs and results [/tmp/imshard-bench-train-work]
#   RESULTS        JSON written at the end [$WORK/results.json]
#   PYTHON         interpreter for summarize.py (standard library only) [/usr/bin/python3]
#
# Every run is timed by GNU time (-f '%e %M %U %S': peak RSS KiB, CPU
# seconds; for the MPI run the CPU of mpirun and both ranks, and the
# largest single process's peak RSS, not the sum);
# bash's clock around the whole run is logged as wall_s. The CPU the rest
# of the machine burnt meanwhile (from /proc/stat) is logged as bg_cores.
# A run that fails is named as it goes and left out of every figure; the
# run exits 1 at the end, RESULTS written, where every run of a contender
# failed.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
bench_args "$@"

IMSHARD=$(abspath "${IMSHARD:-build/tools/imshard}")
IMSHARD_TRAIN=$(abspath "${IMSHARD_TRAIN:-build/tools/imshard-train}")
MODEL_FLOPS=$(abspath "${MODEL_FLOPS:-build/bench/model_flops}")
PER_CLASS=${PER_CLASS:-1000}
DATA=$(abspath "${DATA:-/tmp/imshard-bench-train-data-pc$PER_CLASS}")
VAL_PER_CLASS=${VAL_PER_CLASS:-6}
ONLY=${ONLY:-}
ROUNDS=${ROUNDS:-3}
BATCH=${BATCH:-32}
C7_STEPS=${C7_STEPS:-25}
C7_LOG_EVERY=${C7_LOG_EVERY:-5}
R18_STEPS=${R18_STEPS:-8}
R18_LOG_EVERY=${R18_LOG_EVERY:-2}
SGEMM_N=${SGEMM_N:-2048}
SGEMM_SECONDS=${SGEMM_SECONDS:-2}
MPI=${MPI:-1}
MPI_MODEL=${MPI_MODEL:-convnet7}
MPI_SIZE=${MPI_SIZE:-32}
MPI_STEPS=${MPI_STEPS:-100}
MPI_LOG_EVERY=${MPI_LOG_EVERY:-10}
MPIRUN=${MPIRUN:-mpirun}
MPI_PIN=${MPI_PIN:-1}
BUCKET_MB=${BUCKET_MB:-}
BUCKET_MB_ALT=${BUCKET_MB_ALT:-}
INPUT=${INPUT:-loader}
case "$INPUT" in loader | synthetic) ;; *) echo "run.sh: INPUT must be loader or synthetic, got '$INPUT'" >&2; exit 2 ;; esac
CORETYPE=${CORETYPE:-}
PRIO=${PRIO:-}
case "$PRIO" in "" | [1-9] | [1-9][0-9]) ;; *) echo "run.sh: PRIO must be empty or 1-99, got '$PRIO'" >&2; exit 2 ;; esac
TORCH=${TORCH:-auto}
TORCH_PYTHON=${TORCH_PYTHON:-python3}
TORCH_LIB=$(abspath "${TORCH_LIB:-/tmp/imshard-torchlib}")
TORCH_SECONDS=${TORCH_SECONDS:-4}
WORK=$(abspath "${WORK:-/tmp/imshard-bench-train-work}")
RESULTS=$(abspath "${RESULTS:-$WORK/results.json}")
PYTHON=${PYTHON:-/usr/bin/python3}
bench_need_count PER_CLASS VAL_PER_CLASS ROUNDS BATCH C7_STEPS C7_LOG_EVERY R18_STEPS \
	R18_LOG_EVERY SGEMM_N MPI_SIZE MPI_STEPS MPI_LOG_EVERY
bench_need_number SGEMM_SECONDS TORCH_SECONDS
bench_need_number_or_empty BUCKET_MB BUCKET_MB_ALT
bench_need_flag MPI MPI_PIN

# --- setup ------------------------------------------------------------------
bench_gnu_time
bench_need_bin "$IMSHARD" imshard "build it or set IMSHARD"
bench_need_bin "$IMSHARD_TRAIN" imshard-train "build it or set IMSHARD_TRAIN"
bench_need_bin "$MODEL_FLOPS" model_flops "cmake --build build --target model_flops, or set MODEL_FLOPS"
case "$TORCH" in auto | 0 | 1) ;; *) die "TORCH must be auto, 0 or 1, got '$TORCH'" ;; esac
[ "$MPI" = 1 ] && bench_mpi_setup MPI=0 2
if [ -n "$CORETYPE" ]; then
	export OPENBLAS_CORETYPE=$CORETYPE
else
	unset OPENBLAS_CORETYPE
fi
mkdir -p "$WORK/logs"
rm -rf "${WORK:?}/logs"/*

# --- data -------------------------------------------------------------------
# The sample images are 64-400 px a side; the loader resizes them to --size.
bench_sample_data ".data-pc$PER_CLASS-val$VAL_PER_CLASS" "$PER_CLASS" --per-class-val "$VAL_PER_CLASS"
n_train=$(grep -c . "$DATA/packed/train.lst")
n_val=$(grep -c . "$DATA/packed/val.lst")
steps_per_epoch=$((n_train / BATCH))
echo "run.sh: $n_train training and $n_val validation images in '$DATA/packed'" >&2

# --- torch ------------------------------------------------------------------
torch_env=(env)
[ -d "$TORCH_LIB" ] && torch_env=(env PYTHONPATH="$TORCH_LIB${PYTHONPATH:+:$PYTHONPATH}")
torch_ok() { "${torch_env[@]}" "$TORCH_PYTHON" -c 'import torch' >/dev/null 2>&1; }
torch_version=""
if [ "$TORCH" != 0 ]; then
	if ! torch_ok && [ "$TORCH" = 1 ]; then
		echo "run.sh: installing torch and torchvision into '$TORCH_LIB' (pip)" >&2
		"$TORCH_PYTHON" -m pip install --quiet --target "$TORCH_LIB" torch torchvision \
			--index-url https://download.pytorch.org/whl/cpu >&2 ||
			"$TORCH_PYTHON" -m pip install --quiet --target "$TORCH_LIB" torch torchvision >&2 ||
			echo "run.sh: pip could not install torch" >&2
		torch_env=(env PYTHONPATH="$TORCH_LIB${PYTHONPATH:+:$PYTHONPATH}")
	fi
	if torch_ok; then
		torch_version=$("${torch_env[@]}" "$TORCH_PYTHON" -c 'import torch; print(torch.__version__)' 2>/dev/null)
		echo "run.sh: PyTorch $torch_version found: torch contenders on" >&2
	else
		echo "run.sh: PyTorch does not import with '$TORCH_PYTHON' (TORCH=1 installs it into TORCH_LIB): torch contenders skipped" >&2
	fi
fi

# --- model FLOPs --------------------------------------------------------------
flops_txt="$WORK/model_flops.txt"
models=(convnet7:32 resnet18:112)
[ "$MPI" = 1 ] && models+=("$MPI_MODEL:$MPI_SIZE")
"$MODEL_FLOPS" "${models[@]}" >"$flops_txt" || die "model_flops failed"

# --- contenders ---------------------------------------------------------------
# train ARGS...: imshard-train on the packed splits with the common flags.
# --lr only has to keep the loss finite for a few steps: it does not change
# the work.
train_cmd() {
	cmd+=("$IMSHARD_TRAIN" --train "$train_json" --val "$val_json" --epochs 1
		--batch-size "$BATCH" --lr 0.01 "$@")
	[ "$INPUT" = synthetic ] && cmd+=(--synthetic)
	return 0
}
set_cmd() {
	local name=$1 logdir=$2
	cmd=()
	case "$name" in
	sgemm_t1 | sgemm_t2)
		cmd=("$MODEL_FLOPS" --sgemm-threads "${name#sgemm_t}" --n "$SGEMM_N" --seconds "$SGEMM_SECONDS") ;;
	convnet7_t1 | convnet7_t2)
		train_cmd --model convnet7 --size 32 --threads "${name#convnet7_t}" \
			--max-steps "$C7_STEPS" --log-every "$C7_LOG_EVERY" --log-dir "$logdir" ;;
	resnet18_t1 | resnet18_t2)
		train_cmd --model resnet18 --size 112 --threads "${name#resnet18_t}" \
			--max-steps "$R18_STEPS" --log-every "$R18_LOG_EVERY" --log-dir "$logdir" ;;
	torch_convnet7_t1 | torch_convnet7_t2 | torch_resnet18_t1 | torch_resnet18_t2)
		local t=${name##*_t} rest=${name#torch_} model size
		model=${rest%_t*}
		size=32
		[ "$model" = resnet18 ] && size=112
		cmd=("${torch_env[@]}" OMP_NUM_THREADS="$t" MKL_NUM_THREADS="$t"
			"$TORCH_PYTHON" "$here/torch_step.py" --model "$model" --size "$size"
			--batch "$BATCH" --threads "$t" --warmup 2 --steps 3 --seconds "$TORCH_SECONDS") ;;
	mpi_np1)
		bench_ranks 1
		cmd=("${launch[@]}")
		train_cmd --model "$MPI_MODEL" --size "$MPI_SIZE" --threads 1 \
			--max-steps $((2 * MPI_STEPS)) --log-every "$MPI_LOG_EVERY" --log-dir "$logdir" ;;
	mpi_np2 | mpi_np2_alt)
		local mb=$BUCKET_MB
		[ "$name" = mpi_np2_alt ] && mb=$BUCKET_MB_ALT
		# unpinned, each rank's loader thread may use whatever core is free
		bench_ranks 2
		cmd=("${launch[@]}")
		train_cmd --model "$MPI_MODEL" --size "$MPI_SIZE" --threads 1 \
			--max-steps "$MPI_STEPS" --log-every "$MPI_LOG_EVERY" --log-dir "$logdir"
		if [ -n "$mb" ]; then cmd+=(--bucket-mb "$mb"); fi ;;
	mpi_indep)
		# Two independent single-rank runs at once, each the 2-rank run's
		# per-rank work, no communication: what two compute streams on
		# the two cores can do at all (the ceiling of any data-parallel
		# efficiency on this machine).
		local a=() b=()
		train_cmd --model "$MPI_MODEL" --size "$MPI_SIZE" --threads 1 \
			--max-steps "$MPI_STEPS" --log-every "$MPI_LOG_EVERY"
		a=("${cmd[@]}" --log-dir "$logdir")
		b=("${cmd[@]}" --log-dir "$logdir.b")
		if [ "$MPI_PIN" = 1 ]; then
			a=(taskset -c 0 "${a[@]}")
			b=(taskset -c 1 "${b[@]}")
		fi
		cmd=(bash -c '"${@:2:$1}" & p=$!; "${@:$(($1 + 2))}"; r=$?; wait $p && exit $r' \
			pair "${#a[@]}" "${a[@]}" "${b[@]}") ;;
	*) die "unknown contender '$name'" ;;
	esac
}

runs="$WORK/runs.tsv"
printf '# round\tcontender\twall_s\tmaxrss_kib\trc\tcpu_s\tbg_cores\tlog\tlogdir\n' >"$runs"

# measure ROUND NAME: one contender under GNU time; a row in runs.tsv.
measure() {
	local round=$1 name=$2
	local log="$WORK/logs/$round-$name.log" tf="$WORK/logs/$round-$name.time"
	local logdir="$WORK/logs/$round-$name.d"
	set_cmd "$name" "$logdir"
	bench_prio "$name"
	printf '%s %s: %s\n' "$round" "$name" "${cmd[*]}" >>"$WORK/logs/commands.txt"
	local rc wall rss cpu bg
	bench_timed "$log" "$log.err" "$tf" "${cmd[@]}"
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$name" "$wall" "$rss" "$rc" "$cpu" "$bg" "$log" "$logdir" >>"$runs"
	if [ "$rc" -ne 0 ]; then
		echo "run.sh: $round/$name failed (exit $rc); last lines of $log.err:" >&2
		tail -n5 "$log.err" >&2
	fi
	printf '  %-18s %7.2f s wall %7.1f MiB  bg %4s cores  %s\n' "$name" "$wall" \
		"$(awk -v k="$rss" 'BEGIN { print k / 1024 }')" "$bg" \
		"$(tr '\n' ' ' <"$log" | cut -c1-100)" >&2
}

contenders=()
for t in 1 2; do
	contenders+=("sgemm_t$t" "convnet7_t$t")
	[ -n "$torch_version" ] && contenders+=("torch_convnet7_t$t")
	contenders+=("resnet18_t$t")
	[ -n "$torch_version" ] && contenders+=("torch_resnet18_t$t")
done
if [ "$MPI" = 1 ]; then
	contenders+=(mpi_np1 mpi_np2)
	[ -n "$BUCKET_MB_ALT" ] && contenders+=(mpi_np2_alt)
	contenders+=(mpi_indep)
fi
bench_only
# each trainer that runs gets its steps from one epoch (MPI_STEPS matter
# only where an MPI contender runs)
for c in "${contenders[@]}"; do
	case "$c" in
	convnet7_t*) s=$C7_STEPS ;;
	resnet18_t*) s=$R18_STEPS ;;
	mpi_*) s=$((2 * MPI_STEPS)) ;;
	*) continue ;;
	esac
	[ "$s" -le "$steps_per_epoch" ] ||
		die "$c: $s steps of batch $BATCH need more than the $n_train training images (raise PER_CLASS)"
done

echo "run.sh: load average $(cut -d' ' -f1-3 /proc/loadavg); OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(unset)}" >&2
for ((r = 1; r <= ROUNDS; r++)); do
	echo "run.sh: round $r of $ROUNDS" >&2
	bench_order "$r" "${contenders[@]}"
	for c in "${order[@]}"; do
		measure "$r" "$c"
	done
done

# --- report -------------------------------------------------------------------
version=$("$IMSHARD" --version 2>&1 | head -n1)
cmdline=$(printf '%q ' env IMSHARD="$IMSHARD" IMSHARD_TRAIN="$IMSHARD_TRAIN" MODEL_FLOPS="$MODEL_FLOPS" \
	DATA="$DATA" PER_CLASS="$PER_CLASS" VAL_PER_CLASS="$VAL_PER_CLASS" ROUNDS="$ROUNDS" BATCH="$BATCH" \
	C7_STEPS="$C7_STEPS" C7_LOG_EVERY="$C7_LOG_EVERY" R18_STEPS="$R18_STEPS" R18_LOG_EVERY="$R18_LOG_EVERY" \
	SGEMM_N="$SGEMM_N" SGEMM_SECONDS="$SGEMM_SECONDS" MPI="$MPI" MPI_MODEL="$MPI_MODEL" MPI_SIZE="$MPI_SIZE" \
	MPI_STEPS="$MPI_STEPS" MPI_LOG_EVERY="$MPI_LOG_EVERY" MPI_PIN="$MPI_PIN" BUCKET_MB="$BUCKET_MB" BUCKET_MB_ALT="$BUCKET_MB_ALT" INPUT="$INPUT" CORETYPE="$CORETYPE" PRIO="$PRIO" TORCH="$TORCH" ONLY="$ONLY" \
	TORCH_SECONDS="$TORCH_SECONDS" TORCH_PYTHON="$TORCH_PYTHON" TORCH_LIB="$TORCH_LIB" MPIRUN="$MPIRUN" \
	WORK="$WORK" RESULTS="$RESULTS" bench/train/run.sh)
cmdline=${cmdline% }
commands=$(for c in "${contenders[@]}"; do
	set_cmd "$c" "LOGDIR"
	printf '%s\t%s\n' "$c" "${cmd[*]}"
done)
META_COMMAND=$cmdline META_VERSION="$version" META_ROUNDS="$ROUNDS" META_BATCH="$BATCH" \
META_TRAIN_IMAGES="$n_train" META_VAL_IMAGES="$n_val" META_CORETYPE="$CORETYPE" \
META_TORCH="$torch_version" META_INPUT="$INPUT" META_MPI_MODEL="$MPI_MODEL:$MPI_SIZE" META_MPI_STEPS="$MPI_STEPS" \
META_BUCKET_MB="$BUCKET_MB" META_BUCKET_MB_ALT="$BUCKET_MB_ALT" \
META_C7_LOG_EVERY="$C7_LOG_EVERY" META_R18_LOG_EVERY="$R18_LOG_EVERY" META_MPI_LOG_EVERY="$MPI_LOG_EVERY" \
META_COMMANDS="$commands" \
	"$PYTHON" "$here/summarize.py" "$runs" "$flops_txt" "$RESULTS"
