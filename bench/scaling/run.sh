#!/usr/bin/env bash
# bench/scaling/run.sh - the scaling benchmark as a report: imshard-train
# (convnet7, CPU, 1 thread per rank, or DEVICE=cuda: a GPU per rank) on
# the sample data at world sizes 1 and 2 and at two batch sizes per
# rank, the same epochs (so the same images) for every run, then
# `imshard report` over the runs: speedup and efficiency both ways (at
# the same batch per rank and at the same global batch), why they
# differ, time to a target accuracy, accuracy against batch and world
# size. Rounds are interleaved (even rounds in reverse
# order); each round gets its own report, and the table at the end gives
# every round's figures.
#
#     bench/scaling/run.sh
#     ROUNDS=3 bench/scaling/run.sh
#
# Builds nothing: build imshard and imshard-train first. Settings come from
# the environment (defaults in brackets; relative paths are taken from the
# repository root):
#   IMSHARD        imshard binary [build/tools/imshard]
#   IMSHARD_TRAIN  imshard-train binary [build/tools/imshard-train]
#   DATA           sample images and packed splits, made when absent [/tmp/imshard-bench-scaling-data]
#   PER_CLASS      sample images per class, 10 classes, 20% held out [100]
#   MODEL, SIZE    model and input side [convnet7, 32]
#   EPOCHS         epochs of every run [4]
#   BATCHES        batch sizes per rank [16 32]
#   WORLDS         world sizes [1 2]
#   LR32           learning rate per 32 images of global batch; each run
#                  gets --lr LR32 x batch / 32 per rank, and imshard-train's
#                  linear scaling multiplies by the world size, so the peak
#                  rate follows the global batch [0.05]
#   LOG_EVERY      metrics interval in steps [5]
#   TARGET         --target-acc of the report [0.6]
#   DEVICE         cpu: --threads 1 per rank; cuda: --device cuda, one GPU
#                  per rank (a machine with as many GPUs as the largest
#                  world size) [cpu]
#   EXTRA          more imshard-train flags for every run, e.g. on GPUs
#                  "--precision bf16 --cuda-graphs on" []
#   ROUNDS         interleaved rounds [1]
#   MPIRUN         launcher [mpirun]
#   MPI_PIN        1: one core per rank (the 1-rank runs under taskset -c 0,
#                  the 2 ranks with --bind-to core), 0: nothing pinned [0]
#   WORK           logs, reports and CSV: new, empty or an earlier run's
#                  [/tmp/imshard-bench-scaling-work]
#   PYTHON         interpreter for summarize.py (standard library only) [/usr/bin/python3]
#
# Output: WORK/rN/<run>/ (each run's --log-dir), WORK/rN/report.html and
# WORK/rN/csv/ (that round's report), WORK/report.html (the last round's),
# and the table on stdout (progress on stderr), headed by the command that
# made it (every setting spelt out) and the file of each run's command
# line (WORK/commands.txt).
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
bench_args "$@"

IMSHARD=$(abspath "${IMSHARD:-build/tools/imshard}")
IMSHARD_TRAIN=$(abspath "${IMSHARD_TRAIN:-build/tools/imshard-train}")
DATA=$(abspath "${DATA:-/tmp/imshard-bench-scaling-data}")
PER_CLASS=${PER_CLASS:-100}
MODEL=${MODEL:-convnet7}
SIZE=${SIZE:-32}
EPOCHS=${EPOCHS:-4}
BATCHES=${BATCHES:-16 32}
WORLDS=${WORLDS:-1 2}
LR32=${LR32:-0.05}
LOG_EVERY=${LOG_EVERY:-5}
TARGET=${TARGET:-0.6}
DEVICE=${DEVICE:-cpu}
EXTRA=${EXTRA:-}
ROUNDS=${ROUNDS:-1}
MPIRUN=${MPIRUN:-mpirun}
MPI_PIN=${MPI_PIN:-0}
WORK=$(abspath "${WORK:-/tmp/imshard-bench-scaling-work}")
PYTHON=${PYTHON:-/usr/bin/python3}

