#!/usr/bin/env bash
# imshard predict: image files go through validation's transform (the
# records of a split extracted to files predict what eval predicted for
# them); EXIF orientation is applied (every orientation of the fixture
# predicts what the upright one does, the same pixels without the tag do
# not); a PNG with alpha is composited over white; any size; bad images
# are named on stderr, the others still predicted in order, exit 1.
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1
: "${IMSHARD_TRAIN:?IMSHARD_TRAIN must point at imshard-train}"
edit() { /usr/bin/python3 "$IMS_SRC/tests/cli/img_edit.py" "$@"; }

expect 0 "$IMSHARD" sample "$T/s" --classes 4 --per-class 15 --quiet
expect 0 "$IMSHARD" convert folder "$T/s" -o "$T/p" --val-ratio 0.25 --seed 3 --quiet
va="$T/p/val.json"
expect 0 "$IMSHARD_TRAIN" --train "$T/p/train.json" --val "$va" --model convnet7 --size 16 \
  --threads 1 --batch-size 8 --epochs 2 --log-dir "$T/run" --checkpoint-dir "$T/run" --quiet
ck="$T/run/checkpoint.safetensors"
mkdir -p "$T/fx" && "$IMS_FIXTURES" "$T/fx" || fail "make_images failed"
fx="$T/fx"

