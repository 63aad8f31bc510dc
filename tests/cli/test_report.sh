#!/usr/bin/env bash
# imshard report: usage errors exit 2 with one line, a RUNDIR that is not a
# run folder exits 1 with one line, skipped lines are named FILE:LINE on
# stderr without failing, and the page and CSV files of two fixture runs
# (1 and 2 ranks, figures worked out by hand) carry the computed speedups.
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1

# --- the fixture runs (the values of tests/report/rep_test_util.h) --------
opts() { # WORLD BATCH LR SEED
  printf '"options":{"train":"p/train.json","val":"p/val.json","epochs":2,"batch_size":%s,"lr":%s,"model":"convnet7","size":32,"threads":1,"world":%s,"seed":%s,"optimizer":"sgd","device":"cpu","precision":"fp32","augment":"flip"}' "$2" "$3" "$1" "$4"
}
train() { # RANK EPOCH STEP IPS WAIT COMPUTE COMM WALL
  printf '{"type":"train","rank":%s,"epoch":%s,"step":%s,"loss":2,"accuracy":0.3,"lr":0.1,"images_per_s":%s,"data_wait_ms":%s,"compute_ms":%s,"comm_ms":%s,"steps":5,"wall_s":%s}\n' "$@"
}
mkdir -p "$T/a" "$T/b"
{
  train 0 0 5 50 2 150 0 1.0
  train 0 0 10 100 1 95 0 1.5
  train 0 0 15 100 1 95 0 2.0
  echo '{"type":"val","epoch":0,"step":15,"loss":1.7,"top1":0.5,"top5":0.9,"records":40,"wall_s":2.2,"val_s":0.15}'
} >"$T/a/metrics.jsonl"
echo "{\"world\":1,\"model\":\"convnet7\",\"device\":\"cpu\",\"threads\":1,\"batch_per_rank\":10,\"global_batch\":10,\"images\":150,\"train_s\":2.5,\"startup_s\":0.1,\"busy_s\":[1.7],\"data_wait_s_per_rank\":[0.02],\"comm_s_per_rank\":[0],\"stall_fraction\":0.008,\"val_top1\":0.5,\"val_s\":0.2,\"checkpoint_s\":0.1,$(opts 1 10 0.1 1)}" >"$T/a/summary.json"
{
  train 0 0 5 40 2 150 50 1.25
  train 1 0 5 40 2 160 40 1.25
  train 1 0 10 60 1 100 60 2.1
  train 0 0 10 80 1 95 29 2.1
  echo '{"type":"val","epoch":0,"step":10,"loss":1.9,"top1":0.3,"top5":0.8,"records":40,"wall_s":2.3,"val_s":0.14}'
  train 0 1 15 80 1 95 29 3.2
  train 1 1 15 60 1 100 60 3.2
  echo '{"type":"val","epoch":1,"step":15,"loss":1.5,"top1":0.6,"top5":0.95,"records":40,"wall_s":3.9,"val_s":0.14}'
} >"$T/b/metrics.jsonl"
echo "{\"world\":2,\"model\":\"convnet7\",\"device\":\"cpu\",\"threads\":1,\"batch_per_rank\":10,\"global_batch\":20,\"images\":300,\"train_s\":4.0,\"startup_s\":0.3,\"busy_s\":[1.8,2.4],\"data_wait_s_per_rank\":[0.02,0.021],\"comm_s_per_rank\":[0.54,0.8],\"stall_fraction\":0.005,\"val_top1\":0.6,\"val_s\":0.3,\"checkpoint_s\":0.1,$(opts 2 10 0.2 7)}" >"$T/b/summary.json"

