#!/usr/bin/env bash
# bench/pack/run.sh - the packing benchmark: `imshard pack` against a plain
# file copy, the libjpeg-turbo floor and a PIL+lmdb Python script, on a
# generated ImageNet-shaped JPEG corpus, interleaved round by round.
#
#     bench/pack/run.sh [--dry-run]
#
# Builds nothing: build imshard and jpeg_floor first (see bench/pack/README.md).
# Settings come from the environment (defaults in brackets; relative paths
# are taken from the repository root):
#   IMSHARD     imshard binary [build/tools/imshard]
#   JPEG_FLOOR  jpeg_floor binary [build/bench/jpeg_floor]
#   CORPUS      corpus folder, generated when absent [/tmp/imshard-bench-corpus]
#   N_IMAGES    corpus size [3000]        SEED  corpus seed [1]
#   ROUNDS      interleaved rounds [5]
#   PY_LIMIT    Python baseline on the first N list entries only, 0 = all [0]
#   SIZE_CHECK  1 = also pack the corpus listed 4x over (peak RSS vs size) [1]
#   WORK        scratch folder for lists, outputs, logs, results [/tmp/imshard-bench-work]
#   RESULTS     JSON written at the end [$WORK/results.json]
#   PYTHON      interpreter with Pillow and lmdb [/usr/bin/python3]
# --dry-run (or DRY_RUN=1) checks the harness without imshard: the list is
# made by Python and pack runs are replaced by stand-ins (keep: cp -r + sync,
# resize: jpeg_floor), so every ratio should come out near 1.
#
# Each run is timed by GNU time (-f '%e %M %U %S': peak RSS KiB, CPU
# seconds; wall time is taken from bash's microsecond clock around it). The
# CPU the rest of the machine burnt meanwhile (from /proc/stat) is logged as
# bg_cores: other people's jobs on a shared machine show up there.
# Packed outputs are removed after each run; the file system is synced
# before each timed run so that no run pays for another's writeback.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

DRY_RUN=${DRY_RUN:-0}
for arg in "$@"; do
	case "$arg" in
	--dry-run) DRY_RUN=1 ;;
	-h | --help) bench_help ;;
	*) bench_bad_arg "$arg" ;;
	esac
done

IMSHARD=$(abspath "${IMSHARD:-build/tools/imshard}")
JPEG_FLOOR=$(abspath "${JPEG_FLOOR:-build/bench/jpeg_floor}")
CORPUS=$(abspath "${CORPUS:-/tmp/imshard-bench-corpus}")
N_IMAGES=${N_IMAGES:-3000}
SEED=${SEED:-1}
ROUNDS=${ROUNDS:-5}
PY_LIMIT=${PY_LIMIT:-0}
SIZE_CHECK=${SIZE_CHECK:-1}
WORK=$(abspath "${WORK:-/tmp/imshard-bench-work}")
RESULTS=$(abspath "${RESULTS:-$WORK/results.json}")
PYTHON=${PYTHON:-/usr/bin/python3}
SHORTER=256
QUALITY=95
bench_need_count N_IMAGES ROUNDS
bench_need_whole SEED PY_LIMIT
bench_need_flag DRY_RUN SIZE_CHECK
# WORK's logs/ and out/ are emptied below: a folder of other things is
# refused (its mark, or an earlier run's runs.tsv)
bench_own_work .bench-pack runs.tsv

bench_gnu_time
bench_need_bin "$JPEG_FLOOR" jpeg_floor "build it: cmake --build build --target jpeg_floor, or set JPEG_FLOOR"
if [ "$DRY_RUN" != 1 ]; then
	bench_need_bin "$IMSHARD" imshard "build it, set IMSHARD, or use --dry-run"
fi
"$PYTHON" -c 'import PIL, lmdb' 2>/dev/null ||
	die "'$PYTHON' lacks Pillow or lmdb (apt-get install python3-pil python3-lmdb)"

