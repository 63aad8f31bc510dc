#!/usr/bin/env bash
# Memory running out at each allocation in turn (tests/fixtures/
# failmalloc.so, preloaded: the Nth malloc, calloc or realloc fails)
# while verify, info, convert, list, subset, pack, extract, bench-load,
# sample, report, export and eval run on good data (eval also as two
# ranks, rank 1 failing), and while imshard-train resumes or checks its
# --log-dir. Every run ends with exit 0, or 1 and a line saying memory
# ran out; none crashes, and none blames the data: no "not valid JSON",
# no "FAILED: ... records bad", no manifest "class counts" (before: a
# manifest parse that ran out was "not valid JSON (truncated or
# edited?)", a record or decoder that could not be had made verify say
# FAILED with bad records by class, the decoders' clean-up crashed, and
# a manifest built without its class counts was written). A convert that
# ends 0 leaves splits that verify passes; the other commands, ending 0,
# write what a run with nothing failing writes, and, ending 1, leave
# nothing behind (pack --force: the split it would have replaced,
# whole). Each sweep below says what it found before.
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1
if asan_build; then
  echo "skipped: the sanitizer's runtime must come first (no preloaded malloc)"
  exit 77
fi
fm="$(dirname "$IMS_FIXTURES")/failmalloc.so"
[ -f "$fm" ] || { echo "FAIL: no $fm (built with the tests)"; exit 1; }

expect 0 "$IMSHARD" sample "$T/img" --classes 4 --per-class 12 --quiet
expect 0 "$IMSHARD" convert folder "$T/img" -o "$T/p" --val-ratio 0.25 --shards 2 --quiet

# sweep FROM TO STEP CMD...: CMD with allocation N failing, N = FROM, FROM
# + STEP, ... TO; $oom counts the runs that said memory ran out; a run
# that ends 1 must say so. The functions named by before (run first),
# after_ok (run when CMD ended 0) and after_fail (when it ended 1), when
# set, take N.
before="" after_ok="" after_fail=""
sweep() {
  local from=$1 to=$2 step=$3 n
  shift 3
  oom=0
  for ((n = from; n <= to; n += step)); do
    [ -z "$before" ] || "$before" "$n"
    run env FAILMALLOC_AFTER="$n" LD_PRELOAD="$fm" timeout 60 "$@"
    checks=$((checks + 1))
    case $rc in
    0) [ -z "$after_ok" ] || "$after_ok" "$n" ;;
    1)
      # libgomp's own: a worker thread whose memory could not be had
      if grep -qiE 'out of memory|cannot allocate|insufficient memory|memory allocation|libgomp: Thread creation failed' "$T/err"; then
        oom=$((oom + 1))
      else
        fail "allocation $n failing: exit 1 without saying memory ran out: $*"
        sed 's/^/  | /' "$T/err" | head -3 >&2
      fi
      [ -z "$after_fail" ] || "$after_fail" "$n" ;;
    *) fail "allocation $n failing: exit $rc: $*"; sed 's/^/  | /' "$T/err" | head -3 >&2 ;;
    esac
    if grep -qE 'not valid JSON|truncated|FAILED|records bad|class counts' "$T/err"; then
      fail "allocation $n failing: the data blamed: $*"
      sed 's/^/  | /' "$T/err" | head -3 >&2
    fi
  done
  # the sweep went past the command's allocations, and met failures
  [ "$rc" = 0 ] || fail "the last run (allocation $to failing) did not end 0: $*"
  [ "$oom" -gt 0 ] || fail "no run said that memory ran out: $*"
}

# calls_of CMD...: the allocations CMD makes with none failing
calls_of() {
  env FAILMALLOC_REPORT="$T/calls" LD_PRELOAD="$fm" "$@" >/dev/null 2>&1
  cat "$T/calls"
}

