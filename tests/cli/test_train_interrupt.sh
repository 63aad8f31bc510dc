#!/usr/bin/env bash
# imshard-train stopped by SIGINT or SIGTERM: the run stops after the step
# it is in, writes that step's checkpoint, leaves no summary.json (the
# run is not done) nor a temporary file, says so in one line naming the
# step, the signal and --resume, and exits 1; the resumed run ends with
# the bytes of one never interrupted. Several ranks stop after the same
# step though one alone saw the signal; a stop during the set-up trains
# and logs nothing.
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1
: "${IMSHARD_TRAIN:?IMSHARD_TRAIN must point at imshard-train}"

expect 0 "$IMSHARD" sample "$T/s" --classes 4 --per-class 15 --quiet
expect 0 "$IMSHARD" convert folder "$T/s" -o "$T/p" --val-ratio 0.25 --seed 3 --quiet
# 44 training records, batch 8: 5 steps an epoch
fit_cmd=("$IMSHARD_TRAIN" --train "$T/p/train.json" --val "$T/p/val.json" --model convnet7
  --size 16 --threads 1 --batch-size 8 --seed 7)
fit() { "${fit_cmd[@]}" "$@"; }
st_same() { /usr/bin/python3 "$IMS_SRC/tests/cli/st_tool.py" same "$@" >/dev/null; }
ckpt_meta() {
  /usr/bin/python3 -c 'import json,struct,sys; d=open(sys.argv[1],"rb").read(); n=struct.unpack("<Q",d[:8])[0]; print(json.loads(d[8:8+n])["__metadata__"][sys.argv[2]])' "$1" "$2"
}
# only FOLDER NAMES...: FOLDER holds exactly these files (no temporary)
only() {
  checks=$((checks + 1))
  local have want
  have=$(ls -A "$1" | sort | tr '\n' ' ')
  want=$(printf '%s\n' "${@:2}" | sort | tr '\n' ' ')
  [ "$have" = "$want" ] || fail "'$1' holds '$have', expected '$want'"
}

# --- SIGINT, SIGTERM: stop after the step, resume = uninterrupted --------
# 60 epochs (300 steps): long enough never to end before the signal
common=(--epochs 60 --log-every 1)
expect 0 fit "${common[@]}" --quiet --checkpoint-dir "$T/full"
for sig in INT TERM; do
  dir="$T/part_$sig"
  # the binary itself in the background, so the signal reaches it, with
  # SIGINT heeded (a script's background job starts ignoring it)
  "${heed_int[@]}" "${fit_cmd[@]}" "${common[@]}" --checkpoint-dir "$dir" --log-dir "$dir/log" \
    >"$T/$sig.out" 2>"$T/$sig.err" &
  pid=$!
  wait_for test -s "$dir/log/metrics.jsonl" || fail "the run never logged a step"
  kill -"$sig" "$pid"
  wait "$pid"
  rc=$?
  same "$rc" 1 "exit status of a run stopped by SIG$sig"
  # the one error line, after the line that says the signal was heard
  contains "$T/$sig.err" "imshard-train: stopping after this step"
  grep '^imshard: ' "$T/$sig.err" >"$T/$sig.line"
  one_line "$T/$sig.line"
  contains "$T/$sig.line" "SIG$sig: interrupted after step "
  contains "$T/$sig.line" " of 300, in epoch "
  contains "$T/$sig.line" "the checkpoint in '$dir' is at that step; go on with --resume"
  said=$(sed -n 's/.*interrupted after step \([0-9]*\) .*/\1/p' "$T/$sig.line")
  checks=$((checks + 1))
  [ -n "$said" ] && [ "$said" -lt 300 ] || fail "SIG$sig: no step before the end named: $(cat "$T/$sig.line")"
  # the checkpoint is at the step named, mid-epoch or not; its log's last
  # progress line too; no summary (the run is not done), no temporary
  same "$(ckpt_meta "$dir/checkpoint.safetensors" step)" "$said" "SIG$sig: checkpoint's step"
  last=$(grep '"type":"train"' "$dir/log/metrics.jsonl" | tail -n 1 | json /dev/stdin 'j["step"]')
  same "$last" "$said" "SIG$sig: the log's last step"
  only "$dir" checkpoint.safetensors imshard-train.lock log
  only "$dir/log" imshard-train.lock metrics.jsonl
  expect 0 fit "${common[@]}" --quiet --checkpoint-dir "$dir" --log-dir "$dir/log" --resume
  st_same "$T/full/checkpoint.safetensors" "$dir/checkpoint.safetensors" ||
    fail "SIG$sig: the resumed run ends with other bytes than the uninterrupted run"
  checks=$((checks + 1))
  exists "$dir/log/summary.json"
