#!/usr/bin/env bash
# imshard-train under faults: a rank killed mid-training ends the job
# (every other rank exits, non-zero, naming the lost rank) well within 60
# s; a rank that hangs alive (SIGSTOP) ends it through the other rank's
# --collective-timeout, also when it is lost in validation, while rank 0
# writes a checkpoint or at the run's end; a NaN injected into a batch stops the run (every
# rank) at that step with the checkpoint before it kept; a run killed with SIGKILL at random points, checkpoints being written
# every step, always leaves a checkpoint that resumes, and resuming after
# the kills ends with the bytes of an uninterrupted run (every tensor and
# the metadata but the run's wall times).
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1
: "${IMSHARD_TRAIN:?IMSHARD_TRAIN must point at imshard-train}"

expect 0 "$IMSHARD" sample "$T/s" --classes 4 --per-class 15 --quiet
expect 0 "$IMSHARD" convert folder "$T/s" -o "$T/p" --val-ratio 0.25 --seed 3 --quiet
fit_cmd=("$IMSHARD_TRAIN" --train "$T/p/train.json" --val "$T/p/val.json" --model convnet7 --size 16 --threads 1 --batch-size 8 --quiet)
fit() { "${fit_cmd[@]}" "$@"; }

# pids of imshard-train processes whose arguments hold TAG (the run's own
# scratch folder, so nothing else on the machine matches)
train_pids() { pgrep -f "imshard-train.*$1" || true; }
# gone TAG: no process of the run tagged TAG is left. mpirun returns as
# soon as it has sent the last rank SIGKILL, without waiting for it; a
# rank in a system call that cannot be interrupted (an fsync on a loaded
# disk) dies only when the call returns: 5 s are allowed for that (a rank
# still there then is one that was not killed)
gone() {
  local i
  for ((i = 0; i < 100; i++)); do
    [ -z "$(train_pids "$1")" ] && return 0
    sleep 0.05
  done
  return 1
}
# rank1 TAG: sets rank1_pid to the rank-1 process of the run tagged TAG;
# false while there is none (retried: under load a rank can still be
# starting when the other has logged)
rank1() {
  rank1_pid=""
  for p in $(train_pids "$1"); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1'; then
      rank1_pid=$p
    fi
  done
  [ -n "$rank1_pid" ]
}