# refused_tail BACK FILE ORIG WHAT CMD...: CMD, which is refused, with
# each of its last BACK allocations failing in turn: every run ends 1
# (refused, or out of memory) leaving FILE as ORIG, and one says memory
# ran out; WHAT names FILE in a failure
refused_tail() {
  local back=$1 file=$2 orig=$3 what=$4 calls n
  shift 4
  calls=$(calls_of "$@")
  oom=0
  for ((n = calls - back; n <= calls; n++)); do
    run env FAILMALLOC_AFTER="$n" LD_PRELOAD="$fm" timeout 60 "$@"
    checks=$((checks + 1))
    if [ "$rc" != 1 ] || ! cmp -s "$file" "$orig"; then
      fail "allocation $n failing: exit $rc (refused, or out of memory, expected), $what $(cmp -s "$file" "$orig" && echo kept || echo changed)"
      break
    fi
    grep -q "out of memory" "$T/err" && oom=$((oom + 1))
  done
  [ "$oom" -gt 0 ] || fail "no run of the last $back allocations said memory ran out: $what"
}

# each command's last N is well past its allocations here (verify -j 1
# made 190, verify -j 2 --decode 497, info 144, convert 1183; list 182,
# subset 111, pack --encoding png --resize 20 1370, pack keep 503, extract
# -i 200, bench-load 560, sample 84, report 840, export 1500 from main)
sweep 0 300 1 "$IMSHARD" verify "$T/p/train.json" -j 1
sweep 0 800 2 "$IMSHARD" verify "$T/p/train.json" -j 2 --decode
sweep 0 250 1 "$IMSHARD" info "$T/p/val.json"

# convert: into a fresh folder each time; what it wrote, when it ended 0,
# verifies
fresh_out() { rm -rf "$T/c"; }
verifies() {
  local s
  for s in train val; do
    "$IMSHARD" verify "$T/c/$s.json" -q >/dev/null 2>&1 ||
      fail "allocation $1 failing: convert ended 0, and its $s split does not verify"
  done
}
before=fresh_out after_ok=verifies
sweep 0 1800 4 "$IMSHARD" convert folder "$T/img" -o "$T/c" --val-ratio 0.25 -j 2 --quiet
before="" after_ok=""

# the other data-side commands, each into a fresh folder $T/o; a failed
# run leaves nothing there (but what each names below), a run that ends 0
# all it writes, whole (each last N as counted above)
fresh_o() { rm -rf "$T/o"; mkdir "$T/o"; }
empty_o() {
  [ -z "$(ls -A "$T/o")" ] || fail "allocation $1 failing: the failed run left: $(ls -A "$T/o" | tr '\n' ' ')"
}
before=fresh_o after_fail=empty_o

expect 0 "$IMSHARD" list "$T/img" -o "$T/l" --no-shuffle --quiet
listed() {
  same "$(cat "$T/o/l_train.lst" "$T/o/l_test.lst" 2>/dev/null | wc -l)" 48 "(allocation $1 failing: list ended 0)"
  exists "$T/o/l.classes"
}
after_ok=listed
sweep 0 220 1 "$IMSHARD" list "$T/img" -o "$T/o/l" --train-ratio 0.75 --test-ratio 0.25 --quiet

# subset: before, the classes file beside the list not found for memory
# was taken as none: the subset was written without its classes file and
# ended 0 (and a copy of its name that failed was "cannot name the
# classes file")
subsetted() {
  same "$(wc -l <"$T/o/n/s.lst")" 10 "(allocation $1 failing: subset ended 0)"
  exists "$T/o/n/s.classes"
}
after_ok=subsetted
sweep 0 140 1 "$IMSHARD" subset "$T/l_train.lst" -o "$T/o/n/s.lst" --total 10 --quiet