# --- usage: exit 2, one line ------------------------------------------------
expect 2 "$IMSHARD" report
one_line "$T/err"
contains "$T/err" "missing arguments"
expect 2 "$IMSHARD" report "$T/a"
one_line "$T/err"
contains "$T/err" "imshard: report: -o report.html is required"
# -o one of the files it reads (before: metrics.jsonl replaced by the page)
cp "$T/b/metrics.jsonl" "$T/b.metrics"
for f in metrics.jsonl summary.json; do
  expect 2 "$IMSHARD" report "$T/a" "$T/b" -o "$T/b/$f"
  one_line "$T/err"
  contains "$T/err" "-o '$T/b/$f' is run '$T/b''s $f, which the report reads: write it elsewhere"
done
expect 0 cmp "$T/b/metrics.jsonl" "$T/b.metrics"
# -o a file the trainer writes into a run folder, there or not yet
# (before: the page became a run's summary.json, read back as a damaged
# one, or replaced its checkpoint)
: >"$T/b/checkpoint.safetensors"
for f in summary.json eval.json per_class.csv checkpoint.safetensors imshard-train.lock; do
  [ "$f" = summary.json ] && run_dir=a || run_dir=b
  [ "$f" = summary.json ] && mv "$T/a/summary.json" "$T/a.summary"
  expect 2 "$IMSHARD" report "$T/$run_dir" -o "$T/$run_dir/$f"
  one_line "$T/err"
  contains "$T/err" "-o '$T/$run_dir/$f' is run '$T/$run_dir''s $f, which"
  [ "$f" = summary.json ] && { absent "$T/a/summary.json"; mv "$T/a.summary" "$T/a/summary.json"; }
done
# ... also through a folder made for -o ("sub/.." is the run's folder)
mv "$T/a/summary.json" "$T/a.summary"
expect 2 "$IMSHARD" report "$T/a" -o "$T/a/sub/../summary.json"
one_line "$T/err"
absent "$T/a/summary.json"
absent "$T/a/sub"
mv "$T/a.summary" "$T/a/summary.json"
same "$(wc -c <"$T/b/checkpoint.safetensors")" 0 "(the checkpoint kept)"
absent "$T/b/eval.json"
rm "$T/b/checkpoint.safetensors"
expect 2 "$IMSHARD" report "$T/a" -o "$T/r.html" --no-such-flag
one_line "$T/err"
contains "$T/err" "unknown option '--no-such-flag'"
expect 2 "$IMSHARD" report "$T/a" -o "$T/r.html" --target-acc 90
one_line "$T/err"
contains "$T/err" "--target-acc must be between 0 and 1"
expect 2 "$IMSHARD" report "$T/a" -o "$T/r.html" --target-acc x
one_line "$T/err"
expect 2 "$IMSHARD" report "$T/a" -o
one_line "$T/err"
expect 2 "$IMSHARD" report "$T/a" -o "$T/r.html" --title ""
one_line "$T/err"
absent "$T/r.html"
expect 0 "$IMSHARD" report --help
for o in --output --target-acc --csv --title --quiet; do contains "$T/out" "$o"; done
contains "$T/out" "speedup_time"
expect 0 "$IMSHARD" --help
contains "$T/out" "report"

# --- not a run: exit 1, one line, nothing written ----------------------------
mkdir -p "$T/empty"
expect 1 "$IMSHARD" report "$T/a" "$T/empty" -o "$T/r.html"
one_line "$T/err"
contains "$T/err" "imshard: report: $T/empty: no metrics.jsonl"
absent "$T/r.html"
expect 1 "$IMSHARD" report "$T/nowhere" -o "$T/r.html"
one_line "$T/err"
contains "$T/err" "nowhere"
expect 1 "$IMSHARD" report "$T/a/summary.json" -o "$T/r.html"
one_line "$T/err"
contains "$T/err" "is not a folder"
# -o a folder, and a run named twice: bad usage before anything is read
# (before: the page was made, then its rename failed on the folder; the
# run was drawn and compared with itself)
mkdir -p "$T/pagedir"
expect 2 "$IMSHARD" report "$T/a" -o "$T/pagedir"
one_line "$T/err"
contains "$T/err" "-o '$T/pagedir' is a folder: name the page to write"
expect 2 "$IMSHARD" report "$T/a" "$T/b" "$T/a/" -o "$T/twice.html"
one_line "$T/err"
contains "$T/err" "'$T/a' and '$T/a/' are the same run"
absent "$T/twice.html"
: >"$T/blocker"
expect 1 "$IMSHARD" report "$T/a" -o "$T/blocker/r.html"
one_line "$T/err"
expect 1 "$IMSHARD" report "$T/a" -o "$T/ok.html" --csv "$T/blocker/csv"
one_line "$T/err"

