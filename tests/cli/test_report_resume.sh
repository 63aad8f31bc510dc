#!/usr/bin/env bash
# imshard report on real resumed runs: a part killed after its last
# checkpoint (its lines after it trained again by the next part) is drawn
# once per step and described as one run in parts; a run resumed with
# fewer ranks keeps the earlier part's other ranks' lines without a
# warning, and a rank-local --log-dir given beside rank 0's joins that
# run (2 ranks: skipped without mpirun).
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1
: "${IMSHARD_TRAIN:?IMSHARD_TRAIN must point at imshard-train}"

expect 0 "$IMSHARD" sample "$T/s" --classes 4 --per-class 16 --quiet
expect 0 "$IMSHARD" convert folder "$T/s" -o "$T/p" --val-ratio 0.25 --seed 3 --quiet
# 48 training images, batch 4: 12 steps an epoch, a train line every 2
common=(--train "$T/p/train.json" --val "$T/p/val.json" --model convnet7 --size 16
  --threads 1 --batch-size 4 --epochs 2 --lr 0.05 --log-every 2 --quiet)

# --- a part killed after its checkpoint ------------------------------------
# Part 1 stops at step 4 (its checkpoint); part 2 trains to step 8 and
# logs steps 6 and 8; putting back the step-4 checkpoint makes part 2 one
# that died after it, as a kill does; part 3 trains 5..24 again.
run=(--log-dir "$T/r" --checkpoint-dir "$T/r")
expect 0 "$IMSHARD_TRAIN" "${common[@]}" "${run[@]}" --max-steps 4
cp "$T/r/checkpoint.safetensors" "$T/step4.safetensors"
expect 0 "$IMSHARD_TRAIN" "${common[@]}" "${run[@]}" --max-steps 8 --resume
cp "$T/step4.safetensors" "$T/r/checkpoint.safetensors"
expect 0 "$IMSHARD_TRAIN" "${common[@]}" "${run[@]}" --resume
same "$(grep -c '"type":"start"' "$T/r/metrics.jsonl")" 3 "three parts"
same "$(grep -c '"type":"train".*"step":6,' "$T/r/metrics.jsonl")" 2 "step 6 logged twice"

expect 0 "$IMSHARD" report "$T/r" -o "$T/r.html" --csv "$T/csv"
same "$(cat "$T/err")" "imshard: report: wrote '$T/r.html' (1 run) and its CSV files into '$T/csv'" "no warnings for a resumed run"
# each step once (before: 14 rows, steps 6 and 8 twice)
same "$(tail -n +2 "$T/csv/train.csv" | cut -d, -f4 | tr '\n' ' ')" \
  "2 4 6 8 10 12 14 16 18 20 22 24 " "train.csv: every step once"
contains "$T/csv/runs.csv" ",0,3,2"   # skipped_lines, parts, superseded_lines
contains "$T/r.html" "One run in 3 parts, resumed from its checkpoint at step 4 (epoch 1) and at step 4 (epoch 1)."
# the val line part 2 wrote when it stopped at step 8 is superseded too
contains "$T/r.html" "2 train lines, 1 val line logged after a part's last checkpoint (part 2: the intervals ending at steps 6 to 8) were trained again"
lacks "$T/r.html" "wall_s goes back"
lacks "$T/r.html" "more than one run"

# --- resumed with fewer ranks ----------------------------------------------
if have_mpi; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  w=(--log-dir "$T/w" --checkpoint-dir "$T/w")
  expect 0 env ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" \
    mpirun -np 2 --bind-to none "$IMSHARD_TRAIN" "${common[@]}" "${w[@]}" --max-steps 4
  expect 0 "$IMSHARD_TRAIN" "${common[@]}" "${w[@]}" --resume
  expect 0 "$IMSHARD" report "$T/w" -o "$T/w.html" --csv "$T/wcsv"
  # before: "rank 1, but summary.json says world 1" for each of them
  same "$(cat "$T/err")" "imshard: report: wrote '$T/w.html' (1 run) and its CSV files into '$T/wcsv'" "no warnings for the first part's rank 1"
  same "$(grep -c '^w,1,' "$T/wcsv/train.csv")" 2 "rank 1's lines of part 1 kept"
  contains "$T/w.html" "One run in 2 parts, resumed from its checkpoint at step 4 (epoch 1) with 1 rank instead of 2. Per-rank figures are the last part's 1 rank"
  contains "$T/w.html" "Each resumed part's first interval is a warm-up, left out of the steady speed"
  # rank 1 logs into a folder of its own (an MPMD launch): given beside
  # rank 0's, its lines join the run, measured as if both ranks had logged
  # into one folder (before: a second run of its own, and rank 1 of the
  # run guessed at rank 0's speed)
  one=("${common[@]}" --log-every 1 --max-steps 4)
  expect 0 env ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" \
    mpirun --bind-to none -np 1 "$IMSHARD_TRAIN" "${one[@]}" --log-dir "$T/l0" : \
    -np 1 "$IMSHARD_TRAIN" "${one[@]}" --log-dir "$T/l1"
  exists "$T/l1/metrics.jsonl"
  expect 0 env ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" \
    mpirun --bind-to none -np 2 "$IMSHARD_TRAIN" "${one[@]}" --log-dir "$T/l2"
  expect 0 "$IMSHARD" report "$T/l0" "$T/l1" -o "$T/l.html" --csv "$T/lcsv"
  same "$(cat "$T/err")" "imshard: report: wrote '$T/l.html' (1 run) and its CSV files into '$T/lcsv'" "no warnings for a rank-local folder"
  expect 0 "$IMSHARD" report "$T/l2" -o "$T/l2.html" --csv "$T/l2csv"
  same "$(grep -c '<section class="run"' "$T/l.html")" 1 "one run: the folders merged"
  same "$(tail -n +2 "$T/lcsv/runs.csv" | wc -l)" 1 "runs.csv: one run"
  lacks "$T/l.html" "have no train line"
  contains "$T/l.html" "This run's lines come from more than one folder, merged (each folder's superseded lines worked out in its own file first): rank 0 from this folder; rank 1 from its rank-local --log-dir <code>$T/l1</code> (4 train lines"
  # per rank: rank, lines, warm-up left out, and a measured speed and busy
  # time, as in the folder both ranks shared
  shape() { tail -n +2 "$1" | awk -F, '{print $2, $3, $4, ($5 != ""), ($10 != "")}'; }
  same "$(shape "$T/lcsv/ranks.csv")" "$(shape "$T/l2csv/ranks.csv")" "ranks.csv: as one folder"
  same "$(shape "$T/lcsv/ranks.csv" | tr '\n' ' ')" "0 4 1 1 1 1 4 1 1 1 " "ranks.csv: both ranks measured"
  same "$(grep -c '^l0,1,' "$T/lcsv/train.csv")" 4 "train.csv: rank 1's lines"
  same "$(grep -c '^l0,' "$T/lcsv/train.csv")" "$(grep -c '^l2,' "$T/l2csv/train.csv")" \
    "train.csv: as many lines as one folder"
  # the busy max/min is measured: both ranks' lines in one folder's figures
  contains "$T/l.html" "busy max/min"
fi
finish
