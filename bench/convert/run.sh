#!/usr/bin/env bash
# bench/convert: the cost of the imagenet adapter on top of packing.
#
# Builds a devkit-layout ImageNet root around bench/pack's generated corpus
# (train/<wnid>/<wnid>_<n>.JPEG, map_clsloc.txt, a flat val/ with its
# ground-truth file), then, interleaved over ROUNDS rounds, times
#   convert: imshard convert imagenet ROOT -o OUT            (adapter + lists + pack)
#   pack:    imshard pack OUT/train.lst ROOT -o P/train       (the same files from a plain list)
#            + imshard pack OUT/val.lst ROOT -o P/val
# and reports the median of the in-run ratio (convert - pack) / pack: the
# adapter's own overhead, which must stay under 5% (met or MISSED is
# said beside it), after the command that made it with every setting
# spelt out. Both use the same encoding options (ENC_ARGS), so both do
# the same packing work.
#
# Env (relative paths are taken from the repository root): IMSHARD
# (build/tools/imshard), CORPUS (/tmp/imshard-bench-corpus, made by
# bench/pack/make_corpus.py when it lacks the stamp of a corpus of
# N_IMAGES, seed 1, as bench/pack and bench/load make it; a folder of
# other things is refused), N_IMAGES (3000), N_VAL (300), ROUNDS (5),
# WORK (/tmp/imshard-bench-convert), PYTHON (/usr/bin/python3),
# ENC_ARGS ("" = keep; e.g. "--resize 256 --quality 95"), INSTR (1: also
# count instructions of one convert and one pack with cachegrind; where
# VALGRIND (valgrind) is not found the summary says so, and a run that
# cannot be counted stops the benchmark, named).
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
bench_args "$@"
IMSHARD=$(abspath "${IMSHARD:-build/tools/imshard}")
CORPUS=$(abspath "${CORPUS:-/tmp/imshard-bench-corpus}")
N_IMAGES=${N_IMAGES:-3000}
N_VAL=${N_VAL:-300}
ROUNDS=${ROUNDS:-5}
WORK=$(abspath "${WORK:-/tmp/imshard-bench-convert}")
ENC_ARGS=${ENC_ARGS:-}
INSTR=${INSTR:-1}
VALGRIND=${VALGRIND:-valgrind}
PYTHON=${PYTHON:-/usr/bin/python3}
bench_need_count N_IMAGES N_VAL ROUNDS
bench_need_flag INSTR
# WORK's root/, lists/, out/ and p/ are made anew: a folder of other
# things is refused (before: the whole of WORK was removed)
bench_own_work .bench-convert root/map_clsloc.txt