done

# --- stopped inside an epoch and resumed, under other options: the bytes
# of the run never stopped. Each set crosses optimiser, precision,
# schedule and augmentation flags; the last reads a split with damaged
# records (replaced, counted over both parts against --max-bad-records)
expect 0 "$IMSHARD" convert folder "$T/s" -o "$T/pd" --val-ratio 0.25 --seed 3 --quiet
expect 0 /usr/bin/python3 "$IMS_SRC/tests/cli/split_edit.py" damage "$T/pd/train.json" 2 13 30 40
sets=("--optimizer adamw --precision bf16 --label-smoothing 0.2 --warmup-epochs 0.7 --no-bn-bias-decay"
  "--optimizer adam --precision fp16 --channels-last on --augment rotate=10,zoom=0.2,shift=0.1"
  "--nesterov --schedule step --freeze-bn --augment none"
  "--momentum 0 --schedule constant --max-bad-records 7 --train $T/pd/train.json")
for i in "${!sets[@]}"; do
  # shellcheck disable=SC2206
  o=(--epochs 2 --quiet ${sets[$i]})
  expect 0 fit "${o[@]}" --checkpoint-dir "$T/o${i}_full"
  run env IMSHARD_INJECT_STOP_STEP=3 "${fit_cmd[@]}" "${o[@]}" --checkpoint-dir "$T/o$i"
  same "$rc" 1 "(${sets[$i]}: stopped at step 3)"
  expect 0 fit "${o[@]}" --checkpoint-dir "$T/o$i" --resume
  st_same "$T/o${i}_full/checkpoint.safetensors" "$T/o$i/checkpoint.safetensors" ||
    fail "${sets[$i]}: the resumed run ends with other bytes than the uninterrupted run"
  checks=$((checks + 1))
done
# a part ended after a checkpoint inside an epoch (a NaN at step 4, the
# checkpoint at step 3): the resumed part counts and names the whole
# epoch's damaged records, as the run never stopped does (before: its
# own alone, and records 2 and 40 of steps 1 to 3 were told nowhere but
# in the run's total)
dm=(--epochs 2 --quiet --train "$T/pd/train.json" --log-every 1 --checkpoint-every 3)
expect 0 fit "${dm[@]}" --checkpoint-dir "$T/dm_full" --log-dir "$T/dm_full"
grep '^imshard-train: warning: epoch' "$T/err" >"$T/dm_full.warn"
expect 1 env IMSHARD_INJECT_NAN_STEP=4 "${fit_cmd[@]}" "${dm[@]}" --checkpoint-dir "$T/dm" --log-dir "$T/dm"
expect 0 fit "${dm[@]}" --checkpoint-dir "$T/dm" --log-dir "$T/dm" --resume
grep '^imshard-train: warning: epoch' "$T/err" >"$T/dm.warn"
same "$(cat "$T/dm.warn")" "$(cat "$T/dm_full.warn")" "(the resumed run's lines on damaged records)"
same "$(grep '"type":"epoch"' "$T/dm/metrics.jsonl")" "$(grep '"type":"epoch"' "$T/dm_full/metrics.jsonl")" "(the resumed run's epoch lines)"
# past --max-bad-records in the resumed part: the first part's count
# carried on, so it ends at the step the run never stopped ends at
expect 1 fit --epochs 2 --quiet --max-bad-records 2 --train "$T/pd/train.json"
contains "$T/err" "3 training records of epoch 1 could not be loaded by step 5, more than --max-bad-records 2"
run env IMSHARD_INJECT_STOP_STEP=3 "${fit_cmd[@]}" --epochs 2 --quiet --max-bad-records 2 --train "$T/pd/train.json" --checkpoint-dir "$T/mb"
contains "$T/err" "interrupted after step 3"
expect 1 fit --epochs 2 --quiet --max-bad-records 2 --train "$T/pd/train.json" --checkpoint-dir "$T/mb" --resume
contains "$T/err" "3 training records of epoch 1 could not be loaded by step 5, more than --max-bad-records 2 (this rank's: records 2, 30, 40)"

