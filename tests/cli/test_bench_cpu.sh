#!/usr/bin/env bash
# The CPU benchmarks' scripts (bench/load, bench/train, bench/pack,
# bench/convert, bench/scaling) on inputs small enough to run in seconds,
# from another folder, with spaces in WORK and CORPUS: a contender that
# fails is named and never turned into a figure, the command printed with
# the figures is the one that ran, and nothing is left behind or written
# into the source tree. Stand-ins (a failing baseline, a model_flops
# whose sgemm fails) stand for what breaks.
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1
bench_bin=${IMS_BENCH_BIN:-$(dirname "$(dirname "$IMSHARD")")/bench}
fake="$T/bin"
mkdir -p "$fake"
touch "$T/start"
corpus="$T/the corpus"

# a baseline that fails every run
printf '#!/bin/sh\necho "broken baseline: cannot start" >&2\nexit 3\n' >"$fake/fail"
# model_flops whose sgemm fails; its model lines are the real ones
printf '#!/bin/sh\n[ "$1" != --sgemm-threads ] || { echo "model_flops: sgemm: cannot allocate" >&2; exit 1; }\nexec "%s/model_flops" "$@"\n' "$bench_bin" >"$fake/model_flops_nosgemm"
# an imshard module whose Loader fails every time (FAKE_FAIL=all) or
# only the first time (first), else yields 5 batches of 4
mkdir -p "$T/fakepy"
cat >"$T/fakepy/imshard.py" <<'EOF'
import os
class Loader:
    def __init__(self, *a, **k):
        c = os.environ["FAKE_COUNT"]
        n = int(open(c).read()) + 1 if os.path.exists(c) else 1
        open(c, "w").write(str(n))
        if os.environ["FAKE_FAIL"] == "all" or (os.environ["FAKE_FAIL"] == "first" and n == 1):
            raise RuntimeError("imshard: cannot open the split (a fake failure)")
    def __iter__(self):
        for _ in range(5):
            yield [0] * 4, [0] * 4
