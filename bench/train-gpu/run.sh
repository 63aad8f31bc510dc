#!/usr/bin/env bash
# bench/train-gpu/run.sh - imshard-train --device cuda against PyTorch on
# one GPU: images/s and GPU memory for resnet50 and resnet18 (224x224 by
# default), imshard from synthetic input (--synthetic) and from packed
# shards (its loader), PyTorch (torchvision, channels_last, cudnn.benchmark,
# SGD momentum, same batch), each in every precision of PRECISIONS: fp32
# (TF32 off on both sides), tf32 (fp32 with TF32 on) and bf16 (imshard's
# --precision bf16, PyTorch's autocast), interleaved round by round; each
# imshard row's ratio is printed against PyTorch in the same precision.
#
#     bench/train-gpu/run.sh
#     MODELS='resnet50:224' BATCH=128 ROUNDS=3 bench/train-gpu/run.sh
#
# Fails at once with one line where no GPU is present (nvidia-smi lists
# none, or does not answer within NVIDIA_SMI_TIMEOUT seconds [120]: a
# hung driver) or imshard-train cannot train on it (a build without the CUDA
# backend, a driver too old), and exits 1 at the end where every run of
# a contender failed (its results.json written all the same). Builds
# nothing: build imshard and imshard-train first. Settings come from the
# environment (defaults in
# brackets; relative paths are taken from the repository root):
#   IMSHARD        imshard binary [build/tools/imshard]
#   IMSHARD_TRAIN  imshard-train binary [build/tools/imshard-train]
#   MODELS         model:size list (convnet7 too) [resnet50:224 resnet18:224]
#   BATCH          batch size, every contender [64]
#   PRECISIONS     fp32, tf32, bf16 (both sides), fp16, bf16-nchw,
#                  bf16-nograph or tf32-nchw (imshard only: fp16,
#                  bf16-nchw and bf16-nograph compared with torch's bf16,
#                  tf32-nchw with its tf32; bf16-nchw and tf32-nchw are
#                  bf16 and tf32 with --channels-last off, bf16-nograph
#                  bf16 with --cuda-graphs off) [fp32 tf32 bf16]
#   STEPS          imshard steps per run (--max-steps) [30]
#   LOG_EVERY      metrics interval; rates come from the intervals after
#                  the first (warm-up) one [5]
#   WARMUP         steps of one run before round 1 that is not recorded
#                  (synthetic input, the first model and precision): a
#                  fresh machine's first run is slower, and the first
#                  contender of round 1 would carry that alone; 0: none
#                  [STEPS]
#   ROUNDS         interleaved rounds; even rounds run the contenders in
#                  reverse order (ABBA) [3]
#   THREADS        loader threads of imshard-train (--threads) [all cores]
#   DATA           sample images and packed splits, made when absent
#                  [/tmp/imshard-bench-train-gpu-data]
#   PER_CLASS      sample images per class, 10 classes; the training split
#                  (80%) must hold STEPS x BATCH images [300]
#   ONLY           run only these contenders (names as in the results,
#                  e.g. 'resnet50_bf16_syn torch_resnet50_bf16')
#   TORCH          auto: torch contenders when torch imports with a GPU;
#                  0: none [auto]
#   TORCH_PYTHON   interpreter for torch [python3]
#   TORCH_SECONDS  timed seconds per torch run, after 5 warm-up steps [5]
#   WORK           scratch folder for logs and results: new, empty or an
#                  earlier run's [/tmp/imshard-bench-train-gpu-work]
#   RESULTS        JSON written at the end [$WORK/results.json]
#   PYTHON         interpreter for summarize.py (standard library only) [/usr/bin/python3]
#   PROFILE        after the rounds, one synthetic run per model and
#                  precision with --profile 5 (where the step's time goes,
#                  layer by layer), its table in $WORK/profile-*.txt, and
#                  torch_gpu.py --profile 5's (PyTorch's device time by op
#                  kind) in $WORK/profile-torch-*.txt; 0: none [1]
#   KERNELS        1: after that, per model and precision, Nsight Compute
#                  (ncu, on PATH) times every kernel of 4 synthetic steps
#                  of imshard-train and 5 of torch_gpu.py, and kernels.py
#                  prints ms per step by kernel family side by side
#                  (steps after the warm-up ones; $WORK/kernels-*.txt,
#                  the CSVs beside them); slow: a few minutes a model [0]
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
bench_args "$@"