# --- the two fixture runs -----------------------------------------------------
expect 0 "$IMSHARD" report "$T/a" "$T/b" -o "$T/page/report.html" --csv "$T/csv" --target-acc 0.55 --title "Fixture"
exists "$T/page/report.html"
same "$(cat "$T/err")" "imshard: report: wrote '$T/page/report.html' (2 runs) and its CSV files into '$T/csv'" "no warnings for clean logs"
contains "$T/out" "b (2 ranks) vs a, same batch per rank: speedup_speed 1.4 (efficiency 0.7), speedup_time 1.25 (efficiency 0.625) per image"
contains "$T/out" "b: top-1 0.55 reached after 2 epochs, 3.900 s"
contains "$T/out" "a: top-1 0.55 not reached (best 0.5)"
# a run without --target-acc or a scaling group still says where its page
# went (before: nothing at all was printed)
expect 0 "$IMSHARD" report "$T/a" -o "$T/alone.html"
exists "$T/alone.html"
same "$(cat "$T/out")" "" "(one run: no summary line)"
same "$(cat "$T/err")" "imshard: report: wrote '$T/alone.html' (1 run)" "(one run: the page named)"
# a run label comes from its folder's name: printed escaped (before: an
# ESC in the name reached the terminal raw)
cp -r "$T/b" "$T/b"$'\e[31mX'
expect 0 "$IMSHARD" report "$T/a" "$T/b"$'\e[31mX' -o "$T/esc.html" --target-acc 0.55
contains "$T/out" "b\x1b[31mX (2 ranks) vs a, same batch per rank"
contains "$T/out" "b\x1b[31mX: top-1 0.55 reached after 2 epochs"
! grep -q $'\e' "$T/out" || fail "report printed an ESC raw"
checks=$((checks + 1))
for f in runs train val gpu ranks terms scaling skipped; do exists "$T/csv/$f.csv"; done
/usr/bin/python3 - "$T/csv" "$T/page/report.html" <<'PY' || fail "CSV or page figures"
import csv, sys, re
d, page = sys.argv[1], open(sys.argv[2]).read()
rows = list(csv.DictReader(open(d + "/scaling.csv")))
b = [r for r in rows if r["run"] == "b"][0]
assert abs(float(b["speedup_speed"]) - 1.4) < 1e-9, b
assert abs(float(b["efficiency_speed"]) - 0.7) < 1e-9, b
assert abs(float(b["speedup_time"]) - 1.25) < 1e-9, b
assert b["time_per_image"] == "1" and b["baseline"] == "a", b
runs = {r["run"]: r for r in csv.DictReader(open(d + "/runs.csv"))}
assert abs(float(runs["b"]["busy_max_min"]) - 4 / 3) < 1e-6, runs["b"]
assert abs(float(runs["b"]["speed_per_rank"]) - 70) < 1e-9
assert len(list(csv.DictReader(open(d + "/train.csv")))) == 3 + 6
assert "<title>Fixture</title>" in page
for kind in ("speedup", "efficiency", "decomposition", "loss-epoch", "breakdown", "val-epoch"):
    assert 'data-chart="%s"' % kind in page, kind
assert "<script" not in page
PY
checks=$((checks + 1))