# --- a second signal, of the other kind too, ends the process at once ----
"${heed_int[@]}" "${fit_cmd[@]}" "${common[@]}" --checkpoint-dir "$T/twice" --log-dir "$T/twice/log" \
  >"$T/twice.out" 2>"$T/twice.err" &
pid=$!
wait_for test -s "$T/twice/log/metrics.jsonl" || fail "the run never logged a step"
kill -INT "$pid"
kill -TERM "$pid"
wait "$pid"
rc=$?
# killed by whichever of the two its threads took second (SIGTERM, as a
# rule: 143; SIGINT: 130), not ended after the step (1)
checks=$((checks + 1))
[ "$rc" = 143 ] || [ "$rc" = 130 ] ||
  fail "a run sent SIGINT, then SIGTERM, exited $rc, not killed by the second"
# announced once at most (the second may end it before the first's line)
checks=$((checks + 1))
[ "$(grep -c 'imshard-train: stopping after this step' "$T/twice.err")" -le 1 ] ||
  fail "the stop announced more than once: $(cat "$T/twice.err")"
lacks "$T/twice.err" "interrupted after step"

# --- SIGINT ignored from the start stays ignored -------------------------
# (a script's background job: Ctrl-C is meant for the script's foreground)
"${fit_cmd[@]}" "${common[@]}" --quiet --log-dir "$T/ign" >"$T/ign.out" 2>&1 &
pid=$!
wait_for test -s "$T/ign/metrics.jsonl" || fail "the run never logged a step"
kill -INT "$pid"
sleep 1
checks=$((checks + 1))
kill -0 "$pid" 2>/dev/null || fail "a run started ignoring SIGINT stopped at one"
kill -TERM "$pid"
wait "$pid"
same "$?" 1 "exit status of the run ignoring SIGINT, stopped by SIGTERM"
contains "$T/ign.out" "SIGTERM: interrupted after step"

# --- without --checkpoint-dir: told that nothing is kept -----------------
run env IMSHARD_INJECT_STOP_STEP=2 "${fit_cmd[@]}" --epochs 2 --quiet
same "$rc" 1 "exit status of a stopped run without --checkpoint-dir"
one_line "$T/err"
contains "$T/err" "SIGINT: interrupted after step 2 of 10, in epoch 1 of 2: no --checkpoint-dir, so the steps trained are not kept"

# --- the device loop's twin: a batch taken ahead is not counted ----------
# (IMSHARD_TEST_HOST_STAGE takes the next batch during each step)
expect 0 env IMSHARD_TEST_HOST_STAGE=1 "${fit_cmd[@]}" --epochs 2 --quiet --checkpoint-dir "$T/hs_full"
run env IMSHARD_TEST_HOST_STAGE=1 IMSHARD_INJECT_STOP_STEP=3 "${fit_cmd[@]}" --epochs 2 --quiet \
  --checkpoint-dir "$T/hs"
same "$rc" 1 "exit status of a stopped host-staged run"
contains "$T/err" "interrupted after step 3 of 10, in epoch 1 of 2"
same "$(ckpt_meta "$T/hs/checkpoint.safetensors" epoch_position)" 24 "host-staged stop: position after 3 batches of 8"
expect 0 env IMSHARD_TEST_HOST_STAGE=1 "${fit_cmd[@]}" --epochs 2 --quiet --checkpoint-dir "$T/hs" --resume
st_same "$T/hs_full/checkpoint.safetensors" "$T/hs/checkpoint.safetensors" ||
  fail "host-staged: the resumed run ends with other bytes than the uninterrupted run"