# pack --force over a split of 8 records: a failed run leaves it whole
# (before: the old manifest was removed, then memory ran out, and no
# split was left; an old manifest not read for memory left its shard
# beside the new split; a file whose PNG encoder ran out of memory was
# skipped as a bad image, and the split ended 0 without it; a shard
# finished as memory ran out was left as NAME-00000.mdb.compact)
expect 0 "$IMSHARD" subset "$T/l_train.lst" -o "$T/small.lst" --per-class 2 --quiet
expect 0 "$IMSHARD" pack "$T/small.lst" "$T/img" -o "$T/old/train" --threads 1 --quiet
old_split() { rm -rf "$T/o"; mkdir "$T/o"; cp -r "$T/old" "$T/o/p"; }
old_kept() {
  same "$(ls "$T/o/p" | tr '\n' ' ')" "train-00000-of-00001.mdb train.json " \
    "(allocation $1 failing: pack failed)"
  "$IMSHARD" verify "$T/o/p/train.json" -q >/dev/null 2>&1 ||
    fail "allocation $1 failing: pack failed, and the split it would replace does not verify"
}
packed() {
  same "$(ls "$T/o/p" | tr '\n' ' ')" "train-00000-of-00002.mdb train-00001-of-00002.mdb train.json " \
    "(allocation $1 failing: pack ended 0)"
  "$IMSHARD" verify "$T/o/p/train.json" -q >/dev/null 2>&1 ||
    fail "allocation $1 failing: pack ended 0, and its split does not verify"
}
before=old_split after_ok=packed after_fail=old_kept
sweep 0 1500 3 "$IMSHARD" pack "$T/l_train.lst" "$T/img" -o "$T/o/p/train" --shards 2 \
  --threads 1 --force --encoding png --resize 20 --quiet
sweep 0 560 5 "$IMSHARD" pack "$T/l_train.lst" "$T/img" -o "$T/o/p/train" --shards 2 \
  --threads 1 --force --quiet
# the last allocations of that pack, one at a time, with its summary: a
# run that ends 0 counts the shards it wrote (before: the manifest read
# back for the count could run out, and the summary said "into 0 shards")
old_split 0
calls=$(calls_of "$IMSHARD" pack "$T/l_train.lst" "$T/img" -o "$T/o/p/train" --shards 2 \
  --threads 1 --force)
packed_said() {
  packed "$1"
  grep -q "into 2 shards" "$T/err" ||
    fail "allocation $1 failing: pack ended 0, and its summary does not say 'into 2 shards': $(grep -m1 packed "$T/err")"
}
after_ok=packed_said
sweep $((calls - 120)) "$calls" 1 "$IMSHARD" pack "$T/l_train.lst" "$T/img" -o "$T/o/p/train" \
  --shards 2 --threads 1 --force

# extract: before, an --index that could not be kept was bad usage (exit
# 2) or a crash; extract.lst was written empty when its text could not
# be had, ending 0; a failure after extract.lst left it (and
# extract.classes) naming the files
no_lists() {
  [ ! -e "$T/o/x/extract.lst" ] && [ ! -e "$T/o/x/extract.classes" ] ||
    fail "allocation $1 failing: the failed extract left its lists"
}
expect 0 "$IMSHARD" extract "$T/p/val.json" -o "$T/x" -i 1 -i 4 -i 7 --quiet
want_x="$(ls "$T/x" | tr '\n' ' ')"
extracted() {
  same "$(ls "$T/o/x" | tr '\n' ' ')" "$want_x" "(allocation $1 failing: extract ended 0)"
  cmp -s "$T/o/x/extract.lst" "$T/x/extract.lst" ||
    fail "allocation $1 failing: extract ended 0 with another extract.lst"
}
before=fresh_o after_ok=extracted after_fail=no_lists
sweep 0 240 1 "$IMSHARD" extract "$T/p/val.json" -o "$T/o/x" -i 1 -i 4 -i 7 --quiet

# bench-load and sample: cheap sweeps (nothing found)
before=fresh_o after_ok="" after_fail=""
sweep 0 640 8 "$IMSHARD" bench-load "$T/p/train.json" --size 16 --threads 1 --epochs 1 --seconds 0 -b 4
sampled() {
  same "$(ls "$T"/o/s/*/* | wc -l)" 6 "(allocation $1 failing: sample ended 0)"
}
after_ok=sampled after_fail=empty_o
sweep 0 100 2 "$IMSHARD" sample "$T/o/s" --classes 2 --per-class 3 --threads 1 --quiet