# --- malformed lines: named, skipped, the page still made --------------------
cp -r "$T/b" "$T/c"
printf '{"type":"train","rank":0,"epoch":1,"step":20,"loss":"high"}\n{"type":"train","rank":1,"ep' >>"$T/c/metrics.jsonl"
rm "$T/c/summary.json"
expect 0 "$IMSHARD" report "$T/a" "$T/c" -o "$T/r2.html"
contains "$T/err" "imshard: warning: report: $T/c/metrics.jsonl:9: 'loss' is not a number: line skipped"
contains "$T/err" "imshard: warning: report: $T/c/metrics.jsonl:10: truncated line (the file ends inside it): line skipped"
contains "$T/r2.html" "$T/c/metrics.jsonl:9: &#39;loss&#39; is not a number"
contains "$T/r2.html" "no summary.json: the run did not finish"
# --output is -o's long name; without --title the page has the default one
expect 0 "$IMSHARD" report "$T/a" --output "$T/long.html" -q
contains "$T/long.html" "<title>imshard run report</title>"
lacks "$T/long.html" "<title>Fixture</title>"
expect 0 "$IMSHARD" report "$T/a" "$T/c" -o "$T/r3.html" --quiet
same "$(cat "$T/out" "$T/err")" "" "--quiet prints nothing"
exists "$T/r3.html"
# many bad lines: the first few on stderr, the count of the rest
mkdir -p "$T/junk"
for i in $(seq 1 40); do echo "not json $i"; done >"$T/junk/metrics.jsonl"
expect 0 "$IMSHARD" report "$T/junk" -o "$T/r4.html"
same "$(wc -l <"$T/err")" 22 "20 named lines, a count and the page written"
contains "$T/err" "20 more diagnostics (listed in the report)"
# past the 100 lines kept per run, the page counts the rest with the
# folder's name, escaped (before: a folder named with '<' and '&' reached
# the page raw there)
mkdir -p "$T/j<b>&"
for i in $(seq 1 105); do echo "not json $i"; done >"$T/j<b>&/metrics.jsonl"
expect 0 "$IMSHARD" report "$T/j<b>&" -o "$T/r5.html" -q
contains "$T/r5.html" "... and 5 more in $T/j&lt;b&gt;&amp;"
lacks "$T/r5.html" "<b>&"
# stderr says how many the page lists (before: "85 more skipped lines
# (listed in the report)", but the page lists 100 of the 105)
expect 0 "$IMSHARD" report "$T/j<b>&" -o "$T/r7.html"
contains "$T/err" "85 more diagnostics (the report lists 100 of the 105, the first 100 of each run)"
lacks "$T/err" "(listed in the report)"
# CSV text cells a spreadsheet would run as formulas start with a ' (a
# run folder named "=1+2", a model "@cmd"); a number stays a number
mkdir -p "$T/f/=1+2"
cp "$T/a/metrics.jsonl" "$T/f/=1+2/"
sed 's/"model":"convnet7"/"model":"@cmd"/' "$T/a/summary.json" >"$T/f/=1+2/summary.json"
expect 0 "$IMSHARD" report "$T/f/=1+2" -o "$T/f.html" --csv "$T/f.csv" -q
contains "$T/f.csv/runs.csv" "\"'=1+2\",$T/f/=1+2,1,\"'@cmd\","
contains "$T/f.csv/train.csv" "\"'=1+2\",0,0,5,"

# strings that are not UTF-8 (a Latin-1 folder name, model, option value
# and class name) are written as \xHH in the page and every CSV file, and
# each file's are told (before: the bytes went out raw, and the page and
# the CSV files were not valid UTF-8)
mkdir -p "$T/l1/caf"$'\xe9'
cp "$T/a/metrics.jsonl" "$T/l1/caf"$'\xe9/'
sed -e 's/"model":"convnet7"/"model":"n\xe9t"/' -e 's/"augment":"flip"/"augment":"fl\xefp"/' \
  "$T/a/summary.json" >"$T/l1/caf"$'\xe9/summary.json'
printf '{"per_class":[{"name":"\xe9l\xe8ve","records":1,"top1":1,"top5":1}]}\n' \
  >"$T/l1/caf"$'\xe9/eval.json'