# --- a rank killed: the others do not wait forever -----------------------
if have_mpi; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  # long enough never to finish on its own within the test
  ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" timeout 120 mpirun -np 2 "$IMSHARD_TRAIN" \
    --train "$T/p/train.json" --val "$T/p/val.json" --model convnet7 --size 16 --threads 1 \
    --batch-size 4 --epochs 100000 --quiet --log-dir "$T/dead" >"$T/dead.out" 2>&1 &
  job=$!
  checks=$((checks + 1))
  wait_for test -s "$T/dead/metrics.jsonl" || fail "the 2-rank run never logged a step"
  wait_for rank1 "$T/dead"
  victim=$rank1_pid
  checks=$((checks + 1))
  [ -n "$victim" ] || fail "no rank 1 process found: $(tail -n 3 "$T/dead.out" | tr '\n' ' ')"
  t0=$SECONDS
  [ -n "$victim" ] && kill -9 "$victim"
  wait "$job"
  rc=$?
  took=$((SECONDS - t0))
  checks=$((checks + 1))
  [ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "the job ended with $rc after rank 1 was killed (124: still running after 120 s)"
  checks=$((checks + 1))
  [ "$took" -le 60 ] || fail "the job took $took s to end after rank 1 was killed"
  contains "$T/dead.out" "rank 1"
  checks=$((checks + 1))
  gone "$T/dead" || fail "ranks still running 5 s after the job ended"
fi

# progressed MTIME PID: the checkpoint changed since MTIME, or PID ended
progressed() {
  [ "$(stat -c %y "$T/part/checkpoint.safetensors" 2>/dev/null)" != "$1" ] || ! kill -0 "$2" 2>/dev/null
}

# --- a rank that hangs alive: the collective timeout ends the job --------
if have_mpi; then
  ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" timeout 120 mpirun -np 2 "$IMSHARD_TRAIN" \
    --train "$T/p/train.json" --val "$T/p/val.json" --model convnet7 --size 16 --threads 1 \
    --batch-size 4 --epochs 100000 --quiet --log-dir "$T/hang" --collective-timeout 3 \
    >"$T/hang.out" 2>&1 &
  job=$!
  checks=$((checks + 1))
  wait_for test -s "$T/hang/metrics.jsonl" || fail "the 2-rank run never logged a step"
  stopped=""
  wait_for rank1 "$T/hang" && kill -STOP "$rank1_pid" && stopped=$rank1_pid
  checks=$((checks + 1))
  [ -n "$stopped" ] || fail "no rank 1 process found: $(tail -n 3 "$T/hang.out" | tr '\n' ' ')"
  t0=$SECONDS
  wait "$job"
  rc=$?
  took=$((SECONDS - t0))
  checks=$((checks + 1))
  [ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "the job ended with $rc with rank 1 stopped (124: still waiting after 120 s)"
  checks=$((checks + 1))
  [ "$took" -le 60 ] || fail "the job took $took s to end with rank 1 stopped"
  # the line says where the rank waited (before: no phase at all)
  contains "$T/hang.out" "rank 0: waited more than 3 s for the other ranks in a collective during training"
  # and that a healthy rank slower than the limit ends it too (before:
  # "a rank died or hangs", where a tiny limit kills a healthy job)
  contains "$T/hang.out" "or works alone for longer than that (then raise --collective-timeout)"
  [ -n "$stopped" ] && kill -9 "$stopped" 2>/dev/null
fi

# --- a rank that hangs before it joined: MPI_Init is watched too ---------
# Rank 1 stopped as soon as it exists, before MPI_Init: rank 0 waits there
# for it (before: forever, the watchdog started after the flags were
# parsed), and ends within --collective-timeout, read before MPI starts.
if have_mpi; then
  ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" timeout 60 mpirun -np 2 "$IMSHARD_TRAIN" \
    --train "$T/p/train.json" --val "$T/p/val.json" --model convnet7 --size 16 --threads 1 \
    --batch-size 4 --epochs 2 --quiet --log-dir "$T/early" --collective-timeout 3 \
    >"$T/early.out" 2>&1 &
  job=$!
  stopped=""
  i=0
  while [ -z "$stopped" ] && [ $((i += 1)) -le 1000 ]; do
    rank1 "$T/early" && kill -STOP "$rank1_pid" && stopped=$rank1_pid
    [ -n "$stopped" ] || sleep 0.01
  done
  checks=$((checks + 1))
  [ -n "$stopped" ] || fail "no rank 1 process found: $(tail -n 3 "$T/early.out" | tr '\n' ' ')"
  t0=$SECONDS
  wait "$job"
  rc=$?
  took=$((SECONDS - t0))
  checks=$((checks + 1))
  [ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "the job ended with $rc with rank 1 stopped before MPI_Init (124: still waiting after 60 s)"
  checks=$((checks + 1))
  [ "$took" -le 20 ] || fail "the job took $took s to end with rank 1 stopped before MPI_Init"
  contains "$T/early.out" "rank 0: waited more than 3 s for the other ranks in a collective during the start (MPI_Init)"
  absent "$T/early/summary.json"
  [ -n "$stopped" ] && kill -9 "$stopped" 2>/dev/null
fi

# --- a rank lost in validation, a checkpoint or the run's end ------------
# IMSHARD_INJECT_SIGNAL=STOP|KILL makes rank 1 raise that signal on itself
# where the loop reaches IMSHARD_INJECT_SIGNAL_AT: a rank stopped ends the
# job within --collective-timeout, one killed at once, rank 0's line
# naming where it waited; no rank is left running, and neither a
# summary.json of a finished run nor a checkpoint that does not resume is
# left behind.
# lost NAME SIGNAL AT ARGS...: 2 ranks, rank 1 (or $who) raising SIGNAL
# at AT; $rc and $took are the job's, $T/NAME.out its output
lost() {
  local name=$1 sig=$2 at=$3 who=${who:-1}
  shift 3
  local t0=$SECONDS
  IMSHARD_INJECT_SIGNAL=$sig IMSHARD_INJECT_SIGNAL_AT=$at IMSHARD_INJECT_SIGNAL_RANK=$who \
    ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" timeout 60 mpirun -np 2 "${fit_cmd[@]}" \
    --collective-timeout 3 --log-dir "$T/$name" "$@" >"$T/$name.out" 2>&1
  rc=$?
  took=$((SECONDS - t0))
  checks=$((checks + 1))
  [ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "$name: the job ended with $rc with rank $who's SIG$sig at $at (124: still running after 60 s)"
  checks=$((checks + 1))
  [ "$took" -le 45 ] || fail "$name: the job took $took s to end with rank $who's SIG$sig at $at"
  checks=$((checks + 1))
  gone "$T/$name" || { fail "$name: ranks still running 5 s after the job ended"; kill -9 $(train_pids "$T/$name") 2>/dev/null; }
  absent "$T/$name/summary.json"
}
# resumes NAME: the checkpoint in $T/NAME.ck resumes to the run's end
resumes() {
  expect 0 fit --epochs 2 --checkpoint-dir "$T/$1.ck" --resume
  exists "$T/$1.ck/checkpoint.safetensors"
  same "$(find "$T/$1.ck" -name 'checkpoint.safetensors.tmp*' | wc -l)" 0 "temporaries left in $1.ck after resuming"
}
run env IMSHARD_INJECT_SIGNAL=STOP IMSHARD_INJECT_SIGNAL_AT=checkpoint:0 "${fit_cmd[@]}" --epochs 1
same "$rc" 1 "exit status with a bad IMSHARD_INJECT_SIGNAL_AT"
contains "$T/err" "IMSHARD_INJECT_SIGNAL_AT must be validation, checkpoint or end"
run env IMSHARD_INJECT_SIGNAL=HUP IMSHARD_INJECT_SIGNAL_AT=end "${fit_cmd[@]}" --epochs 1
same "$rc" 1 "exit status with a bad IMSHARD_INJECT_SIGNAL"
contains "$T/err" "IMSHARD_INJECT_SIGNAL must be STOP or KILL, got 'HUP'"
if have_mpi; then
  waited="rank 0: waited more than 3 s for the other ranks in a collective during"
  lost val-stop STOP validation --epochs 2
  contains "$T/val-stop.out" "$waited validation"
  lost val-kill KILL validation --epochs 2
  contains "$T/val-kill.out" "rank 1"
  # stopped while rank 0 writes the checkpoint: rank 0 writes it and
  # waits in the next epoch's first step
  lost ck-stop STOP checkpoint --epochs 2 --checkpoint-dir "$T/ck-stop.ck"
  contains "$T/ck-stop.out" "$waited training"
  resumes ck-stop
  # killed while rank 0 writes the second checkpoint: the first, or the
  # second whole, is left, and resumes
  lost ck-kill KILL checkpoint:2 --epochs 2 --checkpoint-every 1 --checkpoint-dir "$T/ck-kill.ck"
  contains "$T/ck-kill.out" "rank 1"
  resumes ck-kill
  # rank 0 stopped before it writes the second checkpoint: rank 1 names
  # itself, and whatever rank 0 wrote as mpirun ended it resumes
  who=0 lost ck0-stop STOP checkpoint:2 --epochs 2 --checkpoint-every 1 --checkpoint-dir "$T/ck0-stop.ck"
  contains "$T/ck0-stop.out" "rank 1: waited more than 3 s for the other ranks in a collective during training"
  resumes ck0-stop
  lost end-stop STOP end --epochs 1
  contains "$T/end-stop.out" "$waited the run's end"
  lost end-kill KILL end --epochs 1 --checkpoint-dir "$T/end-kill.ck"
  contains "$T/end-kill.out" "rank 1"
  # lost after its last checkpoint, the run has trained all it will:
  # resuming writes the summary.json it lacks (before: "nothing to
  # train", exit 0, and the folder never got one)
  expect 0 fit --epochs 1 --checkpoint-dir "$T/end-kill.ck" --log-dir "$T/end-kill" --resume
  contains "$T/out" "wrote the summary.json"
  exists "$T/end-kill/summary.json"
  [ -e "$T/end-kill/summary.json" ] && same "$(json "$T/end-kill/summary.json" '(j["epochs"], j["steps"], j["images"])')" "(1, 2, 32)" "the summary written on resuming"
  # one that has it is not touched
  cp "$T/end-kill/summary.json" "$T/summary.before"
  expect 0 fit --epochs 1 --checkpoint-dir "$T/end-kill.ck" --log-dir "$T/end-kill" --resume
  contains "$T/out" "no file changed"
  expect 0 cmp "$T/summary.before" "$T/end-kill/summary.json"
  # nor is a folder the run never logged to
  expect 0 fit --epochs 1 --checkpoint-dir "$T/end-kill.ck" --log-dir "$T/end-kill.new" --resume
  contains "$T/out" "no file changed"
  absent "$T/end-kill.new/summary.json"
fi

# --- a NaN injected into one batch ---------------------------------------
# IMSHARD_INJECT_NAN_STEP=N makes a pixel of step N's batch NaN: the run
# stops at that step, naming it, and keeps the checkpoint of the step before.
run env IMSHARD_INJECT_NAN_STEP=4 "${fit_cmd[@]}" --epochs 3 --checkpoint-dir "$T/nan" --checkpoint-every 1
same "$rc" 1 "exit status of a run fed a NaN"
one_line "$T/err"
contains "$T/err" "loss is NaN at step 4"
kept_step=$(python3 -c 'import json,struct,sys; d=open(sys.argv[1],"rb").read(); n=struct.unpack("<Q",d[:8])[0]; print(json.loads(d[8:8+n])["__metadata__"]["step"])' "$T/nan/checkpoint.safetensors")
same "$kept_step" 3 "checkpoint kept from the step before the NaN"
run env IMSHARD_INJECT_NAN_STEP=0 "${fit_cmd[@]}" --epochs 1
same "$rc" 1 "exit status with a bad IMSHARD_INJECT_NAN_STEP"
contains "$T/err" "IMSHARD_INJECT_NAN_STEP must be a step number"
# on one rank of two: every rank stops at that step
if have_mpi; then
  run env IMSHARD_INJECT_NAN_STEP=2 IMSHARD_INJECT_NAN_RANK=1 ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" \
    timeout 120 mpirun -np 2 "${fit_cmd[@]}" --epochs 3
  checks=$((checks + 1))
  [ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "2 ranks with a NaN on rank 1 exited $rc"
  contains "$T/err" "loss is NaN at step 2"
  # the loss is summed over ranks, so every rank stops at that step and
  # the job ends without an abort, saying so once (before: one line per
  # rank, their pieces interleaved, and MPI_ABORT's banner)
  same "$(grep -c 'loss is NaN' "$T/err")" 1 "the NaN stop told once over 2 ranks"
  lacks "$T/err" "MPI_ABORT"
fi

# --- SIGKILL at random points, then resume = uninterrupted ---------------
# A checkpoint every step, so many kills land while one is being written.
common=(--epochs 20 --seed 7 --checkpoint-every 1)
expect 0 fit "${common[@]}" --checkpoint-dir "$T/full"
killed=0
for kill_no in 1 2 3 4; do
  before=$(stat -c %y "$T/part/checkpoint.safetensors" 2>/dev/null)
  # the binary itself in the background (a function would run in a
  # subshell, and SIGKILL would reach the subshell, not the trainer)
  "${fit_cmd[@]}" "${common[@]}" --checkpoint-dir "$T/part" \
    $([ -e "$T/part/checkpoint.safetensors" ] && echo --resume) >"$T/kill.out" 2>&1 &
  pid=$!
  # once this attempt has written a checkpoint of its own (or ended), a
  # random 0-150 ms more
  wait_for progressed "$before" "$pid" || fail "attempt $kill_no never wrote a checkpoint"
  sleep "0.$(printf '%03d' $((RANDOM % 150)))"
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  [ $? = 137 ] && killed=$((killed + 1))
  # whatever the moment, the checkpoint left behind is whole: a complete
  # safetensors file (the reader checks the header and every tensor's
  # extent), which the next attempt resumes from
  cp "$T/part/checkpoint.safetensors" "$T/probe.safetensors"
  expect 0 /usr/bin/python3 "$IMS_SRC/tests/cli/st_compare.py" "$T/probe.safetensors" "$T/probe.safetensors"
done
# the kills must have interrupted runs, or this tests nothing
same "$((killed >= 3))" 1 "runs killed mid-way: $killed of 4"
expect 0 fit "${common[@]}" --checkpoint-dir "$T/part" --resume
/usr/bin/python3 "$IMS_SRC/tests/cli/st_tool.py" same "$T/full/checkpoint.safetensors" "$T/part/checkpoint.safetensors" >/dev/null ||
  fail "the run resumed after 4 kills ends with other bytes than the uninterrupted run"
checks=$((checks + 1))
finish