# report of a short training run: before, its lock file not read for
# memory became a diagnostic on a page that ended 0
: "${IMSHARD_TRAIN:?IMSHARD_TRAIN must point at imshard-train}"
expect 0 "$IMSHARD_TRAIN" --train "$T/p/train.json" --val "$T/p/val.json" --model convnet7 --size 16 \
  --threads 1 --batch-size 4 --max-steps 2 --checkpoint-dir "$T/ck" --log-dir "$T/run" --quiet
expect 0 "$IMSHARD" report "$T/run" -o "$T/r.html" --csv "$T/csv" --quiet
reported() {
  cmp -s "$T/o/r.html" "$T/r.html" && diff -r "$T/o/csv" "$T/csv" >/dev/null ||
    fail "allocation $1 failing: report ended 0 with another page or CSV files"
}
after_ok=reported after_fail=empty_o
sweep 0 900 1 "$IMSHARD" report "$T/run" -o "$T/o/r.html" --csv "$T/o/csv" --quiet

# export runs imshard-model, whose CUDA runtime constructors do not
# check their allocations: counted from main
expect 0 "$IMSHARD" export "$T/ck/checkpoint.safetensors" -o "$T/w.safetensors" --quiet
exported() {
  cmp -s "$T/o/w.safetensors" "$T/w.safetensors" ||
    fail "allocation $1 failing: export ended 0 with another file"
}
after_ok=exported after_fail=empty_o
export FAILMALLOC_FROM_MAIN=1
sweep 0 1700 10 "$IMSHARD" export "$T/ck/checkpoint.safetensors" -o "$T/o/w.safetensors" --quiet

# eval -o, its last allocations (reading and decoding the records, the
# files): before, a record whose decoding ran out of memory was a bad
# record, replaced and left out of the scores (exit 0 on 11 of 12
# records; the cropping JPEG decoder's "Insufficient memory" was a
# corrupt image too), and the CSV files written before memory ran out
# were left in the folder made for them. The training split the
# checkpoint records is moved away first: then no search for its images
# in the split follows the pass (swept after this, every fourth)
expect 0 "$IMSHARD" eval "$T/ck/checkpoint.safetensors" "$T/p/val.json" --threads 1 -o "$T/e" --quiet
evaluated() {
  diff -r "$T/o/e" "$T/e" >/dev/null ||
    fail "allocation $1 failing: eval ended 0 with another evaluation: $(diff -rq "$T/o/e" "$T/e" 2>&1 | head -2 | tr '\n' ' ')"
}
after_ok=evaluated after_fail=empty_o
ev=("$IMSHARD" eval "$T/ck/checkpoint.safetensors" "$T/p/val.json" --threads 1 -o "$T/o/e" --quiet)
mv "$T/p/train.json" "$T/p/train.away"
calls=$(calls_of "${ev[@]}")
sweep $((calls - 260)) "$calls" 1 "${ev[@]}"
mv "$T/p/train.away" "$T/p/train.json"
calls=$(calls_of "${ev[@]}")
sweep $((calls - 900)) "$calls" 4 "${ev[@]}"

# imshard-train resuming a run that is complete: its checkpoint's run
# history read as memory runs out is no damaged checkpoint (before: "its
# run history is not a JSON object"); the last allocations, every third
cp "$T/ck/checkpoint.safetensors" "$T/ck.orig"
resume=("$IMSHARD_TRAIN" --train "$T/p/train.json" --val "$T/p/val.json" --model convnet7 --size 16
  --threads 1 --batch-size 4 --max-steps 2 --checkpoint-dir "$T/ck" --log-dir "$T/run" --resume)
calls=$(calls_of "${resume[@]}")
unchanged() {
  cmp -s "$T/ck/checkpoint.safetensors" "$T/ck.orig" ||
    fail "allocation $1 failing: the complete run's checkpoint changed"
}
after_ok=unchanged after_fail=unchanged
sweep $((calls - 600)) "$calls" 3 "${resume[@]}"