expect 0 "$IMSHARD" report "$T/l1/caf"$'\xe9' -o "$T/l1.html" --csv "$T/l1.csv"
# each line says what was done: the text is shown, not skipped (before:
# every line ended "(skipped)")
contains "$T/err" "summary.json: 'model' is not valid UTF-8: the bad bytes are shown as \\xHH"
contains "$T/err" "summary.json: 1 of the options is not valid UTF-8"
contains "$T/err" "eval.json: 1 class name is not valid UTF-8"
same "$(grep -c 'is not valid UTF-8: the bad bytes are shown as \\xHH$' "$T/err")" 3 \
  "(lines that end saying how the text is shown)"
lacks "$T/err" "(skipped)"
contains "$T/l1.html" 'caf\xe9'
contains "$T/l1.html" '\xe9l\xe8ve'
contains "$T/l1.csv/runs.csv" 'caf\xe9,'
contains "$T/l1.csv/runs.csv" ',n\xe9t,'
/usr/bin/python3 - "$T/l1.html" "$T/l1.csv" <<'PY' || fail "page or CSV files not UTF-8"
import os, sys
open(sys.argv[1], "rb").read().decode("utf-8")
for f in os.listdir(sys.argv[2]):
    open(os.path.join(sys.argv[2], f), "rb").read().decode("utf-8")
PY
checks=$((checks + 1))

# a line of 300 MB without a newline (a damaged file) is skipped in bounded
# memory and the lines after it are read (before: getline took the whole
# line; short of memory it failed as if at the end of the file, and the
# report dropped the rest of the file without a word and exited 0)
mkdir -p "$T/long"
train 0 0 5 50 2 150 0 1.0 >"$T/long/metrics.jsonl"
truncate -s 300M "$T/long.bin"
cat "$T/long.bin" >>"$T/long/metrics.jsonl"
rm "$T/long.bin"
{ echo; train 0 0 10 100 1 95 0 1.5; } >>"$T/long/metrics.jsonl"
if asan_build; then
  cap='export ASAN_OPTIONS="${ASAN_OPTIONS:-}:allocator_may_return_null=1:max_allocation_size_mb=100";'
else
  cap='ulimit -v 200000;'
fi
run bash -c "$cap"' exec "$@"' _ "$IMSHARD" report "$T/long" -o "$T/long.html" --csv "$T/long.csv"
same "$rc" 0 "(report of a 300 MB line under a memory cap: exit)"
contains "$T/err" "$T/long/metrics.jsonl:2: line is longer than 65536 bytes: line skipped"
same "$(grep -c '^long,0,' "$T/long.csv/train.csv")" 2 "train lines read around the long one"
rm -r "$T/long"

# a summary.json or an eval.json of junk under the old 64 MiB read limit
# (one flat array of numbers) is a diagnostic naming its size and the
# limit fitted to what imshard-train writes, read and parsed in bounded
# memory (before: the parse took about 40 times the file, 2.7 GB for 64
# MB; under the cap it failed as "not valid JSON")
mkdir -p "$T/junk64"
train 0 0 5 50 2 150 0 1.0 >"$T/junk64/metrics.jsonl"
/usr/bin/python3 - "$T/junk64/summary.json" 33554000 <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    f.write('{"a":[' + '0,' * int(sys.argv[2]) + '0]}\n')
PY
cp "$T/junk64/summary.json" "$T/junk64/eval.json"
size=$(stat -c %s "$T/junk64/summary.json")
run bash -c "$cap"' exec "$@"' _ "$IMSHARD" report "$T/junk64" -o "$T/junk64.html"
same "$rc" 0 "(report of a 64 MB summary.json and eval.json under a memory cap: exit)"
contains "$T/err" "imshard: warning: report: $T/junk64/summary.json: $size bytes, more than imshard-train writes (limit 1048576 bytes): ignored"
contains "$T/err" "imshard: warning: report: $T/junk64/eval.json: $size bytes, more than an evaluation of up to 100000 classes takes (limit 51265536 bytes): not drawn"
contains "$T/junk64.html" "no summary.json: the run did not finish"
# an eval.json under its byte limit but of more values than an evaluation
# of 100000 classes has is not parsed either: 20 MB of "0," would be 10
# million nodes, 800 MB
/usr/bin/python3 - "$T/junk64/eval.json" 10000000 <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    f.write('{"a":[' + '0,' * int(sys.argv[2]) + '0],"s":"[,{"}\n')
PY
rm "$T/junk64/summary.json"
size=$(stat -c %s "$T/junk64/eval.json")
run bash -c "$cap"' exec "$@"' _ "$IMSHARD" report "$T/junk64" -o "$T/junk64.html"
same "$rc" 0 "(report of a 20 MB eval.json of numbers under a memory cap: exit)"
contains "$T/err" "imshard: warning: report: $T/junk64/eval.json: 10000004 JSON values in $size bytes, more than an evaluation of up to 100000 classes takes (limit 500064 values): not drawn"
rm -r "$T/junk64"