EOF
# valgrind that fails on the first run it is given
printf '#!/bin/sh\necho "valgrind: failed to start tool" >&2\nexit 1\n' >"$fake/valgrind"
chmod +x "$fake"/*

# --- bench/load ---------------------------------------------------------------
load() {
  (cd / && env IMSHARD="$IMSHARD" FULL_DECODE="$bench_bin/full_decode" CORPUS="$corpus" N_IMAGES=20 \
    ROUNDS=2 BATCH=4 SIZE=32 PY_LIMIT=8 WORK="$T/load work" "$@" bash "$IMS_SRC/bench/load/run.sh")
}
# every run of a contender failed: named, and the run fails (before: a
# row of dashes and exit 0), its results written all the same
expect 1 load FULL_DECODE="$fake/fail"
same "$(tail -n1 "$T/err")" "summarize.py: every run of full_decode failed (2 of 2): no figures for it in $T/load work/results.json" "(load: a contender without a run)"
contains "$T/err" "run.sh: 1/full_decode failed (exit 3)"
same "$(json "$T/load work/results.json" 'j["ratios"]["t1_vs_full_decode"]["median"]')" None "(load: no ratio of a failed run)"
same "$(json "$T/load work/results.json" 'len(j["failed_runs"])')" 2 "(load: its failures recorded)"
same "$(json "$T/load work/results.json" 'j["ratios"]["scaling_t2_vs_t1"]["median"] > 0')" True "(load: the others' ratios)"
# the command printed with the figures names the interpreter the Python
# baselines ran with (before: PYTHON left out, so the command rerun
# elsewhere measured another Python)
contains "$T/out" " PYTHON=/usr/bin/python3 bench/load/run.sh"

# --- bench/train ----------------------------------------------------------------
train() {
  (cd / && env IMSHARD="$IMSHARD" IMSHARD_TRAIN="$IMSHARD_TRAIN" MODEL_FLOPS="$bench_bin/model_flops" \
    DATA="$T/train data" PER_CLASS=10 VAL_PER_CLASS=2 ROUNDS=2 BATCH=4 C7_STEPS=4 C7_LOG_EVERY=2 \
    R18_STEPS=1 R18_LOG_EVERY=1 MPI=0 TORCH=0 SGEMM_N=64 SGEMM_SECONDS=0.05 \
    ONLY="sgemm_t1 convnet7_t1" TORCH_LIB="$T/torch lib" WORK="$T/train work" "$@" bash "$IMS_SRC/bench/train/run.sh")
}
# every sgemm run failed: named, and the run fails (before: exit 0, its
# FLOP fractions "-"), the trainer's figures written all the same
expect 1 train MODEL_FLOPS="$fake/model_flops_nosgemm"
same "$(tail -n1 "$T/err")" "summarize.py: every run of sgemm_t1 failed (2 of 2): no figures for it in $T/train work/results.json" "(train: a contender without a run)"
same "$(json "$T/train work/results.json" 'j["ratios"]["flop_fraction_convnet7_t1"]["median"]')" None "(train: no ratio of a failed run)"
same "$(json "$T/train work/results.json" 'len(j["contenders"]["convnet7_t1"]["rounds"])')" 2 "(train: the trainer's rounds)"
contains "$T/out" " TORCH_PYTHON=python3 TORCH_LIB=$(printf %q "$T/torch lib") MPIRUN=mpirun WORK="
# the steps of one epoch are checked for the trainers that run (before:
# MPI=0 and ONLY without the MPI pair still refused MPI_STEPS=100 of 80
# images), and a trainer that runs is named
contains "$T/out" " MPI=0 MPI_MODEL=convnet7 MPI_SIZE=32 MPI_STEPS=100 "
expect 1 train C7_STEPS=30
same "$(tail -n1 "$T/err")" "run.sh: convnet7_t1: 30 steps of batch 4 need more than the 80 training images (raise PER_CLASS)" "(train: steps past an epoch)"

# bench/train/memory.sh: a WORK or DATA of other things is refused, its
# files kept (before: WORK/logs, DATA/images and DATA/packed removed)
memory() {
  (cd / && env IMSHARD="$IMSHARD" IMSHARD_TRAIN="$IMSHARD_TRAIN" CASES=convnet7:32:4:2 ROUNDS=1 THREADS=1 \
    TORCH=0 "$@" bash "$IMS_SRC/bench/train/memory.sh")
}
mkdir -p "$T/theirs/logs" "$T/theirs/images"
echo keep | tee "$T/theirs/logs/notes.txt" >"$T/theirs/images/notes.txt"
expect 1 memory WORK="$T/theirs" DATA="$T/memory data"
same "$(cat "$T/err")" "memory.sh: WORK='$T/theirs' holds files of its own (no .bench-memory of an earlier run): name a new or empty folder" "(memory: WORK of other things)"
expect 1 memory WORK="$T/memory work" DATA="$T/theirs"
same "$(cat "$T/err")" "memory.sh: '$T/theirs' exists but holds no sample of 80 per class (remove it or set DATA)" "(memory: DATA of other things)"
same "$(cat "$T/theirs/logs/notes.txt" "$T/theirs/images/notes.txt" | tr '\n' ' ')" "keep keep " "(memory: their files kept)"
expect 0 memory WORK="$T/memory work" DATA="$T/memory data"
contains "$T/out" "convnet7     32     4 |"

# --- bench/pack -----------------------------------------------------------------
expect 0 env -C / IMSHARD="$IMSHARD" JPEG_FLOOR="$bench_bin/jpeg_floor" CORPUS="$corpus" N_IMAGES=20 ROUNDS=1 \
  PY_LIMIT=4 SIZE_CHECK=0 WORK="$T/pack work" bash "$IMS_SRC/bench/pack/run.sh"
contains "$T/out" " PYTHON=/usr/bin/python3 bench/pack/run.sh"

# --- bench/scaling --------------------------------------------------------------
# the table is headed by the command that made it, every setting spelt
# out (before: no command at all; the runs' own lines only in a file)
expect 0 env -C / IMSHARD="$IMSHARD" IMSHARD_TRAIN="$IMSHARD_TRAIN" DATA="$T/scaling data" PER_CLASS=5 \
  EPOCHS=1 BATCHES=4 WORLDS=1 LOG_EVERY=2 WORK="$T/scaling work" bash "$IMS_SRC/bench/scaling/run.sh"
same "$(head -n1 "$T/out")" "command: env IMSHARD=$IMSHARD IMSHARD_TRAIN=$IMSHARD_TRAIN DATA=$(printf %q "$T/scaling data") PER_CLASS=5 MODEL=convnet7 SIZE=32 EPOCHS=1 BATCHES=4 WORLDS=1 LR32=0.05 LOG_EVERY=2 TARGET=0.6 DEVICE=cpu EXTRA= ROUNDS=1 MPIRUN=mpirun MPI_PIN=0 WORK=$(printf %q "$T/scaling work") bench/scaling/run.sh" "(scaling: the command)"
contains "$T/out" "each run's command line: $T/scaling work/commands.txt"
contains "$T/scaling work/commands.txt" "--epochs 1 --batch-size 4"
# one world size at one batch: no comparison, said (before: an empty table)
contains "$T/out" "no comparison: each round ran one configuration; give WORLDS or BATCHES more than one value to measure scaling"

# --- bench/convert --------------------------------------------------------------
convert() {
  (cd "${cwd:-/}" && env IMSHARD="$IMSHARD" N_IMAGES=20 N_VAL=4 ROUNDS=2 INSTR=0 WORK="$T/convert work" "$@" \
    bash "$IMS_SRC/bench/convert/run.sh")
}
# CORPUS relative to the repository root, as every bench takes it
# (before: taken from the current folder, and the train/ and val/
# symlinks pointed nowhere: "cannot list val: no image"); the corpus
# bench/load made above is used again, not made anew
rel=$(realpath -m --relative-to="$IMS_SRC" "$corpus")
cwd=$IMS_SRC expect 0 convert CORPUS="$rel"
contains "$T/out" "bench/convert: 24 images (train + val)"
lacks "$T/err" "make_corpus"
# the figures come with the command that made them, every setting
# spelt out, and the target's verdict (before: neither)
same "$(grep '^command: ' "$T/out")" "command: env IMSHARD=$IMSHARD CORPUS=$(printf %q "$IMS_SRC/$rel") N_IMAGES=20 N_VAL=4 ROUNDS=2 WORK=$(printf %q "$T/convert work") ENC_ARGS= INSTR=0 VALGRIND=valgrind bench/convert/run.sh" "(convert: the command)"
same "$(sed -n 's/.*overhead (convert - pack) \/ pack: median \([-+0-9.]*\)%.*target < 5%: \(.*\)$/\1 \2/p' "$T/out" |
  awk '{ print ($1 < 5) == ($2 == "met") && ($2 == "met" || $2 == "MISSED") }')" 1 "(convert: the verdict)"
# the packed outputs are removed (before: the last round's two packed
# copies of the corpus were left in WORK)
same "$(ls -A "$T/convert work" | tr '\n' ' ')" ".bench-convert lists root " "(convert: what WORK keeps)"
contains "$T/out" "  instructions: not counted (INSTR=0)"
# instruction counts: where valgrind is missing the summary says so, and
# a run that cannot be counted stops the benchmark, named (before: the
# count left out without a word, and a failed run under valgrind ended
# the benchmark with exit 1 and no message)
expect 0 convert CORPUS="$corpus" ROUNDS=1 INSTR=1 VALGRIND="$T/no valgrind"
contains "$T/out" "  instructions: not counted: cannot find '$T/no valgrind' (install valgrind, set VALGRIND, or INSTR=0)"
expect 1 convert CORPUS="$corpus" ROUNDS=1 INSTR=1 PATH="$fake:$PATH"
same "$(tail -n2 "$T/err" | tr '\n' '|')" "valgrind: failed to start tool|run.sh: no instruction count of convert under valgrind (see above; or INSTR=0)|" "(convert: a run valgrind cannot count)"
same "$(ls -A "$T/convert work" | tr '\n' ' ')" ".bench-convert lists root " "(convert: what WORK keeps after a failure)"
# a corpus of another size is refused, not used as the one asked for
# (before: 20 images measured where N_IMAGES asked for 30)
expect 1 convert CORPUS="$corpus" N_IMAGES=30
same "$(cat "$T/err")" "run.sh: '$corpus' exists but is not a corpus of 30 images, seed 1 (remove it or set CORPUS)" "(convert: a corpus of another size)"

# --- bench/python ---------------------------------------------------------------
pyb() {
  rm -f "$T/count"
  (cd / && env PYTHONPATH="$T/fakepy" FAKE_COUNT="$T/count" "$@" /usr/bin/python3 "$IMS_SRC/bench/python/bench.py" \
    --rounds 2 --images 20 --batch 4 --threads 1 --work "$T/py work" --imshard "$IMSHARD" \
    --torch-path "$T/no torch" --dali-path "$T/no dali")
}
# a run that fails is named by its own error (before: GNU time's "Exit
# status: 1"), and a contender none of whose runs ran fails the
# benchmark (before: a KeyError traceback from the ratios)
expect 1 pyb FAKE_FAIL=all
contains "$T/out" "imshard.Loader   failed: exit 1: RuntimeError: imshard: cannot open the split (a fake failure)"
contains "$T/out" "1 thr  imshard.Loader   not run (failed)"
contains "$T/out" "1 thr  torch DataLoader not run (missing)"
lacks "$T/err" "Traceback"
same "$(tail -n1 "$T/err")" "bench.py: every run of imshard.Loader with 1 thread failed (2 of 2): no figures for it" "(python: a contender without a run)"
# the table is headed by its command; a ratio pairs runs of the same
# round (before: by position, so round 1's Loader over round 0's
# bench-load, or a KeyError where one round failed)
expect 0 pyb FAKE_FAIL=first
same "$(grep '^command: ' "$T/out")" "command: /usr/bin/python3 bench/python/bench.py --rounds 2 --images 20 --batch 4 --threads 1 --work '$T/py work' --imshard $IMSHARD --torch-path '$T/no torch' --dali-path '$T/no dali'" "(python: the command)"
contains "$T/out" "imshard.Loader / this = "
contains "$T/out" "x (1 round)"
# a corpus cut short (a run stopped while it was drawn) is refused, not
# measured as if whole (before: 10 images measured where 20 were asked)
mkdir -p "$T/py part/corpus-20"
cp -r "$corpus"/n*/ "$T/py part/corpus-20/"
find "$T/py part/corpus-20" -name '*.JPEG' | sort | head -n10 | xargs rm
expect 1 env PYTHONPATH="$T/fakepy" FAKE_COUNT="$T/count" FAKE_FAIL=none /usr/bin/python3 "$IMS_SRC/bench/python/bench.py" \
  --rounds 1 --images 20 --batch 2 --threads 1 --work "$T/py part"