# a resume with another --lr that trains on: a run that ends 0 says so
# ("resumed with other settings"); this run's options, built to compare
# with the checkpoint's as memory runs out, are whole or the resume stops
# (before: a member dropped for memory passed for an option unchanged,
# and the resume trained without the line). They are built about 700
# allocations before the end: swept there, every second, and met.
expect 0 "$IMSHARD_TRAIN" --train "$T/p/train.json" --model convnet7 --size 16 --threads 1 \
  --batch-size 4 --max-steps 2 --checkpoint-dir "$T/cl" --quiet
cp "$T/cl/checkpoint.safetensors" "$T/cl.orig"
relr=("$IMSHARD_TRAIN" --train "$T/p/train.json" --model convnet7 --size 16 --threads 1
  --batch-size 4 --max-steps 3 --checkpoint-dir "$T/cl" --resume --lr 0.2)
calls=$(calls_of "${relr[@]}")
compared=0
for ((n = calls - 760; n <= calls - 580; n += 2)); do
  cp "$T/cl.orig" "$T/cl/checkpoint.safetensors"
  run env FAILMALLOC_AFTER="$n" LD_PRELOAD="$fm" timeout 60 "${relr[@]}"
  checks=$((checks + 1))
  case $rc in
  0) grep -qF "resumed with other settings: lr 0.1 -> 0.2" "$T/err" ||
    fail "allocation $n failing: the resume with another --lr ended 0 without saying so" ;;
  1)
    grep -qF "out of memory comparing its options" "$T/err" && compared=$((compared + 1))
    grep -qiE 'out of memory|cannot allocate|insufficient memory' "$T/err" ||
      fail "allocation $n failing: exit 1 without saying memory ran out: $(head -n 1 "$T/err")" ;;
  *) fail "allocation $n failing: exit $rc: ${relr[*]}" ;;
  esac
done
checks=$((checks + 1))
[ "$compared" -gt 0 ] || fail "no run ran out of memory comparing the options: the sweep missed them"

# a --log-dir whose summary.json is a split's manifest: refused at each
# of the last allocations, or out of memory; never taken for an earlier
# run's summary that --force removes (before: a manifest not parsed for
# memory was no manifest, and the run replaced it)
expect 0 "$IMSHARD" pack "$T/l_train.lst" "$T/img" -o "$T/lg/summary" --threads 1 --quiet
cp "$T/lg/summary.json" "$T/lg.orig"
over=("$IMSHARD_TRAIN" --train "$T/p/train.json" --model convnet7 --size 16 --threads 1
  --batch-size 4 --max-steps 1 --log-dir "$T/lg" --force)
refused_tail 300 "$T/lg/summary.json" "$T/lg.orig" "the split's manifest" "${over[@]}"

# a resume refused because its --log-dir holds another run's
# metrics.jsonl (the first run's): refused, or out of memory, at each of
# its last allocations; never a run (before: a first line not read for
# memory passed for a file naming no run, and the resume appended to the
# other run's metrics.jsonl)
expect 0 "$IMSHARD_TRAIN" --train "$T/p/train.json" --model convnet7 --size 16 --threads 1 \
  --batch-size 4 --epochs 2 --max-steps 1 --checkpoint-dir "$T/cb" --log-dir "$T/lb" --quiet
mkdir "$T/lk" && cp "$T/run/metrics.jsonl" "$T/lk/"
refused=("$IMSHARD_TRAIN" --train "$T/p/train.json" --model convnet7 --size 16 --threads 1
  --batch-size 4 --epochs 2 --checkpoint-dir "$T/cb" --log-dir "$T/lk" --resume)
refused_tail 80 "$T/lk/metrics.jsonl" "$T/run/metrics.jsonl" "the other run's metrics.jsonl" \
  "${refused[@]}"
unset FAILMALLOC_FROM_MAIN
before="" after_ok="" after_fail=""