# a confusion.csv with 250 MB of junk after its rows (under the old read
# limit of 256 MiB) is named with its size and the limit its classes give,
# and read no further (before: read whole, under the cap the report failed
# for want of memory)
mkdir -p "$T/conf"
train 0 0 5 50 2 150 0 1.0 >"$T/conf/metrics.jsonl"
printf '%s\n' '{"program":"imshard eval","records":2,"top1":0.5,"top5":1,"per_class":[{"name":"a","records":1,"top1":1,"top5":1},{"name":"b","records":1,"top1":0,"top5":1}]}' >"$T/conf/eval.json"
printf 'true/predicted,a,b\na,1,0\nb,1,0\n' >"$T/conf/confusion.csv"
run "$IMSHARD" report "$T/conf" -o "$T/conf.html"
same "$rc" 0 "(report of a good confusion.csv: exit)"
contains "$T/conf.html" 'class="confusion"'
truncate -s 250M "$T/conf/confusion.csv"
run bash -c "$cap"' exec "$@"' _ "$IMSHARD" report "$T/conf" -o "$T/conf.html"
same "$rc" 0 "(report of a 250 MB confusion.csv under a memory cap: exit)"
contains "$T/err" "imshard: warning: report: $T/conf/confusion.csv: 262144000 bytes, more than eval.json's 2 classes take (limit "
contains "$T/err" " bytes): the confusion matrix is not drawn"
rm -r "$T/conf" "$T/conf.html"

# a log of 100000 parts (a start line before each interval: a run resumed
# again and again, or a damaged file) is read in time linear in its lines
# (before: each line was checked against every part, about a minute)
mkdir -p "$T/parts"
/usr/bin/python3 - "$T/parts/metrics.jsonl" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    for p in range(100000):
        s = 5 * p
        f.write('{"type":"start","step":%d,"epoch":0,"world":1,"run_id":"r1"}\n' % s)
        f.write('{"type":"train","rank":0,"epoch":0,"step":%d,"loss":2,"accuracy":0.3,'
                '"images_per_s":100,"data_wait_ms":1,"compute_ms":95,"comm_ms":0,"steps":5,'
                '"wall_s":%g}\n' % (s + 5, 0.1 * (s + 5)))
PY
run timeout 20 "$IMSHARD" report "$T/parts" -o "$T/parts.html" --csv "$T/parts.csv" -q
same "$rc" 0 "(report of 100000 parts within 20 s: exit)"
same "$(grep -c '^parts,0,' "$T/parts.csv/train.csv" 2>/dev/null)" 100000 "train lines of 100000 parts"
rm -r "$T/parts" "$T/parts.csv"

