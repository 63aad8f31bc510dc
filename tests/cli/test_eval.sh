#!/usr/bin/env bash
# imshard eval and export: a checkpoint's numbers through eval equal the
# trainer's last validation (exactly at the same batch size and threads),
# and so do its exported weights'; the trainer's last validation writes
# the per-class files eval -o writes, byte for byte; eval under mpirun
# counts each record once and equals one rank; checkpoints of older
# versions and other programs' weights name the flags they need; bad
# inputs (a running variance below 0, weights that are not finite among
# them) give one line and exit
# 1 or 2; a split of the training records, or of its images packed
# apart, is warned of; report draws the per-class
# files; the data-side binary links no BLAS or MPI.
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1
: "${IMSHARD_TRAIN:?IMSHARD_TRAIN must point at imshard-train}"
edit() { /usr/bin/python3 "$IMS_SRC/tests/cli/st_edit.py" "$@"; }
mpi() { ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" mpirun "$@"; }

expect 0 "$IMSHARD" sample "$T/s" --classes 4 --per-class 15 --quiet
expect 0 "$IMSHARD" convert folder "$T/s" -o "$T/p" --val-ratio 0.25 --seed 3 --quiet
va="$T/p/val.json"
records=$(json "$va" 'j["records"]')
expect 0 "$IMSHARD_TRAIN" --train "$T/p/train.json" --val "$va" --model convnet7 --size 16 \
  --threads 1 --batch-size 8 --epochs 2 --log-dir "$T/run" --checkpoint-dir "$T/run" --quiet
ck="$T/run/checkpoint.safetensors"
grep '"type":"val"' "$T/run/metrics.jsonl" | tail -1 >"$T/lastval.json"
last() { json "$T/lastval.json" "$1"; }

# --- the checkpoint records what eval needs ----------------------------
/usr/bin/python3 - "$ck" >"$T/m" <<'PY'
import json, struct, sys
d = open(sys.argv[1], "rb").read()
m = json.loads(d[8:8 + struct.unpack("<Q", d[:8])[0]])["__metadata__"]
print(m["model"], m["classes"], m["size"], m["mean"], m["std"], m["val_crop_frac"],
      m["input_layout"], json.loads(m["class_names"]))
PY
contains "$T/m" "convnet7 4 16 123.675003,116.279999,103.529999 58.3950005,57.1199989,57.375 0.875 NCHW ['checkerboard', 'circle', 'crescent', 'cross']"

# --- eval equals the trainer's last validation -------------------------
numbers() { json "$1" '(j["records"], j["top1"], j["top5"], repr(j["loss"]))'; }
want="($(last 'j["records"]'), $(last 'j["top1"]'), $(last 'j["top5"]'), '$(last 'repr(j["loss"])')')"
expect 0 "$IMSHARD" eval "$ck" "$va" --batch-size 8 --threads 1 --json -q -o "$T/ev"
cp "$T/out" "$T/eval.json"
same "$(numbers "$T/eval.json")" "$want" "(eval = the last validation, bit for bit)"
same "$(json "$T/eval.json" 'j["records"]')" "$records"
# --help lists every key --json prints, in its list of them (before:
# weights, split, model, size and precision were printed, not listed)
"$IMSHARD" eval --help >"$T/help.txt"
same "$(json "$T/eval.json" 'sorted(set(j) - set(__import__("re").search(r"--json prints one JSON object instead \(([^:)]*)", " ".join(open("'"$T/help.txt"'").read().split())).group(1).split(", ")))')" "[]" "keys eval --help does not list"
# the exported weights give the same numbers
expect 0 "$IMSHARD" export "$ck" -o "$T/w.safetensors"
contains "$T/err" "wrote 34 tensors of convnet7"
expect 0 "$IMSHARD" eval "$T/w.safetensors" "$va" --batch-size 8 --threads 1 --json -q
same "$(numbers "$T/out")" "$want" "(exported weights = the last validation)"
# another batch size: the same hits, the loss to rounding
expect 0 "$IMSHARD" eval "$T/w.safetensors" "$va" --threads 1 --json -q
same "$(json "$T/out" '(j["records"], j["top1"], j["top5"])')" \
  "$(json "$T/eval.json" '(j["records"], j["top1"], j["top5"])')"
same "$(json "$T/out" 'abs(j["loss"] - '"$(last 'j["loss"]')"') < 1e-5')" True "(loss at batch 32)"
# a bf16 run: eval runs in its precision by default (said), so it equals
# its last validation bit for bit (before: fp32 without a word, the loss
# off in the fifth digit); --precision fp32 asks for full precision
expect 0 "$IMSHARD_TRAIN" --train "$T/p/train.json" --val "$va" --model convnet7 --size 16 \
  --threads 1 --batch-size 8 --epochs 2 --precision bf16 --log-dir "$T/run16" --checkpoint-dir "$T/run16" --quiet
grep '"type":"val"' "$T/run16/metrics.jsonl" | tail -1 >"$T/lastval16.json"
want16=$(json "$T/lastval16.json" '(j["records"], j["top1"], j["top5"], repr(j["loss"]))')
expect 0 "$IMSHARD" eval "$T/run16/checkpoint.safetensors" "$va" --batch-size 8 --threads 1 --json
same "$(numbers "$T/out")" "$want16" "(bf16 eval = the bf16 run's last validation, bit for bit)"
same "$(json "$T/out" 'j["precision"]')" bf16 "(the precision in the JSON)"
same "$(cat "$T/err")" "imshard: eval: in bf16, the precision its run trained and validated in (--precision fp32 for full precision)" "(the precision said)"
same "$(json "$T/run16/eval.json" 'j["precision"]')" bf16 "(the trainer's eval.json names it)"
expect 0 "$IMSHARD" eval "$T/run16/checkpoint.safetensors" "$va" --batch-size 8 --threads 1 --json --precision fp32
same "$(json "$T/out" 'j["precision"]')" fp32 "(--precision fp32)"
same "$(json "$T/out" 'abs(j["loss"] - '"$(json "$T/lastval16.json" 'j["loss"]')"') < 1e-2')" True "(fp32 loss near the bf16 one)"
lacks "$T/err" "in bf16"
expect 2 "$IMSHARD" eval "$ck" "$va" --precision fp8
same "$(cat "$T/err" | head -n1)" "imshard: eval: --precision must be fp32, bf16 or fp16, got 'fp8' (see 'imshard eval --help')" "(--precision fp8)"

# --- the files: the trainer's last validation wrote what eval -o writes --
for f in per_class.csv confusion.csv predictions.csv eval.json; do exists "$T/run/$f"; done
for f in per_class.csv confusion.csv predictions.csv; do
  checks=$((checks + 1))
  cmp -s "$T/run/$f" "$T/ev/$f" || fail "$f of the trainer and of eval differ"
done
same "$(json "$T/run/eval.json" '(j["program"], j["epoch"], j["records"])')" "('imshard-train', 1, $records)"
same "$(json "$T/ev/eval.json" '(j["program"], j["records"], len(j["per_class"]))')" "('imshard eval', $records, 4)"
/usr/bin/python3 - "$T/ev" "$T/eval.json" >"$T/m" 2>&1 <<'PY'
import csv, json, sys
d, ev = sys.argv[1], json.load(open(sys.argv[2]))
rows = list(csv.reader(open(d + "/confusion.csv")))
assert rows[0] == ["true/predicted", "checkerboard", "circle", "crescent", "cross"], rows[0]
m = [[int(x) for x in r[1:]] for r in rows[1:]]
assert m == ev["confusion"], (m, ev["confusion"])
n = sum(map(sum, m))
assert n == ev["records"], n
assert abs(sum(m[i][i] for i in range(4)) / n - ev["top1"]) < 1e-12
pc = list(csv.DictReader(open(d + "/per_class.csv")))
assert [int(r["records"]) for r in pc] == [sum(r) for r in m]
assert [int(r["top1_correct"]) for r in pc] == [m[i][i] for i in range(4)]
pr = list(csv.DictReader(open(d + "/predictions.csv")))
assert len(pr) == n and sorted(int(r["index"]) for r in pr) == list(range(n)), len(pr)
assert sum(r["label"] == r["predicted"] for r in pr) == sum(m[i][i] for i in range(4))
print("ok")
PY
contains "$T/m" "ok"
# the table: numbers, per class, the matrix
expect 0 "$IMSHARD" eval "$ck" "$va" --threads 1 -q
contains "$T/out" "records $records  top-1"
contains "$T/out" "confusion matrix (rows: true class, columns: predicted class)"
contains "$T/out" "crescent"
same "$(wc -l <"$T/err")" 0 "(-q: nothing on stderr)"
# a flag that replaces a recorded value is said, unless -q or --quiet
expect 0 "$IMSHARD" eval "$ck" "$va" --threads 1 --size 20
same "$(cat "$T/err")" "imshard: eval: --size 20 in place of the 16 px '$ck' records" "(the replaced size said)"
for q in -q --quiet; do
  expect 0 "$IMSHARD" eval "$ck" "$va" --threads 1 --size 20 $q
  same "$(cat "$T/err")" "" "($q: the note not said)"
done
# --output is -o's long name: the same four files, byte for byte
expect 0 "$IMSHARD" eval "$ck" "$va" --batch-size 8 --threads 1 --json -q --output "$T/evl"
for f in eval.json per_class.csv confusion.csv predictions.csv; do
  expect 0 cmp "$T/ev/$f" "$T/evl/$f"
done
# the heading names the weights and the split as given: escaped (before:
# an ESC in either path reached the terminal raw)
mkdir -p "$T/e"$'\e[2J'
cp "$ck" "$T/e"$'\e[2J'/ck.safetensors
expect 0 "$IMSHARD" eval "$T/e"$'\e[2J'/ck.safetensors "$va" --threads 1 -q
contains "$T/out" "'$T/e\x1b[2J/ck.safetensors' (convnet7, 4 classes, 16 px, fp32) on '$va'"
! grep -q $'\e' "$T/out" || fail "eval printed an ESC raw"
checks=$((checks + 1))

# a class the split holds no record of has no accuracy: '-' in the table,
# empty in per_class.csv, null in eval.json, said once (before: 0.00%,
# 0.000000 and 0, as if every record of it had been missed)
cp -r "$T/s" "$T/s_empty"
rm -f "$T/s_empty/cross"/*
expect 0 "$IMSHARD" convert folder "$T/s_empty" -o "$T/pe" --val-ratio 0.25 --seed 3 --quiet
expect 0 "$IMSHARD" eval "$ck" "$T/pe/val.json" --threads 1 -o "$T/eve"
grep -E '^ +3  cross ' "$T/out" | head -n 1 >"$T/row"
same "$(tr -s ' ' <"$T/row")" " 3 cross 0 - -" "(the table's row of a class without records)"
contains "$T/err" "holds no record of 1 of the model's 4 classes (the first: 3 'cross'): it has no accuracy"
# -o names what it wrote, and says when it replaced an evaluation there
# (before: nothing, though a run folder's files were replaced)
contains "$T/err" "imshard: eval: wrote per_class.csv, confusion.csv, predictions.csv and eval.json into '$T/eve'"
lacks "$T/err" "replacing"
cp -r "$T/eve" "$T/eve2"
expect 0 "$IMSHARD" eval "$ck" "$T/pe/val.json" --threads 1 -o "$T/eve2" --batch-size 64
contains "$T/err" "into '$T/eve2' (replacing the evaluation it held)"
/usr/bin/python3 - "$T/eve" >"$T/m" 2>&1 <<'PY'
import csv, json, sys
d = sys.argv[1]
pc = list(csv.DictReader(open(d + "/per_class.csv")))
assert pc[3] == {"class": "3", "name": "cross", "records": "0", "top1_correct": "0",
                 "top1": "", "top5_correct": "0", "top5": ""}, pc[3]
assert all(r["top1"] != "" for r in pc[:3]), pc
ev = json.load(open(d + "/eval.json"))
assert ev["per_class"][3] == {"name": "cross", "records": 0, "top1": None, "top5": None}, ev["per_class"][3]
print("ok")
PY
contains "$T/m" "ok"
# report reads it and draws no bar for it
cp -r "$T/run" "$T/run_e"
cp "$T/eve/eval.json" "$T/eve/confusion.csv" "$T/run_e/"
expect 0 "$IMSHARD" report "$T/run_e" -o "$T/rep_empty.html" --quiet
contains "$T/rep_empty.html" "no records</text>"
lacks "$T/rep_empty.html" "skipped"

# class names a spreadsheet would run as formulas are text in the CSVs
# (before: "=SUM(A1)" went in raw, while report's CSVs quoted it)
expect 0 "$IMSHARD" sample "$T/sf" --classes 4 --per-class 2 --quiet
names=(-3 '=SUM(A1)' @x a,b)
i=0
for c in "$T"/sf/*; do mv "$c" "$T/sf/${names[i++]}"; done
expect 0 "$IMSHARD" convert folder "$T/sf" -o "$T/pf" --val-ratio 0.5 --quiet
edit "$ck" "$T/formula.safetensors" --set 'class_names=["-3", "=SUM(A1)", "@x", "a,b"]'
expect 0 "$IMSHARD" eval "$T/formula.safetensors" "$T/pf/val.json" --threads 1 -q -o "$T/evf"
/usr/bin/python3 - "$T/evf" >"$T/m" 2>&1 <<'PY'
import csv, sys
d, want = sys.argv[1], ["-3", "'=SUM(A1)", "'@x", "a,b"]
assert [r["name"] for r in csv.DictReader(open(d + "/per_class.csv"))] == want
assert next(csv.reader(open(d + "/confusion.csv")))[1:] == want
assert [r[0] for r in list(csv.reader(open(d + "/confusion.csv")))[1:]] == want
pr = list(csv.DictReader(open(d + "/predictions.csv")))
assert {r["label_name"] for r in pr} <= set(want) and {r["predicted_name"] for r in pr} <= set(want)
print("ok")
PY
contains "$T/m" "ok"

# a split of other classes, for the refusals below
expect 0 "$IMSHARD" sample "$T/s5" --classes 5 --per-class 4 --quiet
expect 0 "$IMSHARD" convert folder "$T/s5" -o "$T/p5" --val-ratio 0.5 --quiet

# --- mpirun: every record once, the numbers of one rank ------------------
if have_mpi; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  for np in 2 3; do
    expect 0 mpi -np $np "$IMSHARD" eval "$ck" "$va" --batch-size 8 --threads 1 --json -q -o "$T/ev$np"
    same "$(json "$T/out" '(j["records"], j["top1"], j["top5"], j["confusion"])')" \
      "$(json "$T/eval.json" '(j["records"], j["top1"], j["top5"], j["confusion"])')" "(eval at $np ranks)"
    same "$(json "$T/out" 'abs(j["loss"] - '"$(json "$T/eval.json" 'j["loss"]')"') < 1e-6')" True "(loss at $np ranks)"
    same "$(cut -d, -f1-5,7 "$T/ev$np/predictions.csv" | md5sum)" "$(cut -d, -f1-5,7 "$T/ev/predictions.csv" | md5sum)" \
      "(predictions at $np ranks)"
  done
  # a split with fewer records than ranks: the shares are padded with
  # flagged repeats, so 3 ranks evaluate 2 records as one rank does
  # (before: "the split holds 2 records, fewer than the 3 ranks")
  head -n 2 "$T/p/val.lst" >"$T/two.lst"
  expect 0 "$IMSHARD" pack "$T/two.lst" "$T/s" -o "$T/p2r/val" --classes "$T/p/classes.txt" --quiet
  expect 0 "$IMSHARD" eval "$ck" "$T/p2r/val.json" --threads 1 --json -q
  cp "$T/out" "$T/two1.json"
  expect 0 mpi -np 3 "$IMSHARD" eval "$ck" "$T/p2r/val.json" --threads 1 --json -q
  same "$(json "$T/out" '(j["records"], j["top1"], j["top5"], j["confusion"], round(j["loss"], 6))')" \
    "$(json "$T/two1.json" '(j["records"], j["top1"], j["top5"], j["confusion"], round(j["loss"], 6))')" \
    "(2 records at 3 ranks)"
  # a rank that hangs alive: the others end after --collective-timeout
  # (before: eval had no timeout, and rank 0 waited forever). Rank 1 is
  # stopped once it has mapped the split's shard, past MPI's start-up;
  # --size 512 and batches of 1 make the pass last seconds.
  ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" timeout 120 mpirun -np 2 "$IMSHARD" eval "$ck" "$va" \
    --threads 1 --batch-size 1 --size 512 -q --collective-timeout 3 >"$T/hang.out" 2>&1 &
  job=$!
  shard=$(ls "$T/p"/val-*.mdb | head -n1)
  stopped=""
  i=0
  while [ -z "$stopped" ] && [ $((i += 1)) -le 1200 ]; do
    for p in $(pgrep -f "imshard-model eval $ck" || true); do
      if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1' &&
        grep -qF "$shard" "/proc/$p/maps" 2>/dev/null; then
        kill -STOP "$p" && stopped=$p
      fi
    done
    [ -n "$stopped" ] || sleep 0.05
  done
  checks=$((checks + 1))
  [ -n "$stopped" ] || fail "no rank 1 process reading the split: $(tail -n 3 "$T/hang.out" | tr '\n' ' ')"
  t0=$SECONDS
  wait "$job"
  rc=$?
  took=$((SECONDS - t0))
  checks=$((checks + 1))
  [ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "eval ended with $rc with rank 1 stopped (124: still waiting after 120 s)"
  checks=$((checks + 1))
  [ "$took" -le 60 ] || fail "eval took $took s to end with rank 1 stopped"
  contains "$T/hang.out" "imshard: eval: rank 0: waited more than 3 s for the other ranks"
  [ -n "$stopped" ] && kill -9 "$stopped" 2>/dev/null
  expect 2 "$IMSHARD" eval "$ck" "$va" --collective-timeout -1
  # export is one process: as N ranks each wrote the file again
  expect 2 mpi -np 2 "$IMSHARD" export "$ck" -o "$T/wmpi.safetensors"
  same "$(grep -c '^imshard: ' "$T/err")" 1 "(one line for two ranks)"
  contains "$T/err" "imshard: export: started as 2 ranks (mpirun): export runs as one process"
  absent "$T/wmpi.safetensors"
  # bad input fails every rank alike: one line, no abort (mpirun adds
  # its own lines about the exit status)
  expect 1 mpi -np 2 "$IMSHARD" eval "$ck" "$T/p5/val.json" --threads 1
  same "$(grep -c '^imshard: ' "$T/err")" 1 "(one line for two ranks)"
  contains "$T/err" "it has 5 classes, the model 4"
  lacks "$T/err" "MPI_ABORT"
  expect 1 mpi -np 2 "$IMSHARD" eval "$ck" "$T/none.json" --threads 1
  same "$(grep -c '^imshard: ' "$T/err")" 1 "(one line for two ranks)"
  # ranks given other splits or batch sizes (before: MPI_ERR_TRUNCATE and
  # an abort): refused alike, one line
  expect 1 mpi -np 1 "$IMSHARD" eval "$ck" "$va" --threads 1 : -np 1 "$IMSHARD" eval "$ck" "$T/p/train.json" --threads 1
  same "$(grep -c '^imshard: ' "$T/err")" 1 "(one line for two ranks)"
  contains "$T/err" "cannot evaluate: ranks 0 and 1 were started with different SPLIT (its records)"
  lacks "$T/err" "MPI_ABORT"
  expect 1 mpi -np 1 "$IMSHARD" eval "$ck" "$va" --threads 1 : -np 1 "$IMSHARD" eval "$ck" "$va" --threads 1 --batch-size 7
  contains "$T/err" "started with different --batch-size"
  # a rank whose set-up fails alone names itself; the other says why it stops
  expect 1 mpi -np 2 bash -c 'if [ "${OMPI_COMM_WORLD_RANK:-0}" = 1 ]; then s=$2; else s=$1; fi
    exec "$IMSHARD" eval "$0" "$s" --threads 1' "$ck" "$va" "$T/p5/val.json"
  same "$(grep -c '^imshard: eval: rank 1: cannot evaluate on' "$T/err")" 1 "(the failing rank named)"
  # that line names the rank's split: escaped
  cp -r "$T/p5" "$T/p5"$'\e[2J'
  expect 1 mpi -np 2 bash -c 'if [ "${OMPI_COMM_WORLD_RANK:-0}" = 1 ]; then s=$2; else s=$1; fi
    exec "$IMSHARD" eval "$0" "$s" --threads 1' "$ck" "$va" "$T/p5"$'\e[2J/val.json'
  contains "$T/err" "imshard: eval: rank 1: cannot evaluate on '$T/p5\x1b[2J/val.json'"
  ! grep -q $'\e' "$T/err" || fail "eval printed a rank's ESC raw"
  checks=$((checks + 1))
  same "$(grep -c '^imshard: eval: rank' "$T/err")" 1 "(the other rank ends quietly)"
  lacks "$T/err" "MPI_ABORT"
  # ranks that each fail for a reason of their own: each named (before:
  # rank 0's line alone, as if every rank had failed alike)
  expect 1 mpi -np 1 "$IMSHARD" eval "$ck" "$T/none0.json" --threads 1 : -np 1 "$IMSHARD" eval "$ck" "$T/none1.json" --threads 1
  same "$(grep -c '^imshard: ' "$T/err")" 2 "(a line for each rank's own failure)"
  contains "$T/err" "imshard: eval: rank 0: cannot open manifest '$T/none0.json'"
  contains "$T/err" "imshard: eval: rank 1: cannot open manifest '$T/none1.json'"
  # a rank that cannot read its copy of the weights (node-local storage):
  # the ranks agree on it before the pass and end at once, the other
  # saying why (before: rank 0 waited in the set-up's agreement until
  # --collective-timeout, then ended saying a rank died or hangs)
  t0=$SECONDS
  expect 1 mpi -np 1 "$IMSHARD" eval "$ck" "$va" --threads 1 --collective-timeout 30 : \
    -np 1 "$IMSHARD" eval "$T/none.safetensors" "$va" --threads 1 --collective-timeout 30
  took=$((SECONDS - t0))
  checks=$((checks + 1))
  [ "$took" -le 20 ] || fail "eval took $took s to end with rank 1's weights missing"
  contains "$T/err" "imshard: eval: cannot open safetensors '$T/none.safetensors'"
  contains "$T/err" "imshard: eval: 1 of 2 ranks could not read the weights or their model card"
  lacks "$T/err" "waited more than"
  lacks "$T/err" "MPI_ABORT"
  # every record of the split damaged: each rank's loader gives up in the
  # pass, and the ranks end it together, each naming itself, no abort
  # (before: the first to fail left the other in the pass's allreduce,
  # and MPI_ABORT ended the job)
  cp -r "$T/p" "$T/pall"
  expect 0 /usr/bin/python3 "$IMS_SRC/tests/cli/split_edit.py" damage "$T/pall/val.json" $(seq 0 $(($(json "$va" 'j["records"]') - 1)))
  expect 1 mpi -np 2 "$IMSHARD" eval "$ck" "$T/pall/val.json" --threads 1
  same "$(grep -c "^imshard: eval: rank \([01]\): none of the 8 records of rank \\1's share could be loaded; the last: record " "$T/err")" 2 "(each rank's failed pass named)"
  # one rank: its share is the split, so named (before: "16 records in a
  # row", whatever the split's size)
  expect 1 "$IMSHARD" eval "$ck" "$T/pall/val.json" --threads 1
  contains "$T/err" "none of the 16 records of the split could be loaded; the last: record "
  lacks "$T/err" "MPI_ABORT"
  lacks "$T/err" "MPI_ABORT"
  # -o that rank 0 cannot write into: refused before the pass, rank 0 named
  echo x >"$T/ofile2"
  expect 1 mpi -np 2 "$IMSHARD" eval "$ck" "$va" --threads 1 -o "$T/ofile2"
  contains "$T/err" "imshard: eval: rank 0: cannot write the evaluation into '$T/ofile2': it is a regular file"
  same "$(grep -c '^imshard: ' "$T/err")" 1 "(one line for two ranks)"
  lacks "$T/err" "MPI_ABORT"
  same "$(wc -c <"$T/out")" 0 "(-o a file at 2 ranks: nothing evaluated)"
else
  echo "mpirun not usable: multi-rank eval not checked"
fi

# --- checkpoints without a card: the flags named, then taken -------------
edit "$ck" "$T/old.safetensors" --drop mean --drop std --drop val_crop_frac --drop class_names --drop input_layout
expect 2 "$IMSHARD" eval "$T/old.safetensors" "$va"
one_line "$T/err"
contains "$T/err" "does not record its class names, mean, std"
contains "$T/err" "pass --classes FILE --mean R,G,B --std R,G,B"
expect 0 "$IMSHARD" eval "$T/old.safetensors" "$va" --classes "$T/p/classes.txt" --mean 123.675,116.28,103.53 \
  --std 58.395,57.12,57.375 --batch-size 8 --threads 1 --json
contains "$T/err" "records no validation crop fraction: 0.875"
same "$(numbers "$T/out")" "$want" "(an older checkpoint with the flags)"
expect 0 "$IMSHARD" eval "$T/old.safetensors" "$va" --classes "$T/p/train.json" --mean 123.675,116.28,103.53 \
  --std 58.395,57.12,57.375 --batch-size 8 --threads 1 --json -q
same "$(numbers "$T/out")" "$want" "(--classes from a manifest)"
edit "$ck" "$T/bare.safetensors" --drop-all
expect 2 "$IMSHARD" predict "$T/bare.safetensors" "$T/s/circle/$(ls "$T/s/circle" | head -1)"
one_line "$T/err"
contains "$T/err" "pass --model NAME --classes FILE --size PX --mean R,G,B --std R,G,B"
expect 2 "$IMSHARD" export "$T/bare.safetensors" -o "$T/bare-w.safetensors"
contains "$T/err" "pass --model NAME --classes FILE"
# flags that contradict the checkpoint
expect 2 "$IMSHARD" eval "$ck" "$va" --model resnet18
one_line "$T/err"
contains "$T/err" "--model resnet18, but"
expect 2 "$IMSHARD" eval "$ck" "$va" --classes "$T/p5/classes.txt"
one_line "$T/err"
contains "$T/err" "names 5 classes"
# --size replaces the recorded one, and says so
expect 0 "$IMSHARD" eval "$ck" "$va" --size 24 --threads 1 --json
contains "$T/err" "--size 24 in place of the 16 px"

# --- a split of the training records or images: said, even under -q ------
# (before: top-1 on records the weights were trained on, without a word);
# the images found byte for byte in a split packed apart, through the
# training split the checkpoint records (its path, checked by digest)
expect 0 "$IMSHARD" eval "$ck" "$T/p/train.json" --threads 1 -q
contains "$T/err" "imshard: warning: eval: '$T/p/train.json' holds the records '$ck' was trained on: its accuracy is on training records"
contains "$T/out" "records $(json "$T/p/train.json" 'j["records"]')"
expect 0 "$IMSHARD" extract "$T/p/train.json" -o "$T/again" -i 3 -i 5 -i 8 --quiet
expect 0 "$IMSHARD" pack "$T/again/extract.lst" "$T/again" -o "$T/again/s" --quiet
expect 0 "$IMSHARD" eval "$ck" "$T/again/s.json" --threads 1 -q
one_line "$T/err"
contains "$T/err" "imshard: warning: eval: '$T/again/s.json' holds images of the training split '$T/p/train.json': 3 of its 3 records are byte for byte training records (record "
contains "$T/err" "); its accuracy is partly on images the weights were trained on"
i=$(sed -nE 's/.*is training record ([0-9]+)\).*/\1/p' "$T/err")
case " 3 5 8 " in *" $i "*) ;; *) fail "training record '$i' is none of those packed again" ;; esac
expect 0 "$IMSHARD" eval "$ck" "$va" --threads 1 -q
lacks "$T/err" "trained on"
# the training split gone from its recorded path: a copy elsewhere is
# still its records; any other split is said not to be searched (a note:
# not under -q)
cp -r "$T/p" "$T/pcopy"
mv "$T/p/train.json" "$T/p/train.away"
expect 0 "$IMSHARD" eval "$ck" "$T/pcopy/train.json" --threads 1 -q
contains "$T/err" "holds the records '$ck' was trained on"
expect 0 "$IMSHARD" eval "$ck" "$va" --threads 1
contains "$T/err" "imshard: eval: the training split '$T/p/train.json' recorded in '$ck' is not there (or is another split now): '$va' was not searched for its images, only compared with its digest"
expect 0 "$IMSHARD" eval "$ck" "$va" --threads 1 -q
lacks "$T/err" "not searched"
mv "$T/p/train.away" "$T/p/train.json"
expect 0 "$IMSHARD" eval "$ck" "$va" --threads 1
lacks "$T/err" "not searched"