IMSHARD=$(abspath "${IMSHARD:-build/tools/imshard}")
IMSHARD_TRAIN=$(abspath "${IMSHARD_TRAIN:-build/tools/imshard-train}")
MODELS=${MODELS:-resnet50:224 resnet18:224}
BATCH=${BATCH:-64}
PRECISIONS=${PRECISIONS:-fp32 tf32 bf16}
STEPS=${STEPS:-30}
LOG_EVERY=${LOG_EVERY:-5}
WARMUP=${WARMUP:-$STEPS}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-$(nproc)}
DATA=$(abspath "${DATA:-/tmp/imshard-bench-train-gpu-data}")
PER_CLASS=${PER_CLASS:-300}
ONLY=${ONLY:-}
TORCH=${TORCH:-auto}
TORCH_PYTHON=${TORCH_PYTHON:-python3}
TORCH_SECONDS=${TORCH_SECONDS:-5}
WORK=$(abspath "${WORK:-/tmp/imshard-bench-train-gpu-work}")
RESULTS=$(abspath "${RESULTS:-$WORK/results.json}")
PYTHON=${PYTHON:-/usr/bin/python3}
PROFILE=${PROFILE:-1}
KERNELS=${KERNELS:-0}

bench_need_count BATCH STEPS LOG_EVERY ROUNDS THREADS PER_CLASS TORCH_SECONDS
bench_need_whole WARMUP
bench_need_flag PROFILE KERNELS
for m in $MODELS; do
	[[ $m =~ ^[A-Za-z0-9_]+:[1-9][0-9]*$ ]] || die "MODELS holds model:size words (resnet50:224), got '$m'"
done
bench_own_work runs.tsv
bench_need_bin "$IMSHARD" imshard "build it or set IMSHARD"
bench_need_bin "$IMSHARD_TRAIN" imshard-train "build it or set IMSHARD_TRAIN"
case "$TORCH" in auto | 0) ;; *) die "TORCH must be auto or 0, got '$TORCH'" ;; esac
for p in $PRECISIONS; do
	case "$p" in fp32 | tf32 | bf16 | fp16 | bf16-nchw | bf16-nograph | tf32-nchw) ;; *) die "PRECISIONS may hold fp32, tf32, bf16, fp16, bf16-nchw, bf16-nograph and tf32-nchw, got '$p'" ;; esac
done
# imshard-train's flags for a precision
prec_flags() {
	case "$1" in
	fp32) echo --precision fp32 --tf32 off ;;
	tf32) echo --precision fp32 --tf32 on ;;
	bf16-nchw) echo --precision bf16 --channels-last off ;;
	bf16-nograph) echo --precision bf16 --cuda-graphs off ;;
	tf32-nchw) echo --precision fp32 --tf32 on --channels-last off ;;
	*) echo --precision "$1" ;;
	esac
}
first_prec=${PRECISIONS%% *}

# --- a GPU, or one line ------------------------------------------------------
smi_wait=${NVIDIA_SMI_TIMEOUT:-120}
smi_rc=0
smi_list=$(timeout "$smi_wait" nvidia-smi -L 2>/dev/null) || smi_rc=$?
[ "$smi_rc" != 124 ] || die "nvidia-smi did not answer within $smi_wait s (a hung driver?)"
printf '%s\n' "$smi_list" | grep -q '^GPU ' ||
	die "no GPU: nvidia-smi lists none (bench/train-gpu needs a CUDA GPU; bench/train measures the CPU)"
gpu_name=$(timeout "$smi_wait" nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -n1)