# -o where the page would replace an input or another output, or be
# renamed over what is not a regular file: bad usage, nothing written
# (before: a run's eval.json or confusion.csv was replaced by the page, a
# FIFO or /dev/null by a regular file, and -o DIR/train.csv with --csv DIR
# by train.csv without a word)
echo '{"per_class":[{"name":"a","records":1,"top1":1,"top5":1}]}' >"$T/b/eval.json"
printf 'true/predicted,a\na,1\n' >"$T/b/confusion.csv"
for f in eval.json confusion.csv; do
  cp "$T/b/$f" "$T/b.$f"
  expect 2 "$IMSHARD" report "$T/a" "$T/b" -o "$T/b/$f"
  one_line "$T/err"
  contains "$T/err" "-o '$T/b/$f' is run '$T/b''s $f, which the report reads: write it elsewhere"
  expect 0 cmp "$T/b/$f" "$T/b.$f"
done
rm "$T/b/eval.json" "$T/b/confusion.csv"
mkfifo "$T/fifo"
expect 2 "$IMSHARD" report "$T/a" -o "$T/fifo"
one_line "$T/err"
contains "$T/err" "-o '$T/fifo' is a FIFO, not a regular file"
[ -p "$T/fifo" ] || fail "the FIFO was replaced"
# a FIFO where a run folder holds its files: named and skipped, never
# opened to wait on (before: one at imshard-train.lock hung the report)
mkdir -p "$T/pipes"
cp "$T/a/metrics.jsonl" "$T/pipes/"
for f in imshard-train.lock summary.json eval.json; do mkfifo "$T/pipes/$f"; done
run timeout 20 "$IMSHARD" report "$T/pipes" -o "$T/pipes.html"
same "$rc" 0 "(report of a folder with FIFOs: exit)"
for f in imshard-train.lock summary.json eval.json; do
  contains "$T/err" "$T/pipes/$f: cannot open '$T/pipes/$f': not a regular file (a FIFO)"
done
contains "$T/pipes.html" "imshard-train.lock: cannot open"
# through a link of the scratch folder: unfixed, the link is replaced, not
# /dev/null itself
ln -s /dev/null "$T/null"
expect 2 "$IMSHARD" report "$T/a" -o "$T/null"
one_line "$T/err"
contains "$T/err" "-o '$T/null' is a character device, not a regular file"
[ -L "$T/null" ] || fail "the link to /dev/null was replaced"
expect 2 "$IMSHARD" report "$T/a" -o "$T/csvout/train.csv" --csv "$T/csvout/"
one_line "$T/err"
contains "$T/err" "-o '$T/csvout/train.csv' is one of the CSV files written into --csv '$T/csvout/'"
absent "$T/csvout"
mkdir "$T/csvout"
expect 2 "$IMSHARD" report "$T/a" -o "$T/csvout/../csvout/runs.csv" --csv "$T/csvout"
one_line "$T/err"
contains "$T/err" "is one of the CSV files written into --csv '$T/csvout'"
absent "$T/csvout/runs.csv"
# a folder or a FIFO at a CSV file's name: bad usage, nothing written
# (before: found after the page and the CSV files before it were written,
# the message naming a temporary)
mkdir -p "$T/csvdir/val.csv"
expect 2 "$IMSHARD" report "$T/a" -o "$T/cd.html" --csv "$T/csvdir"
one_line "$T/err"
contains "$T/err" "--csv '$T/csvdir' holds a folder at '$T/csvdir/val.csv', where a CSV file is written"
absent "$T/cd.html"
same "$(ls "$T/csvdir")" "val.csv" "(files in a refused --csv)"
rmdir "$T/csvdir/val.csv"
mkfifo "$T/csvdir/gpu.csv"
expect 2 "$IMSHARD" report "$T/a" -o "$T/cd.html" --csv "$T/csvdir"
one_line "$T/err"
contains "$T/err" "holds a FIFO at '$T/csvdir/gpu.csv'"
[ -p "$T/csvdir/gpu.csv" ] || fail "the FIFO at gpu.csv was replaced"
# --csv that is -o, or a folder inside it, neither there yet: bad usage,
# nothing written (before: the CSV files were put in a folder at -o's name,
# then the page's rename onto it failed, exit 1)
expect 2 "$IMSHARD" report "$T/a" -o "$T/same" --csv "$T/same"
one_line "$T/err"
contains "$T/err" "--csv '$T/same' is -o '$T/same' or lies inside it"
absent "$T/same"
expect 2 "$IMSHARD" report "$T/a" -o "$T/same/r.html" --csv "$T/same/x/../r.html/csv"
one_line "$T/err"
absent "$T/same"
# --csv a file: bad usage; --csv a folder that cannot be made: no page
# (before: the page was written, then the CSV folder failed)
expect 2 "$IMSHARD" report "$T/a" -o "$T/r6.html" --csv "$T/a/metrics.jsonl"
one_line "$T/err"
contains "$T/err" "--csv '$T/a/metrics.jsonl' is a regular file: name a folder"
expect 1 "$IMSHARD" report "$T/a" -o "$T/r6.html" --csv "$T/blocker/csv"
one_line "$T/err"
absent "$T/r6.html"
# a failed run leaves no folder it made for -o or --csv, and keeps those
# that were there (before: the new folders stayed, empty). A file-size
# limit stands in for a full disk; SIGXFSZ ignored, the write gets EFBIG.
expect 1 "$IMSHARD" report "$T/a" -o "$T/newpage/x/r.html" --csv "$T/blocker/csv"
one_line "$T/err"
absent "$T/newpage"
run bash -c 'trap "" XFSZ; ulimit -f 8; exec "$@"' full "$IMSHARD" report "$T/a" \
  -o "$T/full/page/r.html" --csv "$T/full/csv/x"