# --- damaged records: left out of the scores, and said so -----------------
# (the warning said they were "replaced by others (counted twice)",
# which they are not: the records counted and the matrix leave them out)
cp -r "$T/p" "$T/pd"
expect 0 /usr/bin/python3 "$IMS_SRC/tests/cli/split_edit.py" damage "$T/pd/val.json" 2 5
expect 0 "$IMSHARD" eval "$ck" "$T/pd/val.json" --threads 1 --json
same "$(json "$T/out" '(j["records"], j["bad_records"], sum(map(sum, j["confusion"])))')" \
  "($((records - 2)), 2, $((records - 2)))"
one_line "$T/err"
contains "$T/err" "2 records of '$T/pd/val.json' could not be read or decoded and were left out of the scores ($((records - 2)) counted)"
lacks "$T/err" "counted twice"

# --- bad inputs: one line, exit 1 or 2 ------------------------------------
# -o where the files cannot go: refused before the pass (before: the
# whole split was evaluated and its table printed, then exit 1)
echo x >"$T/ofile"
expect 1 "$IMSHARD" eval "$ck" "$va" --threads 1 -o "$T/ofile"
one_line "$T/err"
contains "$T/err" "cannot write the evaluation into '$T/ofile': it is a regular file, not a folder"
same "$(wc -c <"$T/out")" 0 "(-o a file: nothing evaluated)"
mkdir -p "$T/odir/predictions.csv"
expect 1 "$IMSHARD" eval "$ck" "$va" --threads 1 -o "$T/odir"
one_line "$T/err"
contains "$T/err" "cannot write the evaluation into '$T/odir': '$T/odir/predictions.csv' is a folder"
same "$(wc -c <"$T/out")" 0 "(a folder at predictions.csv: nothing evaluated)"
absent "$T/odir/per_class.csv"
# -o the folder of a split named eval: its manifest is eval.json, which
# the evaluation's would replace (before: replaced, the split lost)
expect 0 "$IMSHARD" pack "$T/p/val.lst" "$T/s" -o "$T/psplit/eval" --classes "$T/p/classes.txt" --quiet
cp "$T/psplit/eval.json" "$T/psplit.manifest"
expect 1 "$IMSHARD" eval "$ck" "$T/psplit/eval.json" --threads 1 -o "$T/psplit"
one_line "$T/err"
contains "$T/err" "cannot write the evaluation into '$T/psplit': '$T/psplit/eval.json' is the manifest of split 'eval', which its eval.json would replace; give -o a folder of its own"
same "$(wc -c <"$T/out")" 0 "(-o a split's folder: nothing evaluated)"
expect 0 cmp "$T/psplit/eval.json" "$T/psplit.manifest"
absent "$T/psplit/per_class.csv"
expect 0 "$IMSHARD" eval "$ck" "$T/psplit/eval.json" --threads 1 -q -o "$T/psplit/ev"
expect 1 "$IMSHARD" eval "$T/none.safetensors" "$va"
one_line "$T/err"
contains "$T/err" "none.safetensors"
head -c 3000 "$ck" >"$T/cut.safetensors"
expect 1 "$IMSHARD" eval "$T/cut.safetensors" "$va"
one_line "$T/err"
contains "$T/err" "cut.safetensors"
expect 1 "$IMSHARD" eval "$va" "$va"
one_line "$T/err"
# a split with other classes: another count, other names
expect 1 "$IMSHARD" eval "$ck" "$T/p5/val.json"
one_line "$T/err"
contains "$T/err" "it has 5 classes, the model 4"
cp -r "$T/s" "$T/sr"
mv "$T/sr/cross" "$T/sr/plus"
expect 0 "$IMSHARD" convert folder "$T/sr" -o "$T/pr" --val-ratio 0.25 --quiet
expect 1 "$IMSHARD" eval "$ck" "$T/pr/val.json"
one_line "$T/err"
contains "$T/err" "its class 3 is 'plus', the model's is 'cross'"
# a byte of the card's class names flipped: the damage, named as such
# (before: "its class 3 is 'cross', the model's is 'Cross'")
/usr/bin/python3 -c 'import sys
d = bytearray(open(sys.argv[1], "rb").read()); i = d.find(b"cross", d.index(b"class_names")); d[i] = ord("C")
open(sys.argv[2], "wb").write(d)' "$ck" "$T/flip.safetensors"
expect 1 "$IMSHARD" eval "$T/flip.safetensors" "$va"
one_line "$T/err"
contains "$T/err" "cannot load '$T/flip.safetensors': its content does not match its checksum"
# a checksum that matches the content but is not as written: refused as
# damaged (before: strtoul read " +0x" and 9 digits with a leading 0)
sum=$(/usr/bin/python3 "$IMS_SRC/tests/cli/st_tool.py" get "$ck" checksum)
for odd in " +0x${sum#crc32c:}" "0${sum#crc32c:}"; do
  cp "$ck" "$T/odd.safetensors"
  /usr/bin/python3 "$IMS_SRC/tests/cli/st_tool.py" set "$T/odd.safetensors" "checksum=crc32c:$odd" --keep-checksum
  expect 1 "$IMSHARD" eval "$T/odd.safetensors" "$va"
  one_line "$T/err"
  contains "$T/err" "cannot load '$T/odd.safetensors': its checksum 'crc32c:$odd' is not a crc32c value: the file is damaged"