checks=$((checks + 1))

# --- an epoch's lines in metrics.jsonl: one stopped inside it says so ----
epochs() { /usr/bin/python3 -c 'import json,sys
print([(j["epoch"], j["step"], j["complete"]) for j in map(json.loads, open(sys.argv[1])) if j["type"] == "epoch"])' "$1"; }
run env IMSHARD_INJECT_STOP_STEP=3 "${fit_cmd[@]}" --epochs 2 --quiet --checkpoint-dir "$T/pl" --log-dir "$T/pl"
same "$rc" 1 "exit status of a run stopped at step 3"
same "$(epochs "$T/pl/metrics.jsonl")" "[(0, 3, False)]" "a stop inside an epoch: its line is not complete"
expect 0 "${fit_cmd[@]}" --epochs 2 --quiet --checkpoint-dir "$T/pl" --log-dir "$T/pl" --resume
same "$(epochs "$T/pl/metrics.jsonl")" "[(0, 3, False), (0, 5, True), (1, 10, True)]" "the resumed run's epoch lines"
expect 0 "${fit_cmd[@]}" --epochs 2 --max-steps 3 --quiet --log-dir "$T/pl_max"
same "$(epochs "$T/pl_max/metrics.jsonl")" "[(0, 3, False)]" "--max-steps inside an epoch: its line is not complete"

# --- a stop at an epoch's last step: that epoch is validated -------------
run env IMSHARD_INJECT_STOP_STEP=5 "${fit_cmd[@]}" --epochs 2 --checkpoint-dir "$T/edge" --log-dir "$T/edge/log"
same "$rc" 1 "exit status of a run stopped at an epoch's end"
contains "$T/err" "interrupted after step 5 of 10, in epoch 1 of 2"
contains "$T/err" "epoch 1 validation: top-1"
same "$(ckpt_meta "$T/edge/checkpoint.safetensors" epoch)" 1 "a stop at an epoch's end: the next epoch is where it resumes"
same "$(ckpt_meta "$T/edge/checkpoint.safetensors" epoch_position)" 0 "a stop at an epoch's end: from its start"
# ... and at the run's last step, the run is simply complete
run env IMSHARD_INJECT_STOP_STEP=10 "${fit_cmd[@]}" --epochs 2 --quiet --log-dir "$T/last"
same "$rc" 0 "exit status of a stop at the run's last step"
exists "$T/last/summary.json"
# ... and so at --max-steps' step: the run reached its end, validated as
# such (the last validation's files), not left for a --resume that has
# nothing to train
run env IMSHARD_INJECT_STOP_STEP=3 "${fit_cmd[@]}" --epochs 2 --max-steps 3 --quiet \
  --checkpoint-dir "$T/maxs" --log-dir "$T/maxs/log"
same "$rc" 0 "exit status of a stop at --max-steps' step"
lacks "$T/err" "interrupted"
exists "$T/maxs/log/summary.json"
exists "$T/maxs/log/eval.json"
same "$(ckpt_meta "$T/maxs/checkpoint.safetensors" step)" 3 "a stop at --max-steps: the checkpoint's step"

# --- before the first step: nothing trained, no log ----------------------
run env IMSHARD_INJECT_STOP_STEP=0 "${fit_cmd[@]}" --epochs 2 --checkpoint-dir "$T/early" --log-dir "$T/early/log"
same "$rc" 1 "exit status of a stop during the set-up"
one_line "$T/err"
contains "$T/err" "SIGINT: interrupted before the first step: nothing was trained"
absent "$T/early/checkpoint.safetensors"
absent "$T/early/log/metrics.jsonl"
run env IMSHARD_INJECT_STOP_STEP=x "${fit_cmd[@]}" --epochs 1
same "$rc" 1 "exit status with a bad IMSHARD_INJECT_STOP_STEP"
contains "$T/err" "IMSHARD_INJECT_STOP_STEP must be a step number from 0"

# --- two ranks, one of which sees the signal -----------------------------
if have_mpi; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  mpi() { ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" timeout 120 mpirun -np 2 "$@"; }
  # 44 records, 2 ranks of 4: 5 steps an epoch. A checkpoint inside an
  # epoch holds the ranks' averaged batch-norm statistics, as one after
  # validation does, and both ranks go on from them: the resumed run ends
  # as one with the same checkpoints never interrupted (before, rank 0's
  # own were written, and rank 1's were lost at the resume)
  two=(--batch-size 4 --epochs 2 --quiet --checkpoint-every 3 --checkpoint-dir "$T/r2" --log-dir "$T/r2/log")
  run env IMSHARD_INJECT_STOP_STEP=3 IMSHARD_INJECT_STOP_RANK=1 ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" \
    timeout 120 mpirun -np 2 "${fit_cmd[@]}" "${two[@]}"
  checks=$((checks + 1))
  [ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "2 ranks stopped by rank 1 exited $rc"
  # told once, by rank 0, for both; no abort
  same "$(grep -c 'interrupted after step 3 of 10' "$T/err")" 1 "the stop told once over 2 ranks"
  # by rank 0, which received no signal: not named as if it had
  contains "$T/err" "imshard: another rank's SIGINT or SIGTERM: interrupted after step 3 of 10"
  lacks "$T/err" "MPI_ABORT"
  lacks "$T/err" "rank 1"
  same "$(ckpt_meta "$T/r2/checkpoint.safetensors" step)" 3 "2 ranks: the checkpoint's step"
  # both ranks' progress lines end at that step
  for r in 0 1; do
    same "$(grep '"type":"train","rank":'$r, "$T/r2/log/metrics.jsonl" | tail -n 1 | json /dev/stdin 'j["step"]')" 3 "2 ranks: rank $r's last logged step"
  done
  expect 0 mpi "${fit_cmd[@]}" "${two[@]}" --resume
  expect 0 mpi "${fit_cmd[@]}" --batch-size 4 --epochs 2 --quiet --checkpoint-every 3 --checkpoint-dir "$T/r2_full"
  st_same "$T/r2_full/checkpoint.safetensors" "$T/r2/checkpoint.safetensors" ||
    fail "2 ranks: the resumed run ends with other bytes than the uninterrupted run"
  checks=$((checks + 1))
  # the ranks' batch-norm statistics are averaged every step, so a stop
  # between the uninterrupted run's checkpoints (step 2) resumes bit for
  # bit too (before, the stop's checkpoint held the ranks' average, where
  # the run never stopped went on from each rank's own: 9e-8 off), with
  # and without --freeze-bn
  for fz in "" --freeze-bn; do
    bn=(--batch-size 4 --epochs 2 --quiet $fz)
    expect 0 mpi "${fit_cmd[@]}" "${bn[@]}" --checkpoint-dir "$T/bn${fz}_full"
    run env IMSHARD_INJECT_STOP_STEP=2 IMSHARD_INJECT_STOP_RANK=1 ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" \
      timeout 120 mpirun -np 2 "${fit_cmd[@]}" "${bn[@]}" --checkpoint-dir "$T/bn$fz"
    contains "$T/err" "interrupted after step 2 of 10"
    expect 0 mpi "${fit_cmd[@]}" "${bn[@]}" --checkpoint-dir "$T/bn$fz" --resume
    st_same "$T/bn${fz}_full/checkpoint.safetensors" "$T/bn$fz/checkpoint.safetensors" ||
      fail "2 ranks ${fz:-without --freeze-bn}: the run stopped between checkpoints and resumed ends with other bytes"
    checks=$((checks + 1))
  done
  # ... and --checkpoint-every changes nothing the run computes (before,
  # each of its checkpoints averaged the statistics the run went on from)
  st_same "$T/bn_full/checkpoint.safetensors" "$T/r2_full/checkpoint.safetensors" ||
    fail "2 ranks: --checkpoint-every 3 trained another model than no --checkpoint-every"
  checks=$((checks + 1))
fi
finish