same "$rc" 1 "(report under a file-size limit: exit)"
one_line "$T/err"
contains "$T/err" "File too large"
absent "$T/full"
mkdir -p "$T/kept/csv"
run bash -c 'trap "" XFSZ; ulimit -f 8; exec "$@"' full "$IMSHARD" report "$T/a" \
  -o "$T/kept/r.html" --csv "$T/kept/csv"
same "$rc" 1 "(report under a file-size limit into folders that were there: exit)"
exists "$T/kept/csv"
# the page and the CSV files all or none: a limit that train.csv passes
# after the page and runs.csv fit leaves the old page and CSV files as
# they were and no new one (before: a new page and runs.csv beside the
# old train.csv, exit 1)
mkdir -p "$T/many" "$T/aon/csv"
for i in $(seq 1 8000); do train 0 0 $((5 * i)) 100 1 95 0 $i; done >"$T/many/metrics.jsonl"
echo old >"$T/aon/r.html"
echo old >"$T/aon/csv/runs.csv"
run bash -c 'trap "" XFSZ; ulimit -f 200; exec "$@"' full "$IMSHARD" report "$T/many" \
  -o "$T/aon/r.html" --csv "$T/aon/csv"
same "$rc" 1 "(report whose train.csv passes a file-size limit: exit)"
one_line "$T/err"
contains "$T/err" "train.csv"
same "$(cat "$T/aon/r.html")" old "the old page kept"
same "$(cat "$T/aon/csv/runs.csv")" old "the old runs.csv kept"
same "$(ls "$T/aon/csv")" runs.csv "no new CSV file, no temporary"
same "$(ls "$T/aon")" "csv
r.html" "no temporary of the page"
# and without the limit all are written
expect 0 "$IMSHARD" report "$T/many" -o "$T/aon/r.html" --csv "$T/aon/csv" -q
same "$(grep -c "^many,0," "$T/aon/csv/train.csv")" 8000 "train.csv of 8000 lines"
rm -r "$T/many" "$T/aon"
# a rank without a train line in the folder (its --log-dir was another)
# is said to be guessed at the others' speed (before: assumed without a
# word)
mkdir -p "$T/split"
grep '"rank":0' "$T/b/metrics.jsonl" >"$T/split/metrics.jsonl"
cp "$T/b/summary.json" "$T/split/"
expect 0 "$IMSHARD" report "$T/split" -o "$T/split.html" -q
contains "$T/split.html" "1 of 2 ranks have no train line in this metrics.jsonl"
finish