done
# a manifest that is not one
echo "not a manifest" >"$T/text.json"
expect 1 "$IMSHARD" eval "$ck" "$T/text.json"
one_line "$T/err"
echo '{"records": 3}' >"$T/obj.json"
expect 1 "$IMSHARD" eval "$ck" "$T/obj.json"
one_line "$T/err"
# weights of another model under this card: named tensors missing
edit "$ck" "$T/r18.safetensors" --set model=resnet18
expect 1 "$IMSHARD" eval "$T/r18.safetensors" "$va"
one_line "$T/err"
contains "$T/err" "is missing"
# a weight or running mean that is not finite is refused when the
# weights load, by eval and export alike (predict: test_predict.sh),
# named with its element (before: eval ran the whole pass and blamed the
# network's output, export wrote the -inf out)
edit "$ck" "$T/nan.safetensors" --nan features.0.weight
expect 1 "$IMSHARD" eval "$T/nan.safetensors" "$va" --threads 1
one_line "$T/err"
contains "$T/err" "cannot load '$T/nan.safetensors': tensor 'features.0.weight' holds NaN at element 0 (as float32): weights that are not finite make every loss NaN"
cp "$ck" "$T/infmean.safetensors"
/usr/bin/python3 "$IMS_SRC/tests/cli/st_tool.py" poke "$T/infmean.safetensors" features.1.running_mean 2 -inf
expect 1 "$IMSHARD" eval "$T/infmean.safetensors" "$va" --threads 1
one_line "$T/err"
contains "$T/err" "cannot load '$T/infmean.safetensors': tensor 'features.1.running_mean' holds -inf at element 2 (as float32)"
expect 1 "$IMSHARD" export "$T/infmean.safetensors" -o "$T/infmean-w.safetensors"
one_line "$T/err"
contains "$T/err" "export: cannot load '$T/infmean.safetensors': tensor 'features.1.running_mean' holds -inf at element 2"
absent "$T/infmean-w.safetensors"
# the weights file is opened once: the card, the run's precision and the
# weights come from one read, so a checkpoint replaced while eval or
# export starts cannot pair one file's card with another's weights
# (before: eval opened it five times, export three). Seen with strace
# where it may trace.
if command -v strace >/dev/null && strace -f -qq -e trace=none true 2>/dev/null; then
  opens() { grep -c "open[a-z0-9]*(.*\"$ck\"" "$T/opens"; }
  run env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
    strace -f -qq -e trace=open,openat,openat2 -e signal=none -o "$T/opens" \
    "$IMSHARD" eval "$ck" "$va" --threads 1 -q
  same "$rc" 0 "exit status of eval under strace"
  same "$(opens)" 1 "opens of the weights by eval"
  run env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
    strace -f -qq -e trace=open,openat,openat2 -e signal=none -o "$T/opens" \
    "$IMSHARD" export "$ck" -o "$T/once.safetensors" -q
  same "$rc" 0 "exit status of export under strace"
  same "$(opens)" 1 "opens of the weights by export"