bench_mark_work .bench-pack
mkdir -p "$WORK/logs"
out="$WORK/out" # every packed/copied output lives here and is removed after use
rm -rf "$out" "$WORK/logs"/*

# --- corpus ---------------------------------------------------------------
bench_corpus "$N_IMAGES" "$SEED"

# --- list -----------------------------------------------------------------
lst="$WORK/corpus_train.lst"
rm -f "$WORK"/corpus_*.lst "$WORK/corpus.classes"
if [ "$DRY_RUN" = 1 ]; then
	# Stand-in for `imshard list --no-shuffle`: sorted class folders, sorted files.
	"$PYTHON" - "$CORPUS" "$lst" <<'EOF'
import os, sys
root, out = sys.argv[1], sys.argv[2]
classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
i = 0
with open(out, "w") as f:
    for label, c in enumerate(classes):
        for name in sorted(os.listdir(os.path.join(root, c))):
            f.write("%d\t%d\t%s/%s\n" % (i, label, c, name))
            i += 1
EOF
else
	"$IMSHARD" list "$CORPUS" -o "$WORK/corpus" --no-shuffle --quiet
fi
[ -s "$lst" ] || die "no list at '$lst'"
read -r n_images n_bytes < <("$PYTHON" "$here/summarize.py" listinfo "$lst" "$CORPUS")
read -r py_images py_bytes < <("$PYTHON" "$here/summarize.py" listinfo "$lst" "$CORPUS" "$PY_LIMIT")
[ "$n_images" -gt 0 ] || die "empty list '$lst'"
echo "run.sh: $n_images images, $((n_bytes / 1000000)) MB in '$CORPUS'; list '$lst'" >&2

# Warm the page cache: every contender then reads the corpus from memory.
find "$CORPUS" -type f -name '*.JPEG' -print0 | xargs -0 cat >/dev/null

# --- contenders -----------------------------------------------------------
# set_cmd KIND LIST THREADS sets the array cmd to one contender's command
# line; every output goes under $out/run, which measure creates and removes.
set_cmd() {
	local kind=$1 list=$2 threads=$3
	case "$kind" in
	copy) cmd=("$here/copy_baseline.sh" "$CORPUS" "$out/run/copy") ;;
	pack_keep)
		if [ "$DRY_RUN" = 1 ]; then
			cmd=("$here/copy_baseline.sh" "$CORPUS" "$out/run/keep")
		else
			cmd=("$IMSHARD" pack "$list" "$CORPUS" -o "$out/run/train" --encoding keep --quiet --force)
		fi ;;
	pack_resize)
		if [ "$DRY_RUN" = 1 ]; then
			cmd=("$JPEG_FLOOR" "$list" "$CORPUS" --threads "$threads" --resize "$SHORTER" --quality "$QUALITY")
		else
			cmd=("$IMSHARD" pack "$list" "$CORPUS" -o "$out/run/train" --resize "$SHORTER"
				--quality "$QUALITY" --threads "$threads" --quiet --force)
		fi ;;
	floor) cmd=("$JPEG_FLOOR" "$list" "$CORPUS" --threads "$threads" --resize "$SHORTER" --quality "$QUALITY") ;;
	python) cmd=("$PYTHON" "$here/pil_lmdb_baseline.py" "$list" "$CORPUS" "$out/run/python.lmdb" --limit "$PY_LIMIT") ;;
	*) die "unknown contender '$kind'" ;;
	esac
}
if [ "$DRY_RUN" = 1 ]; then
	keep_cmd="[dry run] bench/pack/copy_baseline.sh CORPUS OUT"
	resize_cmd="[dry run] jpeg_floor LIST CORPUS --threads T --resize $SHORTER --quality $QUALITY"
else
	keep_cmd="imshard pack LIST CORPUS -o OUT/train --encoding keep --quiet --force"
	resize_cmd="imshard pack LIST CORPUS -o OUT/train --resize $SHORTER --quality $QUALITY --threads T --quiet --force"
fi

runs="$WORK/runs.tsv"
samples="$WORK/rss_samples.tsv"
printf '# round\tcontender\tthreads\timages\tinput_bytes\twall_s\tmaxrss_kib\trc\tcpu_s\tbg_cores\n' >"$runs"
: >"$samples"

# measure ROUND NAME KIND THREADS LIST IMAGES BYTES SAMPLE: runs one
# contender under GNU time, appends a row to runs.tsv, removes its output.
# THREADS 0 means the command's default. SAMPLE=1 also polls the process's
# RssAnon/RssFile (to tell heap from mapped-file pages).
measure() {
	local round=$1 name=$2 kind=$3 threads=$4 list=$5 images=$6 bytes=$7 sample=$8
	local log="$WORK/logs/$round-$name.log" tf="$WORK/logs/$round-$name.time"
	set_cmd "$kind" "$list" "$threads"
	echo "$round $name: ${cmd[*]}" >>"$WORK/logs/commands.txt"
	rm -rf "$out"
	mkdir -p "$out/run"
	sync -f "$WORK"
	local rc=0 busy0 busy1 wall rss usr sys cpu bg
	if [ "$sample" = 1 ]; then
		busy0=$(bench_busy_ticks)
		"$TIME" -f '%e %M %U %S' -o "$tf" "${cmd[@]}" >"$log" 2>&1 &
		local tpid=$! anon=0 file=0 child a f
		while kill -0 "$tpid" 2>/dev/null; do
			child=$(pgrep -P "$tpid" | head -n1 || true)
			if [ -n "$child" ] && [ -r "/proc/$child/status" ]; then
				a=$(awk '/^RssAnon/ {print $2}' "/proc/$child/status" 2>/dev/null || true)
				f=$(awk '/^RssFile/ {print $2}' "/proc/$child/status" 2>/dev/null || true)
				[ -n "$a" ] && [ "$a" -gt "$anon" ] && anon=$a
				[ -n "$f" ] && [ "$f" -gt "$file" ] && file=$f
			fi
			sleep 0.05
		done
		wait "$tpid" || rc=$?
		printf '%s:%s\t%s\t%s\n' "$round" "$name" "$anon" "$file" >>"$samples"
		# the sampled runs keep GNU time's %e (10 ms steps): their polling
		# loop would add its latency to bash's clock
		busy1=$(bench_busy_ticks)
		read -r wall rss usr sys < <(tail -n1 "$tf")
		bench_cpu_bg "$usr" "$sys" "$busy0" "$busy1"
	else
		bench_timed "$log" "$log" "$tf" "${cmd[@]}"
	fi
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$name" "$threads" "$images" \
		"$bytes" "$wall" "$rss" "$rc" "$cpu" "$bg" >>"$runs"
	if [ "$rc" -ne 0 ]; then
		echo "run.sh: $round/$name failed (exit $rc); last lines of $log:" >&2
		tail -n5 "$log" >&2
	fi
	printf '  %-16s %7.2f s %9.1f img/s %7.1f MiB  bg %4s cores%s\n' "$name" "$wall" \
		"$(awk -v n="$images" -v w="$wall" 'BEGIN { print (w > 0 ? n / w : 0) }')" \
		"$(awk -v k="$rss" 'BEGIN { print k / 1024 }')" "$bg" \
		"$([ "$rc" -eq 0 ] || echo "  FAILED rc=$rc")" >&2
	rm -rf "$out"
}

for ((r = 1; r <= ROUNDS; r++)); do
	echo "run.sh: round $r of $ROUNDS" >&2
	measure "$r" copy copy 1 "$lst" "$n_images" "$n_bytes" 0
	measure "$r" pack_keep pack_keep 0 "$lst" "$n_images" "$n_bytes" 0
	measure "$r" pack_resize_t1 pack_resize 1 "$lst" "$n_images" "$n_bytes" 0
	measure "$r" floor_t1 floor 1 "$lst" "$n_images" "$n_bytes" 0
	measure "$r" pack_resize_t2 pack_resize 2 "$lst" "$n_images" "$n_bytes" 0
	measure "$r" floor_t2 floor 2 "$lst" "$n_images" "$n_bytes" 0
	measure "$r" python python 1 "$lst" "$py_images" "$py_bytes" 0
done

if [ "$SIZE_CHECK" = 1 ]; then
	echo "run.sh: peak RSS vs dataset size (corpus listed 1x and 4x)" >&2
	lst4="$WORK/corpus_x4.lst"
	"$PYTHON" "$here/summarize.py" repeat "$lst" 4 "$lst4"
	measure size-1x pack_keep pack_keep 0 "$lst" "$n_images" "$n_bytes" 1
	measure size-4x pack_keep pack_keep 0 "$lst4" $((4 * n_images)) $((4 * n_bytes)) 1
	measure size-1x pack_resize_t2 pack_resize 2 "$lst" "$n_images" "$n_bytes" 1
	measure size-4x pack_resize_t2 pack_resize 2 "$lst4" $((4 * n_images)) $((4 * n_bytes)) 1
	if [ "$DRY_RUN" = 1 ]; then
		echo "run.sh: (dry run: the 4x keep stand-in copies the corpus once)" >&2
	fi
fi
rm -rf "$out"

# --- report ---------------------------------------------------------------
if [ "$DRY_RUN" = 1 ]; then
	version="dry run, imshard not run"
else
	version=$("$IMSHARD" --version 2>&1 | head -n1)
fi
cmdline=$(printf '%q ' env IMSHARD="$IMSHARD" JPEG_FLOOR="$JPEG_FLOOR" CORPUS="$CORPUS" \
	N_IMAGES="$N_IMAGES" SEED="$SEED" ROUNDS="$ROUNDS" PY_LIMIT="$PY_LIMIT" SIZE_CHECK="$SIZE_CHECK" \
	WORK="$WORK" RESULTS="$RESULTS" PYTHON="$PYTHON" bench/pack/run.sh)
cmdline=${cmdline% }
[ "$DRY_RUN" != 1 ] || cmdline+=" --dry-run"
META_COMMAND=$cmdline \
META_VERSION="$version" META_DRY="$DRY_RUN" META_CORPUS="$CORPUS" META_IMAGES="$n_images" \
META_BYTES="$n_bytes" META_KEEP="$keep_cmd" META_RESIZE="$resize_cmd" META_SAMPLES="$samples" \
META_PYLIMIT="$PY_LIMIT" META_ROUNDS="$ROUNDS" \
	"$PYTHON" - "$WORK/meta.json" <<'EOF'
import json, os, platform, sys, time
e = os.environ
cpu = "unknown"
with open("/proc/cpuinfo") as f:
    for line in f:
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
samples = {}
with open(e["META_SAMPLES"]) as f:
    for line in f:
        key, anon, fil = line.split()
        samples[key] = {"anon_mib": int(anon) / 1024, "file_mib": int(fil) / 1024}
py = ("first %s list entries" % e["META_PYLIMIT"]) if e["META_PYLIMIT"] != "0" else "whole list"
meta = {
    "command": e["META_COMMAND"], "dry_run": e["META_DRY"] == "1",
    "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
    "imshard_version": e["META_VERSION"], "corpus": e["META_CORPUS"],
    "corpus_images": int(e["META_IMAGES"]), "corpus_bytes": int(e["META_BYTES"]),
    "rounds": int(e["META_ROUNDS"]), "page_cache": "warm (corpus read once before round 1)",
    "timing": "wall: bash EPOCHREALTIME around GNU time (size check: GNU time %e); "
              "peak RSS: GNU time %M; CPU: %U + %S; bg_cores: other busy CPU in /proc/stat",
    "commands": {
        "copy": "bench/pack/copy_baseline.sh CORPUS OUT  (cp -r, then sync -f OUT)",
        "pack_keep": e["META_KEEP"],
        "pack_resize_t1": e["META_RESIZE"].replace("--threads T", "--threads 1"),
        "floor_t1": "jpeg_floor LIST CORPUS --threads 1 --resize 256 --quality 95",
        "pack_resize_t2": e["META_RESIZE"].replace("--threads T", "--threads 2"),
        "floor_t2": "jpeg_floor LIST CORPUS --threads 2 --resize 256 --quality 95",
        "python": "pil_lmdb_baseline.py %s CORPUS OUT.lmdb --limit %s  (%s)"
                  % ("LIST", e["META_PYLIMIT"], py),
    },
    "rss_samples": samples,
}
with open(sys.argv[1], "w") as f:
    json.dump(meta, f, indent=2)
EOF
"$PYTHON" "$here/summarize.py" report "$runs" "$WORK/meta.json" "$RESULTS"