# --- the records of the split, as files, predict what eval predicted ------
expect 0 "$IMSHARD" extract "$va" -o "$T/ex" --quiet
expect 0 "$IMSHARD" eval "$ck" "$va" --threads 1 -q -o "$T/ev"
ls "$T/ex"/*.jpg "$T/ex"/*.png 2>/dev/null | sort >"$T/files"
same "$(wc -l <"$T/files")" "$(json "$va" 'j["records"]')" "(extracted records)"
expect 0 "$IMSHARD" predict "$ck" $(cat "$T/files") --json --top 1 --threads 1 -q
cp "$T/out" "$T/pred.jsonl"
agree() { # PREDICT.jsonl PREDICTIONS.csv: the same class and confidence
  /usr/bin/python3 - "$1" "$2" >"$T/m" 2>&1 <<'PY'
import csv, json, os, sys
got = [json.loads(l) for l in open(sys.argv[1])]
want = {int(r["index"]): r for r in csv.DictReader(open(sys.argv[2]))}
assert len(got) == len(want), (len(got), len(want))
for g in got:
    w = want[int(os.path.basename(g["image"]).split(".")[0])]
    t = g["top"][0]
    assert (t["class"], t["name"]) == (int(w["predicted"]), w["predicted_name"]), (g, w)
    assert abs(t["probability"] - float(w["confidence"])) < 2e-6, (g, w)
print("ok")
PY
  contains "$T/m" "ok"
}
agree "$T/pred.jsonl" "$T/ev/predictions.csv"
# a run trained in bf16: predict computes in its precision, as eval does
# (before: predict was fp32 whatever the run, so its probabilities were
# not eval's, a few thousandths off); one batch of the same size in both,
# so that 16-bit rounding meets the same sums
expect 0 "$IMSHARD_TRAIN" --train "$T/p/train.json" --val "$va" --model convnet7 --size 16 \
  --threads 1 --batch-size 8 --epochs 2 --precision bf16 --checkpoint-dir "$T/run16" --quiet
ck16="$T/run16/checkpoint.safetensors"
expect 0 "$IMSHARD" eval "$ck16" "$va" --threads 1 --batch-size 16 -q -o "$T/ev16"
expect 0 "$IMSHARD" predict "$ck16" $(cat "$T/files") --json --top 1 --threads 1 --batch-size 16
contains "$T/err" "predict: in bf16, the precision its run trained and validated in (--precision fp32 for full precision)"
cp "$T/out" "$T/pred16.jsonl"
agree "$T/pred16.jsonl" "$T/ev16/predictions.csv"
expect 0 "$IMSHARD" eval "$ck16" "$va" --threads 1 --batch-size 16 -q -o "$T/ev32" --precision fp32
expect 0 "$IMSHARD" predict "$ck16" $(cat "$T/files") --json --top 1 --threads 1 --batch-size 16 \
  --precision fp32
same "$(cat "$T/err")" "" "(--precision fp32 says nothing)"
cp "$T/out" "$T/pred32.jsonl"
agree "$T/pred32.jsonl" "$T/ev32/predictions.csv"
checks=$((checks + 1))
cmp -s "$T/pred16.jsonl" "$T/pred32.jsonl" && fail "predict --precision fp32 gave bf16's lines"
expect 2 "$IMSHARD" predict "$ck16" "$fx/rgb.jpg" --precision fp64
one_line "$T/err"
contains "$T/err" "--precision must be fp32, bf16 or fp16, got 'fp64'"

# --- the text lines: one per image, in order, --top K most probable -------
expect 0 "$IMSHARD" predict "$ck" "$fx/rgb.jpg" "$fx/big.jpg" "$fx/rgb.png" --top 2 --threads 1
same "$(wc -l <"$T/out")" 3 "(lines)"
same "$(cut -d: -f1 "$T/out" | tr '\n' ' ')" "$fx/rgb.jpg $fx/big.jpg $fx/rgb.png " "(order)"
/usr/bin/python3 - "$T/out" >"$T/m" 2>&1 <<'PY'
import re, sys
names = {"checkerboard", "circle", "crescent", "cross"}
for line in open(sys.argv[1]):
    parts = line.rstrip("\n").split(": ", 1)[1].split(", ")
    assert len(parts) == 2, line
    p = [float(re.fullmatch(r"(\S+) (\d+\.\d\d)%", x).group(2)) for x in parts]
    assert all(re.fullmatch(r"(\S+) .*", x).group(1) in names for x in parts), line
    assert p[0] >= p[1], line
print("ok")
PY
contains "$T/m" "ok"
# --json: probabilities sorted, summing to 1 over all classes
expect 0 "$IMSHARD" predict "$ck" "$fx/rgb.jpg" --json --top 10 --threads 1
/usr/bin/python3 - "$T/out" >"$T/m" 2>&1 <<'PY'
import json, sys
j = json.loads(open(sys.argv[1]).read())
p = [t["probability"] for t in j["top"]]
assert len(p) == 4 and p == sorted(p, reverse=True) and abs(sum(p) - 1) < 1e-9, j
assert sorted(t["class"] for t in j["top"]) == [0, 1, 2, 3], j
print("ok")
PY
contains "$T/m" "ok"
# --top past the class count is said once (before: 4 classes given for
# --top 10 without a word); the default 5 on 4 classes says nothing
contains "$T/err" "--top 10, but '$ck' has 4 classes: each image gets all 4"
expect 0 "$IMSHARD" predict "$ck" "$fx/rgb.jpg" --threads 1
same "$(cat "$T/err")" "" "(the default --top says nothing)"
# -k is --top's short name: the same lines
cp "$T/out" "$T/top5.txt"
expect 0 "$IMSHARD" predict "$ck" "$fx/rgb.jpg" "$fx/big.jpg" "$fx/rgb.png" -k 2 --threads 1
cp "$T/out" "$T/k2.txt"
expect 0 "$IMSHARD" predict "$ck" "$fx/rgb.jpg" "$fx/big.jpg" "$fx/rgb.png" --top 2 --threads 1
cp "$T/out" "$T/top2.txt"
expect 0 cmp "$T/top2.txt" "$T/k2.txt"
# -q and --quiet: the note of a replaced recorded value is not said
expect 0 "$IMSHARD" predict "$ck" "$fx/rgb.jpg" --threads 1 --size 20
same "$(cat "$T/err")" "imshard: predict: --size 20 in place of the 16 px '$ck' records" "(the replaced size said)"
cmp -s "$T/out" "$T/top5.txt" && fail "predict --size 20 gave the lines at 16 px"
cp "$T/out" "$T/s20.txt"
for q in -q --quiet; do
  expect 0 "$IMSHARD" predict "$ck" "$fx/rgb.jpg" --threads 1 --size 20 $q
  same "$(cat "$T/err")" "" "($q: the note not said)"
  cp "$T/out" "$T/s20q.txt"
  expect 0 cmp "$T/s20q.txt" "$T/s20.txt"
done

# --- EXIF orientation, alpha, any size ------------------------------------
# logits of each image, then the largest difference from rgb.jpg's
logits() {
  expect 0 "$IMSHARD" predict "$ck" "$@" --json --logits --top 1 --threads 1 -q
  cp "$T/out" "$T/logits.jsonl"
}
diff_from() { # IMAGE: max |logit - logit(first image)|
  /usr/bin/python3 - "$T/logits.jsonl" "$1" <<'PY'
import json, sys
rows = {j["image"]: j["logits"] for j in map(json.loads, open(sys.argv[1]))}
ref, got = list(rows.values())[0], rows[sys.argv[2]]
print("%.6f" % max(abs(a - b) for a, b in zip(ref, got)))
PY
}
below() { # A B WHAT: A < B
  checks=$((checks + 1))
  /usr/bin/python3 -c "import sys; sys.exit(not float(sys.argv[1]) < float(sys.argv[2]))" "$1" "$2" ||
    fail "$3: $1 is not below $2"
}
# the same pixels stored rotated with the tag cleared: the control that
# shows the orientation matters to this network
edit no-orientation "$fx/exif_6.jpg" "$T/raw6.jpg"
edit no-orientation "$fx/exif_3.jpg" "$T/raw3.jpg"
logits "$fx/rgb.jpg" "$fx"/exif_[1-8].jpg "$T/raw6.jpg" "$T/raw3.jpg"
raw6=$(diff_from "$T/raw6.jpg")
raw3=$(diff_from "$T/raw3.jpg")
below 0.02 "$raw6" "(the stored pixels of exif_6.jpg differ from the upright picture)"
below 0.02 "$raw3" "(the stored pixels of exif_3.jpg differ from the upright picture)"
# JPEG's loss on rotated blocks moves logits by a few thousandths
for o in 1 2 3 4 5 6 7 8; do
  below "$(diff_from "$fx/exif_$o.jpg")" 0.01 "(exif_$o.jpg against rgb.jpg)"
done
# lossless: a PNG's eXIf orientation gives the upright picture's logits
logits "$fx/rgb.png" "$fx/exif_6.png"
below "$(diff_from "$fx/exif_6.png")" 1e-5 "(exif_6.png against rgb.png)"
# alpha over white: the same logits as the composited RGB picture
edit over-white "$fx/rgba.png" "$T/white.png"
logits "$fx/rgba.png" "$T/white.png" "$fx/gray_alpha.png" "$fx/palette_trns.png" "$fx/rgb16.png" "$fx/cmyk.jpg"
below "$(diff_from "$T/white.png")" 1e-5 "(rgba.png against its composite over white)"
same "$(wc -l <"$T/logits.jsonl")" 6 "(alpha, grey, palette, 16-bit, CMYK predicted)"
# any size: 1200 x 900 and 1 x 1
/usr/bin/python3 - "$T/dot.png" <<'PY'
import struct, sys, zlib
c = lambda k, b: struct.pack(">I", len(b)) + k + b + struct.pack(">I", zlib.crc32(k + b))
open(sys.argv[1], "wb").write(b"\x89PNG\r\n\x1a\n" + c(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
                              + c(b"IDAT", zlib.compress(b"\0\x10\x80\xf0")) + c(b"IEND", b""))
PY
logits "$fx/big.jpg" "$T/dot.png"
same "$(wc -l <"$T/logits.jsonl")" 2 "(a large and a 1-pixel image predicted)"

# --- bad images: named, the rest predicted in order, exit 1 ---------------
mkfifo "$T/fifo.jpg"
mkdir "$T/dir.jpg"
expect 1 "$IMSHARD" predict "$ck" "$fx/truncated.jpg" "$fx/rgb.jpg" "$fx/garbage.jpg" "$fx/empty.jpg" \
  "$T/none.jpg" "$fx/text.jpg" "$T/fifo.jpg" "$T/dir.jpg" "$fx/huge.png" "$fx/rgb.png" --threads 1
same "$(cut -d: -f1 "$T/out" | tr '\n' ' ')" "$fx/rgb.jpg $fx/rgb.png " "(the good images, in order)"
same "$(grep -c "^imshard: predict: cannot predict '" "$T/err")" 8 "(each bad image named once)"
for f in "$fx/truncated.jpg" "$fx/garbage.jpg" "$fx/empty.jpg" "$T/none.jpg" "$fx/text.jpg" \
  "$T/fifo.jpg" "$T/dir.jpg" "$fx/huge.png"; do
  contains "$T/err" "cannot predict '$f'"
done
contains "$T/err" "predict: 8 of 10 images could not be predicted"
same "$(wc -l <"$T/err")" 9 "(one line per bad image and the count)"
# only bad images: nothing on stdout
expect 1 "$IMSHARD" predict "$ck" "$fx/truncated.jpg" -q
same "$(wc -c <"$T/out")" 0 "(no line for a bad image)"
one_line "$T/err"

# --- --json: a path that is not UTF-8 or holds a line break --------------
# still one valid JSON line, the odd byte as the text \xHH (before: the
# byte went out as it was, a line no JSON reader takes)
odd="$T/odd"$'\xff\n'"x.jpg"
cp "$fx/rgb.jpg" "$odd"
expect 0 "$IMSHARD" predict "$ck" "$odd" --json --top 1 --threads 1 -q
/usr/bin/python3 - "$T/out" "$T" >"$T/m" 2>&1 <<'PY'
import json, sys
lines = open(sys.argv[1], "rb").read().decode("utf-8").splitlines()
assert len(lines) == 1, lines
j = json.loads(lines[0])
assert j["image"] == sys.argv[2] + "/odd\\xff\nx.jpg", j["image"]
print("ok")
PY
contains "$T/m" "ok"

# --- a long path and a long class name: the line names them whole ---------
# (before: both were cut to about 1 KiB with '...', so the line named no
# file, and two deep files with one prefix got the same name)
deep="$T/$(printf 'd%.0s' {1..200})"
deep="$deep/${deep##*/}/${deep##*/}/${deep##*/}/${deep##*/}/${deep##*/}"
mkdir -p "$deep" && cp "$fx/rgb.jpg" "$deep/a.jpg" && cp "$fx/rgb.jpg" "$deep/b.jpg"
long=$(printf 'n%.0s' {1..1500})
/usr/bin/python3 "$IMS_SRC/tests/cli/st_edit.py" "$ck" "$T/long.safetensors" \
  --set "class_names=[\"$long\",\"b\",\"c\",\"d\"]"
expect 0 "$IMSHARD" predict "$T/long.safetensors" "$deep/a.jpg" "$deep/b.jpg" --top 4 --threads 1 -q
same "$(cut -d: -f1 "$T/out" | tr '\n' ' ')" "$deep/a.jpg $deep/b.jpg " "(long paths, whole)"
same "$(grep -c " $long [0-9.]*%" "$T/out")" 2 "(the long class name, whole)"

# --- lines that cannot be written: exit 1, said ---------------------------
# (before: status 0 with every line lost on a full disk); /dev/full
# through a link in the scratch folder
ln -s /dev/full "$T/full"
run bash -c 'exec "$@" >"$0"' "$T/full" "$IMSHARD" predict "$ck" "$fx/rgb.jpg" "$fx/rgb.png" --threads 1
same "$rc" 1 "(predict onto a full disk: exit)"
one_line "$T/err"
contains "$T/err" "imshard: predict: cannot write the predictions to standard output: No space left on device"

# --- bad checkpoints and usage: one line ----------------------------------
expect 1 "$IMSHARD" predict "$T/none.safetensors" "$fx/rgb.jpg"
one_line "$T/err"
contains "$T/err" "none.safetensors"
head -c 2000 "$ck" >"$T/cut.safetensors"
expect 1 "$IMSHARD" predict "$T/cut.safetensors" "$fx/rgb.jpg"
one_line "$T/err"
# a recorded crop fraction below --val-crop-frac's floor (before: 1e-300
# was taken, the resize sized at 1.6e301 pixels through an undefined
# conversion, and predictions printed, exit 0)
/usr/bin/python3 "$IMS_SRC/tests/cli/st_edit.py" "$ck" "$T/crop.safetensors" --set val_crop_frac=1e-300
expect 1 "$IMSHARD" predict "$T/crop.safetensors" "$fx/rgb.jpg"
one_line "$T/err"
contains "$T/err" "val_crop_frac"
same "$(wc -c <"$T/out")" 0 "(nothing predicted)"
expect 1 "$IMSHARD" predict "$fx/rgb.jpg" "$fx/rgb.jpg"
one_line "$T/err"
expect 2 "$IMSHARD" predict "$ck"
one_line "$T/err"
expect 2 "$IMSHARD" predict "$ck" "$fx/rgb.jpg" --top 0
one_line "$T/err"
# a --std of 0 or whose inverse is no float (before: 1e-45 was taken,
# every input infinite)
for sd in 1,0,1 1e-45,1,1; do
  expect 2 "$IMSHARD" predict "$ck" "$fx/rgb.jpg" --std $sd
  one_line "$T/err"
done
# a weight or running mean that is not finite is refused as the weights
# load, named with its element, nothing predicted (before: every image
# was run and each said "the network's output is not finite")
cp "$ck" "$T/infmean.safetensors"
/usr/bin/python3 "$IMS_SRC/tests/cli/st_tool.py" poke "$T/infmean.safetensors" features.1.running_mean 2 -inf
expect 1 "$IMSHARD" predict "$T/infmean.safetensors" "$fx/rgb.jpg" "$fx/big.jpg" --threads 1
one_line "$T/err"
contains "$T/err" "predict: cannot load '$T/infmean.safetensors': tensor 'features.1.running_mean' holds -inf at element 2 (as float32)"
same "$(wc -c <"$T/out")" 0 "(nothing predicted)"
# the weights file is opened once: the card and the weights come from one
# read, so a checkpoint replaced meanwhile cannot pair one file's card
# with another's weights (before: three opens). Seen with strace where it
# may trace.
if command -v strace >/dev/null && strace -f -qq -e trace=none true 2>/dev/null; then
  run env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
    strace -f -qq -e trace=open,openat,openat2 -e signal=none -o "$T/opens" \
    "$IMSHARD" predict "$ck" "$fx/rgb.jpg" --threads 1 -q
  same "$rc" 0 "exit status of predict under strace"
  same "$(grep -c "open[a-z0-9]*(.*\"$ck\"" "$T/opens")" 1 "opens of the weights by predict"
fi
expect 2 "$IMSHARD" predict "$ck" "$fx/rgb.jpg" --logits
one_line "$T/err"
contains "$T/err" "--logits needs --json"
# --threads past what OpenBLAS was built for (MAX_THREADS; 64 for
# Debian's): one line, exit 2 (before: exit 0, thousands of OpenBLAS
# "Program is Terminated" lines in the predictions on stdout); a build
# that serves 1024 threads predicts the image, one clean line
run "$IMSHARD" predict "$ck" "$fx/rgb.jpg" --threads 1024 -q
lacks "$T/out" "OpenBLAS"
if [ "$rc" = 2 ]; then
  one_line "$T/err"
  contains "$T/err" "--threads 1024: this OpenBLAS was built for at most"
  same "$(wc -c <"$T/out")" 0 "(nothing predicted)"
else
  same "$rc" 0 "(predict --threads 1024: exit)"
  same "$(wc -l <"$T/out")" 1 "(one line for one image)"
fi
expect 0 "$IMSHARD" predict --help
contains "$T/out" "EXIF orientation"
contains "$T/out" "--top"

# --- a memory limit too small for OpenBLAS's buffers ----------------------
# one line, as for the trainer (before: predict spun at full CPU for a
# buffer OpenBLAS could not map, until killed)
if ! asan_build; then
  three=$(head -3 "$T/files" | tr '\n' ' ')
  run bash -c 'ulimit -v 600000; exec timeout 60 "$@"' _ "$IMSHARD" predict "$ck" $three \
    -q --threads 4
  same "$rc" 1 "(predict under ulimit -v 600000, 4 threads: exit)"
  one_line "$T/err"
  contains "$T/err" "imshard: predict: the address-space (ulimit -v) limit of 586 MiB is too small"
  under_limits "350000 400000 450000 500000 550000 600000 700000" "1 2 4" \
    "$IMSHARD" predict "$ck" $three -q
  # --batch-size is a most: one image takes one image's memory (before:
  # activations for 4096 images, 625 MiB, were allocated for one and
  # refused under this limit)
  run bash -c 'ulimit -v 600000; exec timeout 60 "$@"' _ "$IMSHARD" predict "$ck" "$fx/rgb.jpg" \
    -q --threads 1 --batch-size 4096
  same "$rc" 0 "(one image, --batch-size 4096 under ulimit -v 600000: exit)"
  same "$(wc -l <"$T/out")" 1 "(one line for one image)"
fi

# the same bits for the same --batch-size and --threads (as --help says)
for t in 1 2; do
  expect 0 "$IMSHARD" predict "$ck" "$fx/rgb.jpg" "$fx/rgb.png" "$fx"/exif_[1-3].jpg --json --logits --threads $t --batch-size 2 -q
  cp "$T/out" "$T/bits_a"
  expect 0 "$IMSHARD" predict "$ck" "$fx/rgb.jpg" "$fx/rgb.png" "$fx"/exif_[1-3].jpg --json --logits --threads $t --batch-size 2 -q
  same "$(cmp "$T/bits_a" "$T/out" && echo same)" same "(logits of a second run, $t threads)"
done

# --- under mpirun: refused once, by rank 0 ------------------------------------
# predict is one process; as N ranks each predicted every image and
# printed its line again (N copies of the output, exit 0)
if have_mpi; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  expect 2 env ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" mpirun -np 2 "$IMSHARD" predict "$ck" "$fx/rgb.jpg" --threads 1
  same "$(grep -c '^imshard: ' "$T/err")" 1 "(one line for two ranks)"
  contains "$T/err" "imshard: predict: started as 2 ranks (mpirun): predict runs as one process"
  same "$(wc -c <"$T/out")" 0 "(nothing predicted)"
fi

finish