same "$(cat "$T/err")" "bench.py: '$T/py part/corpus-20' holds no whole corpus of 20 images (a run stopped while it was made?): remove it, and the next run makes it again" "(python: a corpus cut short)"
# bad options: one line, exit 2, nothing made (before: --rounds 0 made
# the corpus, measured nothing and exited 0 with every contender "not
# run (missing)"; argparse's usage and error took several lines)
for bad in "--rounds 0|--rounds: must be a whole number of 1 or more, got '0'" \
  "--threads 1 x|--threads: must be a whole number of 1 or more, got 'x'" "--threads|--threads: expected at least one argument" \
  "--images -3|--images: must be a whole number of 1 or more, got '-3'" "--bogus|unrecognized arguments: --bogus"; do
  # shellcheck disable=SC2086
  expect 2 /usr/bin/python3 "$IMS_SRC/bench/python/bench.py" ${bad%%|*} --work "$T/py bad"
  same "$(cat "$T/err")" "bench.py: $(case "$bad" in --bogus*) ;; *) printf 'argument ' ;; esac)${bad#*|} (see --help)" "(python: ${bad%%|*})"
  absent "$T/py bad"
done

# every bench ran from / with its files in $T: nothing was written into
# the source tree's bench/ (a __pycache__, a log, a corpus)
same "$(find "$IMS_SRC/bench" -newer "$T/start" | head -n3)" "" "(nothing new under bench/)"

finish