mkdir -p "$WORK/logs"
rm -rf "${WORK:?}/logs"/*
runs="$WORK/runs.tsv"
printf '# round\tcontender\twall_s\trc\tlog\tlogdir\n' >"$runs"

# --- data ---------------------------------------------------------------------
bench_sample_data ".data-pc$PER_CLASS" "$PER_CLASS" --per-class-val 4
n_train=$(grep -c . "$DATA/packed/train.lst")
[ $((STEPS * BATCH)) -le "$n_train" ] ||
	die "$STEPS steps of batch $BATCH need more than the $n_train training images (raise PER_CLASS)"

# imshard-train must train on the GPU with this data: its error line
# otherwise (notes of imshard-train may come first), whatever the cause
probe="$WORK/logs/probe"
"$IMSHARD_TRAIN" --train "$train_json" --val "$val_json" --model convnet7 --size 32 \
	--batch-size 8 --max-steps 1 --device cuda $(prec_flags "$first_prec") --quiet \
	>"$probe.out" 2>"$probe.err" || {
	why=$(grep -m1 '^imshard: ' "$probe.err") || why=$(tail -n1 "$probe.err")
	die "a one-step probe (convnet7, --device cuda, DATA's splits) failed: ${why:-imshard-train exited with no word}"
}

torch_ok=0
if [ "$TORCH" = auto ]; then
	if "$TORCH_PYTHON" -c 'import torch, torchvision, sys; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
		torch_ok=1
	else
		echo "run.sh: torch with a GPU (and torchvision) does not import with '$TORCH_PYTHON': torch contenders skipped" >&2
	fi
fi

# --- contenders -----------------------------------------------------------------
# NAME: <model>_<prec>_syn | <model>_<prec>_loader | torch_<model>_<prec>
size_of() { local m; for m in $MODELS; do [ "${m%%:*}" != "$1" ] || echo "${m#*:}"; done; }
set_cmd() {
	local name=$1 logdir=$2 model size
	case "$name" in
	torch_*)
		model=${name#torch_}; model=${model%_*}; size=$(size_of "$model")
		# fp16 has no torch row of its own: run.sh adds none
		cmd=("$TORCH_PYTHON" "$here/torch_gpu.py" --model "$model" --size "$size"
			--batch "$BATCH" --precision "${name##*_}" --warmup 5 --steps 10
			--seconds "$TORCH_SECONDS") ;;
	*_syn | *_loader)
		local prec
		model=${name%_*}; prec=${model##*_}; model=${model%_*}; size=$(size_of "$model")
		# shellcheck disable=SC2046
		cmd=("$IMSHARD_TRAIN" --train "$train_json" --val "$val_json" --device cuda
			--model "$model" --size "$size" --batch-size "$BATCH" --lr 0.01 --epochs 1
			$(prec_flags "$prec")
			--threads "$THREADS" --max-steps "$STEPS" --log-every "$LOG_EVERY"
			--log-dir "$logdir" --quiet)
		[ "${name##*_}" = syn ] && cmd+=(--synthetic)
		return 0 ;;
	*) die "unknown contender '$name'" ;;
	esac
}

contenders=()
for m in $MODELS; do
	model=${m%%:*}
	for p in $PRECISIONS; do
		contenders+=("${model}_${p}_syn" "${model}_${p}_loader")
		[ "$torch_ok" = 1 ] && [ "$p" != fp16 ] && [ "$p" != bf16-nchw ] && [ "$p" != bf16-nograph ] && [ "$p" != tf32-nchw ] &&
			contenders+=("torch_${model}_${p}")
	done
done
bench_only

echo "run.sh: $gpu_name; $n_train training images; contenders: ${contenders[*]}" >&2
# --- warm-up: a run nobody is timed by ------------------------------------------
# On a fresh H200 the first contender of round 1 (resnet50 bf16, synthetic
# input) trained at 2711 images/s, the same model from the loader right
# after it at 3830, and 3666 was its median over three later rounds
if [ "$WARMUP" -gt 0 ]; then
	first_model=${MODELS%% *}
	# shellcheck disable=SC2046
	cmd=("$IMSHARD_TRAIN" --train "$train_json" --device cuda --model "${first_model%%:*}"
		--size "${first_model#*:}" --batch-size "$BATCH" --lr 0.01 --epochs 1
		$(prec_flags "$first_prec") --threads "$THREADS" --max-steps "$WARMUP"
		--synthetic --quiet)
	printf 'warm-up: %s\n' "${cmd[*]}" >>"$WORK/logs/commands.txt"
	echo "run.sh: warm-up, not recorded: ${first_model%%:*} $first_prec, $WARMUP steps" >&2
	"${cmd[@]}" >"$WORK/logs/warmup.log" 2>&1 ||
		echo "run.sh: the warm-up run failed (the rounds go on): $(tail -n1 "$WORK/logs/warmup.log")" >&2
fi
for ((r = 1; r <= ROUNDS; r++)); do
	echo "run.sh: round $r of $ROUNDS" >&2
	bench_order "$r" "${contenders[@]}"
	for c in "${order[@]}"; do
		log="$WORK/logs/$r-$c.log"
		logdir="$WORK/logs/$r-$c.d"
		set_cmd "$c" "$logdir"
		printf '%s %s: %s\n' "$r" "$c" "${cmd[*]}" >>"$WORK/logs/commands.txt"
		rc=0
		t0=$EPOCHREALTIME
		"${cmd[@]}" >"$log" 2>"$log.err" || rc=$?
		t1=$EPOCHREALTIME
		wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
		printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$c" "$wall" "$rc" "$log" "$logdir" >>"$runs"
		[ "$rc" = 0 ] || { echo "run.sh: $r/$c failed (exit $rc):" >&2; tail -n3 "$log.err" >&2; }
		printf '  %-26s %8.2f s  %s\n' "$c" "$wall" "$(tr '\n' ' ' <"$log" | cut -c1-90)" >&2
	done
done

# --- where the time goes: one profiled run per model and precision ----------------
if [ "$PROFILE" = 1 ]; then
	for m in $MODELS; do
		model=${m%%:*}
		for p in $PRECISIONS; do
			out="$WORK/profile-$model-$p.txt"
			# shellcheck disable=SC2046
			if "$IMSHARD_TRAIN" --train "$train_json" --device cuda --model "$model" \
				--size "${m#*:}" --batch-size "$BATCH" --lr 0.01 --epochs 1 \
				$(prec_flags "$p") --threads "$THREADS" --max-steps 7 --synthetic \
				--profile 5 --quiet >"$out" 2>"$out.err"; then
				echo "run.sh: $model $p, --profile 5:" >&2
				grep -v '^validation\|^no validation' "$out" >&2 || true
			else
				echo "run.sh: profiling $model $p failed: $(head -n1 "$out.err")" >&2
			fi
			# PyTorch's device time by op kind, the same table's shape
			[ "$torch_ok" = 1 ] && [ "$p" != fp16 ] && [ "$p" != bf16-nchw ] && [ "$p" != bf16-nograph ] && [ "$p" != tf32-nchw ] || continue
			out="$WORK/profile-torch-$model-$p.txt"
			if "$TORCH_PYTHON" "$here/torch_gpu.py" --model "$model" --size "${m#*:}" \
				--batch "$BATCH" --precision "$p" --warmup 5 --steps 5 --profile 5 \
				>"$out" 2>"$out.err"; then
				echo "run.sh: torch $model $p:" >&2
				grep -v '^model=' "$out" >&2 || true
			else
				echo "run.sh: profiling torch $model $p failed: $(tail -n1 "$out.err")" >&2
			fi
		done
	done
fi

# --- kernel by kernel: ncu's time of every kernel, by family ----------------------
if [ "$KERNELS" = 1 ] && ! command -v ncu >/dev/null; then
	echo "run.sh: KERNELS=1 needs ncu (Nsight Compute) on PATH; skipped" >&2
elif [ "$KERNELS" = 1 ]; then
	ncu_time=(ncu --metrics gpu__time_duration.sum --csv --print-units base
		--clock-control none)
	for m in $MODELS; do
		model=${m%%:*}
		for p in $PRECISIONS; do
			ki="$WORK/kernels-$model-$p.csv"
			kt=-
			# shellcheck disable=SC2046
			if ! "${ncu_time[@]}" --log-file "$ki" "$IMSHARD_TRAIN" --train "$train_json" \
				--device cuda --model "$model" --size "${m#*:}" --batch-size "$BATCH" \
				--lr 0.01 --epochs 1 $(prec_flags "$p") --threads "$THREADS" \
				--max-steps 4 --synthetic --quiet >"$ki.out" 2>&1; then
				echo "run.sh: ncu over imshard $model $p failed: $(tail -n1 "$ki.out")" >&2
				continue
			fi
			if [ "$torch_ok" = 1 ] && [ "$p" != fp16 ] && [ "$p" != bf16-nchw ] && [ "$p" != bf16-nograph ] && [ "$p" != tf32-nchw ]; then
				kt="$WORK/kernels-torch-$model-$p.csv"
				"${ncu_time[@]}" --log-file "$kt" "$TORCH_PYTHON" "$here/torch_gpu.py" \
					--model "$model" --size "${m#*:}" --batch "$BATCH" --precision "$p" \
					--warmup 2 --steps 3 >"$kt.out" 2>&1 || {
					echo "run.sh: ncu over torch $model $p failed: $(tail -n1 "$kt.out")" >&2
					kt=-
				}
			fi
			if "$PYTHON" "$here/kernels.py" "$ki" "$kt" >"$WORK/kernels-$model-$p.txt"; then
				echo "run.sh: $model $p, device time by kernel family:" >&2
				cat "$WORK/kernels-$model-$p.txt" >&2
			fi
		done
	done
fi

version=$("$IMSHARD" --version 2>&1 | head -n1)
META_GPU="$gpu_name" META_VERSION="$version" META_BATCH="$BATCH" META_ROUNDS="$ROUNDS" \
META_PRECISIONS="$PRECISIONS" \
META_MODELS="$MODELS" META_STEPS="$STEPS" META_LOG_EVERY="$LOG_EVERY" \
META_CPU="$(grep -m1 '^model name' /proc/cpuinfo 2>/dev/null | sed 's/^[^:]*: *//'), $(nproc) cores" \
META_LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" \
	"$PYTHON" "$here/summarize.py" "$runs" "$RESULTS"