bench_need_bin "$IMSHARD" imshard "build it or set IMSHARD"
bench_corpus "$N_IMAGES" 1
bench_mark_work .bench-convert
rm -rf "$WORK/root" "$WORK/lists" "$WORK/out" "$WORK/p"
# the packed outputs (a copy of the corpus each, in keep mode) are not
# kept, whether the run ends or stops: WORK keeps the root's symlinks
# and the lists
trap 'rm -rf "$WORK/out" "$WORK/p"' EXIT
root="$WORK/root"
mkdir -p "$root/train" "$root/val" "$root/ILSVRC2012_devkit_t12/data"
# train: the corpus's wnid folders (symlinked files: no copy to time).
for d in "$CORPUS"/n*; do
  w=$(basename "$d")
  mkdir -p "$root/train/$w"
  for f in "$d"/*; do ln -s "$f" "$root/train/$w/$(basename "$f")"; done
done
# map_clsloc.txt with devkit IDs in an order other than sorted; val images
# taken from the corpus, labelled through the ground truth.
"$PYTHON" - "$root" "$N_VAL" <<'PY'
import os, random, sys
root, nval = sys.argv[1], int(sys.argv[2])
wnids = sorted(os.listdir(os.path.join(root, "train")))
ids = list(range(1, len(wnids) + 1))
random.Random(1).shuffle(ids)
with open(os.path.join(root, "map_clsloc.txt"), "w") as f:
    for w, i in sorted(zip(wnids, ids), key=lambda t: t[1]):
        f.write("%s %d %s\n" % (w, i, "class_" + w))
files = [(w, n) for w in wnids for n in sorted(os.listdir(os.path.join(root, "train", w)))]
random.Random(2).shuffle(files)
id_of = dict(zip(wnids, ids))
with open(os.path.join(root, "ILSVRC2012_devkit_t12/data/ILSVRC2012_validation_ground_truth.txt"), "w") as gt:
    for k, (w, n) in enumerate(files[:nval], 1):
        src = os.path.realpath(os.path.join(root, "train", w, n))
        os.symlink(src, os.path.join(root, "val", "ILSVRC2012_val_%08d.JPEG" % k))
        gt.write("%d\n" % id_of[w])
PY

now() { date +%s.%N; }
ratios=()
conv_s=()
pack_s=()
run_convert() {
  rm -rf "$WORK/out"
  sync
  local t0 t1
  t0=$(now)
  # shellcheck disable=SC2086
  "$IMSHARD" convert imagenet "$root" -o "$WORK/out" $ENC_ARGS --quiet
  t1=$(now)
  c=$(echo "$t1 - $t0" | bc -l)
}
run_pack() {
  rm -rf "$WORK/p"
  sync
  local t0 t1
  t0=$(now)
  # shellcheck disable=SC2086
  "$IMSHARD" pack "$WORK/lists/train.lst" "$root" -o "$WORK/p/train" $ENC_ARGS --quiet
  # shellcheck disable=SC2086
  "$IMSHARD" pack "$WORK/lists/val.lst" "$root" -o "$WORK/p/val" $ENC_ARGS --quiet
  t1=$(now)
  p=$(echo "$t1 - $t0" | bc -l)
}
# The plain lists pack reads: the ones convert writes.
# shellcheck disable=SC2086
"$IMSHARD" convert imagenet "$root" -o "$WORK/lists" $ENC_ARGS --quiet
for r in $(seq 1 "$ROUNDS"); do
  # Alternate the order so neither side always pays for the other's
  # writeback; sync before each timed run for the same reason.
  bench_order "$r" run_convert run_pack
  for f in "${order[@]}"; do "$f"; done
  conv_s+=("$c")
  pack_s+=("$p")
  ratios+=("$(echo "($c - $p) / $p" | bc -l)")
  printf 'round %d: convert %.3f s, pack %.3f s, overhead %+.1f%%\n' "$r" "$c" "$p" \
    "$(echo "100 * ${ratios[-1]}" | bc -l)"
done
records=$(( $(wc -l <"$WORK/lists/train.lst") + $(wc -l <"$WORK/lists/val.lst") ))

# Instruction counts (cachegrind; user space only, repeatable to the
# instruction whatever the machine's load): the adapter's CPU cost beside
# packing's, free of the disk noise that dominates keep-mode wall times.
# A run that cannot count (no valgrind, a run that fails under it) says
# so: the count is not left out without a word.
instr="instructions: not counted (INSTR=0)"
if [ "$INSTR" = 1 ] && ! command -v "$VALGRIND" >/dev/null; then
  instr="instructions: not counted: cannot find '$VALGRIND' (install valgrind, set VALGRIND, or INSTR=0)"
  echo "run.sh: $instr" >&2
elif [ "$INSTR" = 1 ]; then
  # irefs WHAT CMD...: the count of CMD's instructions into n; stops,
  # naming WHAT and valgrind's last lines, where there is none
  irefs() {
    local what=$1 err="$WORK/cachegrind.err"
    shift
    n=""
    if "$VALGRIND" --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null "$@" >/dev/null 2>"$err"; then
      n=$(awk '/I *refs:/ { gsub(",", "", $NF); print $NF }' "$err")
    fi
    [[ $n =~ ^[0-9]+$ ]] || { tail -n5 "$err" >&2; rm -f "$err"; die "no instruction count of $what under $VALGRIND (see above; or INSTR=0)"; }
    rm -f "$err"
  }
  rm -rf "$WORK/out" "$WORK/p"
  # shellcheck disable=SC2086
  irefs convert "$IMSHARD" convert imagenet "$root" -o "$WORK/out" $ENC_ARGS --quiet --threads 1
  ic=$n
  # shellcheck disable=SC2086
  irefs "pack of train.lst" "$IMSHARD" pack "$WORK/lists/train.lst" "$root" -o "$WORK/p/train" $ENC_ARGS --quiet --threads 1
  ip1=$n
  # shellcheck disable=SC2086
  irefs "pack of val.lst" "$IMSHARD" pack "$WORK/lists/val.lst" "$root" -o "$WORK/p/val" $ENC_ARGS --quiet --threads 1
  ip2=$n
  ip=$((ip1 + ip2))
  instr="instructions: convert $ic, pack $ip (train $ip1 + val $ip2): adapter overhead $(echo "scale=2; 100 * ($ic - $ip) / $ip" | bc -l)%"
fi
cmdline=$(printf '%q ' env IMSHARD="$IMSHARD" CORPUS="$CORPUS" N_IMAGES="$N_IMAGES" N_VAL="$N_VAL" \
  ROUNDS="$ROUNDS" WORK="$WORK" ENC_ARGS="$ENC_ARGS" INSTR="$INSTR" VALGRIND="$VALGRIND" bench/convert/run.sh)
"$PYTHON" - "$records" "${conv_s[*]}" "${pack_s[*]}" "${ratios[*]}" "$ENC_ARGS" "${cmdline% }" "$instr" <<'PY'
import statistics, sys
n = int(sys.argv[1])
conv = [float(x) for x in sys.argv[2].split()]
pack = [float(x) for x in sys.argv[3].split()]
rat = [float(x) for x in sys.argv[4].split()]
print("command: %s" % sys.argv[6])
print("bench/convert: %d images (train + val), encoding args '%s', %d rounds" % (n, sys.argv[5], len(rat)))
print("  convert imagenet: median %.3f s, %.0f images/s" % (statistics.median(conv), n / statistics.median(conv)))
print("  pack from lists:  median %.3f s, %.0f images/s" % (statistics.median(pack), n / statistics.median(pack)))
m = statistics.median(rat)
print("  adapter overhead (convert - pack) / pack: median %+.2f%% (min %+.2f%%, max %+.2f%%), target < 5%%: %s"
      % (100 * m, 100 * min(rat), 100 * max(rat), "met" if m < 0.05 else "MISSED"))
print("  (median of the rounds' own ratios; above 0: convert slower than pack)")
print("  " + sys.argv[7])
PY