bench_need_count PER_CLASS SIZE EPOCHS BATCHES WORLDS LOG_EVERY ROUNDS
bench_need_flag MPI_PIN
bench_need_number LR32 TARGET
case "$DEVICE" in
cpu) per_rank=(--threads 1) ;;
cuda) per_rank=(--device cuda) ;;
*) die "DEVICE must be cpu or cuda, got '$DEVICE'" ;;
esac
# shellcheck disable=SC2206 # EXTRA is a list of flags
per_rank+=($EXTRA)
bench_own_work commands.txt
bench_need_bin "$IMSHARD" imshard "build it or set IMSHARD"
bench_need_bin "$IMSHARD_TRAIN" imshard-train "build it or set IMSHARD_TRAIN"
# shellcheck disable=SC2086 # WORLDS is a list
bench_mpi_setup WORLDS=1 $WORLDS

# --- data -----------------------------------------------------------------------
bench_sample_data ".data-pc$PER_CLASS" "$PER_CLASS"
echo "run.sh: $(grep -c . "$DATA/packed/train.lst") training and $(grep -c . "$DATA/packed/val.lst") validation images in '$DATA/packed'" >&2

# --- runs -------------------------------------------------------------------------
runs=()
for b in $BATCHES; do
	for w in $WORLDS; do runs+=("w${w}_b$b"); done
done

# train NAME LOGDIR: one run, named w<world>_b<batch per rank>.
train() {
	local name=$1 logdir=$2 w b lr
	w=${name#w}
	w=${w%%_*}
	b=${name##*_b}
	lr=$(awk -v l="$LR32" -v b="$b" 'BEGIN { printf "%.6g", l * b / 32 }')
	local launch
	bench_ranks "$w"
	local cmd=("${launch[@]}" "$IMSHARD_TRAIN" --train "$train_json" --val "$val_json" --model "$MODEL"
		--size "$SIZE" --epochs "$EPOCHS" --batch-size "$b" --lr "$lr" "${per_rank[@]}"
		--log-every "$LOG_EVERY" --log-dir "$logdir" --quiet)
	printf '%s\n' "${cmd[*]}" >>"$WORK/commands.txt"
	rm -rf "$logdir"
	"${cmd[@]}" >"$logdir.log" 2>&1 || { cat "$logdir.log" >&2; die "$name failed"; }
}

mkdir -p "$WORK"
rm -rf "${WORK:?}"/r[0-9]*
: >"$WORK/commands.txt"
echo "run.sh: load average $(cut -d' ' -f1-3 /proc/loadavg); runs: ${runs[*]}" >&2
for ((r = 1; r <= ROUNDS; r++)); do
	bench_order "$r" "${runs[@]}"
	mkdir -p "$WORK/r$r"
	for name in "${order[@]}"; do
		echo "run.sh: round $r: $name" >&2
		train "$name" "$WORK/r$r/$name"
	done
	dirs=()
	for name in "${runs[@]}"; do dirs+=("$WORK/r$r/$name"); done
	"$IMSHARD" report "${dirs[@]}" -o "$WORK/r$r/report.html" --csv "$WORK/r$r/csv" \
		--target-acc "$TARGET" --title "imshard scaling: $MODEL on the sample data ($DEVICE${EXTRA:+ $EXTRA}), round $r" \
		>"$WORK/r$r/report.txt"
	cp "$WORK/r$r/report.html" "$WORK/report.html"
done

cmdline=$(printf '%q ' env IMSHARD="$IMSHARD" IMSHARD_TRAIN="$IMSHARD_TRAIN" DATA="$DATA" \
	PER_CLASS="$PER_CLASS" MODEL="$MODEL" SIZE="$SIZE" EPOCHS="$EPOCHS" BATCHES="$BATCHES" \
	WORLDS="$WORLDS" LR32="$LR32" LOG_EVERY="$LOG_EVERY" TARGET="$TARGET" DEVICE="$DEVICE" \
	EXTRA="$EXTRA" ROUNDS="$ROUNDS" MPIRUN="$MPIRUN" MPI_PIN="$MPI_PIN" WORK="$WORK" bench/scaling/run.sh)
META_COMMAND=${cmdline% } "$PYTHON" "$here/summarize.py" "$WORK" "$ROUNDS"
echo "run.sh: reports in $WORK/r*/report.html (the last also as $WORK/report.html)" >&2
