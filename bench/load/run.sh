#!/usr/bin/env bash
# bench/load/run.sh - the loader benchmark: `imshard bench-load` (training
# transform: random-resized-crop 224 + flip, NCHW fp32) with 1 and 2 threads
# against the naive floor (one-thread libjpeg-turbo full-size decode of the
# same files) and a Python baseline (PIL + numpy, one process and a pool of
# 2), on bench/pack's generated ImageNet-shaped corpus packed with
# --encoding keep, interleaved round by round.
#
#     bench/load/run.sh
#
# Builds nothing: build imshard and full_decode first (see bench/load/README.md).
# Settings come from the environment (defaults in brackets; relative paths
# are taken from the repository root):
#   IMSHARD      imshard binary [build/tools/imshard]
#   FULL_DECODE  full_decode binary [build/bench/full_decode]
#   CORPUS       corpus folder, generated when absent [/tmp/imshard-bench-corpus]
#   N_IMAGES     corpus size [3000]        SEED  corpus seed [1]
#   ROUNDS       interleaved rounds [5]
#   BATCH        batch size for the loader and the Python baseline [64]
#   SIZE         output side [224]
#   LOAD_ARGS    how long bench-load runs [--epochs 1 --seconds 0]; e.g. '--seconds 20'
#   PY_LIMIT     Python baselines on the first N list entries only, 0 = all [0]
#   WORK         scratch folder for list, packed split, logs, results [/tmp/imshard-bench-load-work]
#   RESULTS      JSON written at the end [$WORK/results.json]
#   PYTHON       interpreter with Pillow and numpy [/usr/bin/python3]
#
# Every run is timed by GNU time (-f '%e %M %U %S': peak RSS KiB, CPU
# seconds); the images/s compared are each contender's own figure (timed
# from its first image to its last, process and pool start-up excluded),
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
FULL_DECODE=$(abspath "${FULL_DECODE:-build/bench/full_decode}")
CORPUS=$(abspath "${CORPUS:-/tmp/imshard-bench-corpus}")
N_IMAGES=${N_IMAGES:-3000}
SEED=${SEED:-1}
ROUNDS=${ROUNDS:-5}
BATCH=${BATCH:-64}
SIZE=${SIZE:-224}
LOAD_ARGS=${LOAD_ARGS:---epochs 1 --seconds 0}
PY_LIMIT=${PY_LIMIT:-0}
WORK=$(abspath "${WORK:-/tmp/imshard-bench-load-work}")
RESULTS=$(abspath "${RESULTS:-$WORK/results.json}")
PYTHON=${PYTHON:-/usr/bin/python3}
bench_need_count N_IMAGES ROUNDS BATCH SIZE
bench_need_whole SEED PY_LIMIT
# WORK's logs/ and packed/ are emptied below: a folder of other things is
# refused (its mark, or an earlier run's list)
bench_own_work .bench-load corpus_train.lst

# --- setup ------------------------------------------------------------------
# GNU time, numpy and Pillow are installed here when missing (bench_install).
need_pkgs=()
{ [ -x "$TIME" ] && "$TIME" --version 2>&1 | grep -q GNU; } || need_pkgs+=(time)
"$PYTHON" -c 'import numpy' 2>/dev/null || need_pkgs+=(python3-numpy)
"$PYTHON" -c 'import PIL' 2>/dev/null || need_pkgs+=(python3-pil)
bench_install ${need_pkgs[@]+"${need_pkgs[@]}"}
bench_need_bin "$FULL_DECODE" full_decode "cmake --build build --target full_decode, or set FULL_DECODE"
bench_need_bin "$IMSHARD" imshard "build it or set IMSHARD"
"$IMSHARD" bench-load --help >/dev/null 2>&1 || die "'$IMSHARD' has no bench-load command"