# two ranks, rank 1 out of memory for the result of a gather its peer
# makes (which folder each rank's --checkpoint-dir and --log-dir is, read
# from the lock files: the first allocation after its first open of one,
# FAILMALLOC_FROM_OPEN): rank 1 cannot take part, so it aborts the job,
# which ends at once with its line (before: it went on to the set-up's
# agreement, whose gather paired with its peer's out of step, and both
# waited until --collective-timeout)
if have_mpi; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  two=(--train "$T/p/train.json" --val "$T/p/val.json" --model convnet7 --size 16 --threads 1
    --batch-size 4 --max-steps 2 --quiet --collective-timeout 30)
  for dirs in "--checkpoint-dir $T/r2/ck --log-dir $T/r2/log" "--log-dir $T/r2/log"; do
    rm -rf "$T/r2"
    t0=$SECONDS
    # shellcheck disable=SC2086 # $dirs: the flags, split
    ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" timeout 90 mpirun -np 1 "$IMSHARD_TRAIN" "${two[@]}" $dirs : \
      -np 1 env FAILMALLOC_FROM_OPEN=imshard-train.lock FAILMALLOC_AFTER=0 LD_PRELOAD="$fm" \
      "$IMSHARD_TRAIN" "${two[@]}" $dirs >"$T/r2.out" 2>&1
    rc=$? took=$((SECONDS - t0))
    checks=$((checks + 1))
    [ "$rc" = 1 ] && [ "$took" -le 20 ] ||
      fail "rank 1 out of memory where its peer gathers ($dirs): exit $rc after $took s (1 at once expected; 124: still running after 90 s)"
    contains "$T/r2.out" "rank 1: cannot lock"
    contains "$T/r2.out" "out of memory"
  done

  # two ranks evaluating, rank 1 out of memory at each of its allocations
  # around the gather of the predictions (200 to 140 before its last):
  # -o's folder holds the four files of a run with
  # nothing failing, or is not there (before: rank 1, failing after the
  # gather, aborted the job while rank 0 wrote the files, and left some
  # of them, or a temporary, in the folder made for them). The exit is
  # not checked past a hang: Open MPI's own code crashes where memory
  # runs out inside it (MPI_Finalize, its progress thread)
  ev2=(eval "$T/ck/checkpoint.safetensors" "$T/p/val.json" --batch-size 8 --threads 1 --quiet
    --collective-timeout 30 -o "$T/e2")
  rm -rf "$T/e2"
  ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" timeout 90 mpirun -np 1 "$IMSHARD" "${ev2[@]}" : \
    -np 1 env FAILMALLOC_FROM_MAIN=1 FAILMALLOC_REPORT="$T/calls2" LD_PRELOAD="$fm" \
    "$IMSHARD" "${ev2[@]}" >"$T/e2.out" 2>&1 || fail "2-rank eval with nothing failing: $(head -3 "$T/e2.out")"
  rm -rf "$T/e2.ref" && mv "$T/e2" "$T/e2.ref"
  total=$(cat "$T/calls2")
  for ((k = 200; k >= 140; k--)); do
    rm -rf "$T/e2"
    ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" timeout 90 mpirun -np 1 "$IMSHARD" "${ev2[@]}" : \
      -np 1 env FAILMALLOC_FROM_MAIN=1 FAILMALLOC_AFTER=$((total - k)) LD_PRELOAD="$fm" \
      "$IMSHARD" "${ev2[@]}" >"$T/e2.out" 2>&1
    rc=$?
    checks=$((checks + 1))
    [ "$rc" != 124 ] || fail "2-rank eval, rank 1's allocation $((total - k)) failing: still running after 90 s"
    [ ! -e "$T/e2" ] || diff -r "$T/e2" "$T/e2.ref" >/dev/null ||
      fail "2-rank eval, rank 1's allocation $((total - k)) failing: exit $rc, -o holds $(ls "$T/e2" | tr '\n' ' ')"
  done
fi

finish