fi
# a running variance that is not finite, or just below 0, is refused
# when the weights load, named (before: NaN, or below -eps not NaN but
# a channel scaled up and every number silently wrong)
edit "$ck" "$T/nan.safetensors" --nan features.1.running_var
expect 1 "$IMSHARD" eval "$T/nan.safetensors" "$va" --threads 1
one_line "$T/err"
contains "$T/err" "cannot load '$T/nan.safetensors': tensor 'features.1.running_var' holds NaN at element 0 (as float32)"
cp "$ck" "$T/negvar.safetensors"
/usr/bin/python3 "$IMS_SRC/tests/cli/st_tool.py" poke "$T/negvar.safetensors" features.1.running_var 0 -1e-6
expect 1 "$IMSHARD" eval "$T/negvar.safetensors" "$va" --threads 1
one_line "$T/err"
contains "$T/err" "tensor 'features.1.running_var' holds -1e-06 at element 0"
# usage
expect 2 "$IMSHARD" eval "$ck"
one_line "$T/err"
expect 2 "$IMSHARD" eval "$ck" "$va" --batch-size 0
one_line "$T/err"
expect 2 "$IMSHARD" eval "$ck" "$va" --device tpu
one_line "$T/err"
expect 2 "$IMSHARD" eval "$ck" "$va" --mean 1,2
one_line "$T/err"
expect 0 "$IMSHARD" eval --help
contains "$T/out" "--val-crop-frac"
contains "$T/out" "mpirun"
# eval -o over an earlier evaluation, failing partway through its files
# (a file-size limit of 512 bytes in place of a full disk: per_class.csv
# and confusion.csv fit, predictions.csv does not): no eval.json is left
# to vouch for the mixed CSV files (before: the earlier one stayed)
cp -r "$T/ev" "$T/ev_again"
same "$(($(wc -c <"$T/ev/predictions.csv") > 512 && $(wc -c <"$T/ev/confusion.csv") <= 512))" 1 "(the sizes this check needs)"
limit512() { /usr/bin/python3 -c 'import os, resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (512, 512))
os.execv(sys.argv[1], sys.argv[1:])' "$@"; }
expect 1 limit512 "$IMSHARD" eval "$ck" "$va" --threads 1 -q -o "$T/ev_again"
contains "$T/err" "predictions.csv"
absent "$T/ev_again/eval.json"
# export: not over the checkpoint, not over a file without --force
expect 2 "$IMSHARD" export "$ck" -o "$ck"
one_line "$T/err"
expect 1 "$IMSHARD" export "$ck" -o "$T/w.safetensors"
# an output that is there is a failure, as for pack, convert and sample
# (before: exit 2, bad usage)
one_line "$T/err"
contains "$T/err" "imshard: export: '$T/w.safetensors' exists (--force replaces it)"
expect 0 "$IMSHARD" export "$ck" -o "$T/w.safetensors" --force -q
# a folder: refused up front, with or without --force (before: with it,
# the weights were written, then the rename failed on the folder; without
# it, the message offered --force)
mkdir -p "$T/wdir"
for f in "" --force; do
  expect 2 "$IMSHARD" export "$ck" -o "$T/wdir" $f
  one_line "$T/err"
  contains "$T/err" "-o '$T/wdir' is a folder: name the file to write"
done
same "$(ls -A "$T/wdir" | wc -l)" 0 "(nothing written into the folder)"
# a FIFO or a device: refused too, with or without --force (before:
# with it, the weights were renamed over the special file's name, as
# root over /dev/null itself); the device through a link in the scratch
# folder
mkfifo "$T/wfifo"
ln -s /dev/null "$T/wnull"
for o in "$T/wfifo" "$T/wnull"; do
  for f in "" --force; do
    expect 2 "$IMSHARD" export "$ck" -o "$o" $f
    one_line "$T/err"
    contains "$T/err" "-o '$o' is not a regular file (a device, FIFO or socket)"
  done
done
[ -p "$T/wfifo" ] && [ -L "$T/wnull" ] || fail "the FIFO or the link to /dev/null was replaced"
checks=$((checks + 1))
# a write that fails (a file-size limit in place of a full disk): exit 1,
# one line naming -o's file, nothing left, and a file --force was to
# replace kept as it was (before: the line named 'FILE.tmp.PID', the
# temporary, which no longer exists)
cp "$T/w.safetensors" "$T/wkeep.safetensors"
expect 1 limit512 "$IMSHARD" export "$ck" -o "$T/wfull.safetensors"
one_line "$T/err"
contains "$T/err" "imshard: export: cannot write '$T/wfull.safetensors': File too large"
absent "$T/wfull.safetensors"
expect 1 limit512 "$IMSHARD" export "$ck" -o "$T/wkeep.safetensors" --force
contains "$T/err" "imshard: export: cannot write '$T/wkeep.safetensors': File too large"
cmp -s "$T/w.safetensors" "$T/wkeep.safetensors" || fail "a failed export --force changed the file"
checks=$((checks + 1))
same "$(ls -A "$T" | grep -c '\.tmp\.')" 0 "(temporaries left)"
# a checkpoint whose name is not UTF-8 exports, the name recorded as
# messages print it (before: refused after the weights were read, as
# safetensors metadata must be UTF-8)
cp "$ck" "$T/ck"$'\xff'".safetensors"
expect 0 "$IMSHARD" export "$T/ck"$'\xff'".safetensors" -o "$T/wff.safetensors" -q
/usr/bin/python3 -c 'import json,struct,sys; d=open(sys.argv[1],"rb").read(); h=json.loads(d[8:8+struct.unpack("<Q",d[:8])[0]].decode("utf-8")); print(h["__metadata__"]["exported_from"])' "$T/wff.safetensors" >"$T/m" 2>&1
same "$(cat "$T/m")" "$T/ck\xff.safetensors" "(exported_from)"
expect 2 "$IMSHARD" export "$ck"
contains "$T/err" "-o WEIGHTS.safetensors is required"
# the export holds no optimiser state and loads as --init weights
/usr/bin/python3 -c 'import json,struct,sys; d=open(sys.argv[1],"rb").read(); h=json.loads(d[8:8+struct.unpack("<Q",d[:8])[0]]); print(sum(k.startswith("optim.") for k in h))' "$T/w.safetensors" >"$T/m"
contains "$T/m" "0"
expect 0 "$IMSHARD_TRAIN" --train "$T/p/train.json" --val "$va" --model convnet7 --size 16 --threads 1 \
  --batch-size 8 --max-steps 1 --init "$T/w.safetensors"
contains "$T/err" "loaded 34 tensors"

# --- a memory limit too small for OpenBLAS's buffers ----------------------
# one line, as for the trainer (before: eval spun at full CPU for a buffer
# OpenBLAS could not map, under 350 to 700 MB with any --threads, until
# killed; OpenBLAS's own threads spun from start-up, and a pass's GEMMs
# asked for buffers none had checked)
if ! asan_build; then
  run bash -c 'ulimit -v 600000; exec timeout 60 "$@"' _ "$IMSHARD" eval "$ck" "$va" -q \
    --threads 4
  same "$rc" 1 "(eval under ulimit -v 600000, 4 threads: exit)"
  one_line "$T/err"
  contains "$T/err" "imshard: eval: the address-space (ulimit -v) limit of 586 MiB is too small"
  under_limits "350000 400000 450000 500000 550000 600000 700000" "1 2 4" \
    "$IMSHARD" eval "$ck" "$va" -q
fi

# --- report draws the per-class files of a run folder ---------------------
expect 0 "$IMSHARD" report "$T/run" -o "$T/r.html" --quiet
contains "$T/r.html" "Per-class accuracy"
contains "$T/r.html" "Confusion matrix"
contains "$T/r.html" "crescent"

# --- the data side loads no BLAS or MPI ------------------------------------
ldd "$IMSHARD" >"$T/ldd"
lacks "$T/ldd" "openblas"
lacks "$T/ldd" "libmpi"
lacks "$T/ldd" "libcud"
expect 0 "$IMSHARD" --help
contains "$T/out" "eval"
contains "$T/out" "export"

finish