bench_mark_work .bench-load
mkdir -p "$WORK/logs"
rm -rf "$WORK/logs"/*

# --- corpus -------------------------------------------------------------------
bench_corpus "$N_IMAGES" "$SEED"

# --- list and packed split --------------------------------------------------------
lst="$WORK/corpus_train.lst"
rm -f "$WORK"/corpus_*.lst "$WORK/corpus.classes"
"$IMSHARD" list "$CORPUS" -o "$WORK/corpus" --no-shuffle --quiet
[ -s "$lst" ] || die "no list at '$lst'"
rm -rf "$WORK/packed"
mkdir -p "$WORK/packed"
"$IMSHARD" pack "$lst" "$CORPUS" -o "$WORK/packed/train" --encoding keep --quiet
manifest="$WORK/packed/train.json"
[ -s "$manifest" ] || die "pack wrote no manifest at '$manifest'"
n_images=$(grep -c . "$lst")
py_images=$n_images
[ "$PY_LIMIT" -gt 0 ] && [ "$PY_LIMIT" -lt "$n_images" ] && py_images=$PY_LIMIT
echo "run.sh: $n_images images in '$CORPUS'; packed keep to '$manifest'" >&2

# Warm the page cache: the loader reads the shards, the baselines the files.
find "$CORPUS" -type f -name '*.JPEG' -print0 | xargs -0 cat >/dev/null
cat "$WORK/packed"/* >/dev/null

# --- contenders ---------------------------------------------------------------
# shellcheck disable=SC2206 # LOAD_ARGS is split on purpose
load_extra=($LOAD_ARGS)
set_cmd() {
	case "$1" in
	loader_t1 | loader_t2)
		cmd=("$IMSHARD" bench-load "$manifest" --batch "$BATCH" --size "$SIZE" --threads "${1#loader_t}"
			--augment flip --dtype f32 --layout nchw "${load_extra[@]}" --quiet --json) ;;
	full_decode) cmd=("$FULL_DECODE" "$lst" "$CORPUS") ;;
	python_p1 | python_p2)
		cmd=("$PYTHON" "$here/torch_like_baseline.py" "$lst" "$CORPUS" --procs "${1#python_p}"
			--limit "$PY_LIMIT" --batch "$BATCH" --size "$SIZE") ;;
	*) die "unknown contender '$1'" ;;
	esac
}

runs="$WORK/runs.tsv"
printf '# round\tcontender\twall_s\tmaxrss_kib\trc\tcpu_s\tbg_cores\tlog\n' >"$runs"

# measure ROUND NAME: one contender under GNU time; a row in runs.tsv.
measure() {
	local round=$1 name=$2
	local log="$WORK/logs/$round-$name.log" tf="$WORK/logs/$round-$name.time"
	set_cmd "$name"
	printf '%s %s: %s\n' "$round" "$name" "${cmd[*]}" >>"$WORK/logs/commands.txt"
	local rc wall rss cpu bg
	bench_timed "$log" "$log.err" "$tf" "${cmd[@]}"
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$name" "$wall" "$rss" "$rc" "$cpu" "$bg" "$log" >>"$runs"
	if [ "$rc" -ne 0 ]; then
		echo "run.sh: $round/$name failed (exit $rc); last lines of $log.err:" >&2
		tail -n5 "$log.err" >&2
	fi
	printf '  %-12s %7.2f s wall %7.1f MiB  bg %4s cores  %s\n' "$name" "$wall" \
		"$(awk -v k="$rss" 'BEGIN { print k / 1024 }')" "$bg" \
		"$(tr '\n' ' ' <"$log" | cut -c1-110)" >&2
}

for ((r = 1; r <= ROUNDS; r++)); do
	echo "run.sh: round $r of $ROUNDS" >&2
	measure "$r" loader_t1
	measure "$r" full_decode
	measure "$r" loader_t2
	measure "$r" python_p1
	measure "$r" python_p2
done

# --- report -------------------------------------------------------------------
version=$("$IMSHARD" --version 2>&1 | head -n1)
cmdline=$(printf '%q ' env IMSHARD="$IMSHARD" FULL_DECODE="$FULL_DECODE" CORPUS="$CORPUS" \
	N_IMAGES="$N_IMAGES" SEED="$SEED" ROUNDS="$ROUNDS" BATCH="$BATCH" SIZE="$SIZE" \
	LOAD_ARGS="$LOAD_ARGS" PY_LIMIT="$PY_LIMIT" WORK="$WORK" RESULTS="$RESULTS" PYTHON="$PYTHON" bench/load/run.sh)
cmdline=${cmdline% }
set_cmd loader_t1; c_l1="${cmd[*]}"
set_cmd loader_t2; c_l2="${cmd[*]}"
set_cmd full_decode; c_fd="${cmd[*]}"
set_cmd python_p1; c_p1="${cmd[*]}"
set_cmd python_p2; c_p2="${cmd[*]}"
META_COMMAND=$cmdline META_VERSION="$version" META_CORPUS="$CORPUS" META_IMAGES="$n_images" \
META_PYIMAGES="$py_images" META_ROUNDS="$ROUNDS" META_L1="$c_l1" META_L2="$c_l2" META_FD="$c_fd" \
META_P1="$c_p1" META_P2="$c_p2" META_CORPUS_BYTES="$(du -sb "$CORPUS" | cut -f1)" \
	"$PYTHON" "$here/summarize.py" "$runs" "$RESULTS"
