#!/usr/bin/env bash
# imshard bench-load: counts per epoch for train, validation and one rank of
# two; the JSON keys; --dump writes viewable PNGs whatever the layout and
# dtype; bad options exit 2 with one line, loader errors exit 1; Ctrl-C
# during a slow batch stops it at once.
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1

expect 0 "$IMSHARD" sample "$T/s" --classes 4 --per-class 12 --quiet
expect 0 "$IMSHARD" list "$T/s" -o "$T/s" --quiet
expect 0 "$IMSHARD" pack "$T/s_train.lst" "$T/s" -o "$T/p/train" --quiet
m="$T/p/train.json"
bl() { "$IMSHARD" bench-load "$m" --epochs 1 --batch 8 --size 64 --threads 2 "$@"; }

# Training, one rank: 48 records, batches of 8 divide evenly: 6 batches.
expect 0 bl --json --quiet
cp "$T/out" "$T/train.json"
same "$(json "$T/train.json" 'j["images"]')" 48 "images (train)"
same "$(json "$T/train.json" 'j["batches"]')" 6 "batches (train)"
same "$(json "$T/train.json" 'sorted(k for k in "images seconds images_per_s batches wait_seconds read_seconds decode_seconds augment_seconds bad_records pinned threads batch size".split() if k not in j)')" "[]" "missing keys"
same "$(json "$T/train.json" 'j["images_per_s"] > 0 and j["seconds"] > 0')" True "images_per_s"
same "$(json "$T/train.json" '(j["batch"], j["size"], j["threads"], j["bad_records"], j["pinned"])')" "(8, 64, 2, 0, False)" "echoed options"
same "$(json "$T/train.json" 'j["decode_seconds"] > 0')" True "decode time"
same "$(wc -l <"$T/out")" 1 "--json prints one line"
# --help lists every key --json prints, in its list of them (before:
# batches_per_epoch was printed, not listed)
"$IMSHARD" bench-load --help >"$T/help.txt"
same "$(json "$T/train.json" 'sorted(set(j) - set(__import__("re").split(r"[ ,()]+", __import__("re").search(r"with the keys ([^.]*)", " ".join(open("'"$T/help.txt"'").read().split())).group(1))))')" "[]" "keys --help does not list"

# --prefetch K: the loader's ring holds K batches, as it reports them
# (before: the JSON did not say, and the text echoed the flag, not the
# loader's depth)
same "$(json "$T/train.json" 'j["prefetch"]')" 3 "(the default prefetch)"
expect 0 bl --json --quiet --prefetch 5
same "$(json "$T/out" '(j["prefetch"], j["images"], j["batches"])')" "(5, 48, 6)" "(--prefetch 5)"
expect 0 bl --quiet --prefetch 1
contains "$T/out" ", prefetch 1"

# The human report names every figure.
expect 0 bl --quiet --no-pinned
contains "$T/out" "loaded 48 images in 6 batches"
contains "$T/out" "images/s"
contains "$T/out" "read "
contains "$T/out" "decode "
contains "$T/out" "augment "
contains "$T/out" "stall fraction"
contains "$T/out" "bad records replaced: 0"
contains "$T/out" "not pinned"
contains "$T/out" "records per rank per epoch: 48 (0 padded, 0 dropped across ranks, 0 dropped in a short last batch"
# 48 records in batches of 10: 4 whole batches, 8 records unused
expect 0 "$IMSHARD" bench-load "$m" --epochs 1 --batch 10 --size 64 --quiet --no-pinned
contains "$T/out" "records per rank per epoch: 48 (0 padded, 0 dropped across ranks, 8 dropped in a short last batch; 4 batches per epoch)"

# Validation: file order, the last partial batch kept: 48 in 6 batches
# of 8; with batch 10, 5 batches (10,10,10,10,8) still 48 images.
expect 0 bl --val --json --quiet
same "$(json "$T/out" '(j["images"], j["batches"])')" "(48, 6)" "val"
expect 0 "$IMSHARD" bench-load "$m" --val --epochs 1 --batch 10 --size 64 --json --quiet
same "$(json "$T/out" '(j["images"], j["batches"])')" "(48, 5)" "val, batch 10"
# Training drops the final partial batch: 48 // 10 = 4 batches of 10.
expect 0 "$IMSHARD" bench-load "$m" --epochs 1 --batch 10 --size 64 --json --quiet
same "$(json "$T/out" '(j["images"], j["batches"])')" "(40, 4)" "train, batch 10"

# Rank 1 of 2: 24 records each, 3 batches of 8.
expect 0 bl --rank 1 --world 2 --json --quiet
same "$(json "$T/out" '(j["images"], j["batches"], j["records_per_rank"])')" "(24, 3, 24)" "rank 1 of 2"
# Rank 1 of 5 (training drops the remainder): 48 // 5 = 9 per rank, 3
# dropped, one batch of 5 (the partial one dropped).
expect 0 "$IMSHARD" bench-load "$m" --epochs 1 --batch 5 --size 64 --rank 1 --world 5 --json --quiet
same "$(json "$T/out" '(j["images"], j["records_per_rank"], j["dropped"])')" "(5, 9, 3)" "rank 1 of 5"
# Validation pads instead: 10 per rank, 2 padded, two batches of 5.
expect 0 "$IMSHARD" bench-load "$m" --val --epochs 1 --batch 5 --size 64 --rank 1 --world 5 --json --quiet
same "$(json "$T/out" '(j["images"], j["records_per_rank"], j["padded"])')" "(10, 10, 2)" "val rank 1 of 5"

# --shard-owning reads whole shards per rank: on records packed in list
# order (perhaps sorted by class) the loader warns, once; not on shuffled
# ones, nor without --shard-owning.
expect 0 "$IMSHARD" pack "$T/s_train.lst" "$T/s" -o "$T/p/listed" --shards 4 --order list --quiet
expect 0 "$IMSHARD" pack "$T/s_train.lst" "$T/s" -o "$T/p/mixed" --shards 4 --shuffle --quiet
expect 0 "$IMSHARD" bench-load "$T/p/listed.json" --shard-owning --rank 1 --world 2 --epochs 1 --batch 4 --size 32 --json
contains "$T/err" "warning: bench-load: shard-owning mode on '$T/p/listed.json', whose records are not shuffled"
same "$(grep -c 'shard-owning mode' "$T/err")" 1 "(warned once)"
expect 0 "$IMSHARD" bench-load "$T/p/listed.json" --rank 1 --world 2 --epochs 1 --batch 4 --size 32 --json
lacks "$T/err" "shard-owning"
expect 0 "$IMSHARD" bench-load "$T/p/mixed.json" --shard-owning --rank 1 --world 2 --epochs 1 --batch 4 --size 32 --json
lacks "$T/err" "shard-owning"
expect 0 "$IMSHARD" bench-load "$T/p/listed.json" --shard-owning --rank 1 --world 2 --epochs 1 --batch 4 --size 32 --quiet
lacks "$T/err" "shard-owning"

# Two epochs: twice the images; a time limit ends a run without --epochs.
expect 0 bl --epochs 2 --json --quiet
same "$(json "$T/out" 'j["images"]')" 96 "two epochs"
expect 0 "$IMSHARD" bench-load "$m" --batch 8 --size 32 --seconds 0.3 --json --quiet
same "$(json "$T/out" 'j["images"] >= 8 and j["images"] % 8 == 0 and j["seconds"] < 5')" True "--seconds"

# --dump: PNGs of 64x64 RGB, named by sample and label.
expect 0 bl --dump 4 "$T/d1" --quiet
contains "$T/out" "wrote 4 samples"
same "$(ls "$T/d1" | wc -l)" 4 "dumped files"
same "$(ls "$T/d1" | grep -cE '^sample_[0-3]_label[0-3]\.png$')" 4 "dump names"
png_ok() {
  /usr/bin/python3 -c '
import sys
from PIL import Image
for p in sys.argv[1:]:
    im = Image.open(p); im.load()
    assert im.size == (64, 64) and im.mode == "RGB", (p, im.size, im.mode)
    lo, hi = min(min(e) for e in im.getextrema()), max(max(e) for e in im.getextrema())
    assert hi - lo > 10, (p, "flat image", lo, hi)
print("ok")' "$@"
}
same "$(png_ok "$T"/d1/*.png 2>&1)" ok "dumped PNGs"
# The same samples in f16 NHWC, bf16 NCHW and u8, normalised with
# ImageNet's mean/std, come back within one level of the f32 ones.
inet=(--mean 123.675,116.28,103.53 --std 58.395,57.12,57.375)
expect 0 bl --dump 4 "$T/d2" --dtype f16 --layout nhwc "${inet[@]}" --quiet
expect 0 bl --dump 4 "$T/d3" --dtype bf16 --layout nchw "${inet[@]}" --quiet
expect 0 bl --dump 4 "$T/d4" --dtype u8 --layout nhwc --quiet
same "$(png_ok "$T"/d2/*.png "$T"/d3/*.png "$T"/d4/*.png 2>&1)" ok "dumped PNGs (f16, bf16, u8)"
close_to() {
  /usr/bin/python3 -c '
import os, sys
from PIL import Image
a, b = sys.argv[1], sys.argv[2]
names = sorted(os.listdir(a)); assert names == sorted(os.listdir(b)), "names differ"
d = 0
for n in names:
    x, y = Image.open(os.path.join(a, n)), Image.open(os.path.join(b, n))
    d = max([d] + [abs(p - q) for u, v in zip(x.getdata(), y.getdata()) for p, q in zip(u, v)])
print(d <= 1 or d)' "$1" "$2"
}
same "$(close_to "$T/d1" "$T/d2" 2>&1)" True "f16 nhwc dump matches f32"
same "$(close_to "$T/d1" "$T/d3" 2>&1)" True "bf16 dump matches f32"
same "$(close_to "$T/d1" "$T/d4" 2>&1)" True "u8 dump matches f32"

# --dump-format raw: the loader's own bytes. u8 NHWC samples are exactly
# the pixels of the u8 PNG dump (u8 is never normalised); f32 NCHW samples
# are 64*64*3 floats whose rounded values are the f32 PNG dump's pixels.
expect 0 bl --dump 4 "$T/d5" --dtype u8 --layout nhwc --dump-format raw --quiet
same "$(ls "$T/d5" | grep -cE '^sample_[0-3]_label[0-3]\.bin$')" 4 "raw dump names"
expect 0 bl --dump 4 "$T/d6" --dump-format raw --quiet
raw_ok() {
  /usr/bin/python3 -c '
import os, struct, sys
from PIL import Image
png8, u8, png32, f32 = sys.argv[1:5]
pixels = lambda d, n: bytes(v for p in Image.open(os.path.join(d, n)).getdata() for v in p)
for n in sorted(os.listdir(png8)):
    b = n[:-4] + ".bin"
    assert open(os.path.join(u8, b), "rb").read() == pixels(png8, n), (n, "u8 raw differs from the png")
    f = struct.unpack("<%df" % (64 * 64 * 3), open(os.path.join(f32, b), "rb").read())
    hwc = bytes(min(255, max(0, round(f[c * 4096 + i]))) for i in range(4096) for c in range(3))
    assert hwc == pixels(png32, n), (n, "f32 raw differs from the png")
print("ok")' "$@"
}
same "$(raw_ok "$T/d4" "$T/d5" "$T/d1" "$T/d6" 2>&1)" ok "raw dumps equal the PNG dumps"

# --seed picks the order and the augmentation: the same seed gives the
# same samples, another seed other ones. --augment none changes what the
# same records become (same seed: the same records in the same places).
expect 0 bl --dump 4 "$T/e0" --dump-format raw --dtype u8 --quiet
expect 0 bl --dump 4 "$T/e0b" --dump-format raw --dtype u8 --seed 0 --quiet
expect 0 bl --dump 4 "$T/e1" --dump-format raw --dtype u8 --seed 1 --quiet
expect 0 bl --dump 4 "$T/en" --dump-format raw --dtype u8 --augment none --quiet
diff -r "$T/e0" "$T/e0b" >/dev/null || fail "--seed 0 twice: other samples"
diff -r "$T/e0" "$T/e1" >/dev/null && fail "--seed 1 gave the samples of --seed 0"
same "$(ls "$T/en")" "$(ls "$T/e0")" "--augment none: the same records"
diff -r "$T/e0" "$T/en" >/dev/null && fail "--augment none gave the default augmentation's samples"
# --mean/--std: f32 samples are (pixel - mean) / std, per channel.
expect 0 bl --dump 4 "$T/em" --dump-format raw --mean 10,20,30 --std 2,4,8 --quiet
norm_ok() {
  /usr/bin/python3 -c '
import os, struct, sys
plain, norm = sys.argv[1:3]
n = 64 * 64
for b in sorted(os.listdir(plain)):
    f = struct.unpack("<%df" % (3 * n), open(os.path.join(plain, b), "rb").read())
    g = struct.unpack("<%df" % (3 * n), open(os.path.join(norm, b), "rb").read())
    for c, (m, s) in enumerate(((10, 2), (20, 4), (30, 8))):
        for i in range(c * n, (c + 1) * n):
            assert abs((f[i] - m) / s - g[i]) < 1e-4, (b, c, f[i], g[i])
print("ok")' "$@"
}
same "$(norm_ok "$T/d6" "$T/em" 2>&1)" ok "--mean/--std normalise each channel"

# A --dump into an earlier run's folder leaves this run's samples alone
# there, never mixed with the earlier ones (before: --dump 2 into a folder
# of 4 kept sample_2 and sample_3; a raw dump kept the PNGs). Files that
# are not --dump samples stay.
cp -r "$T/d1" "$T/d7"
touch "$T/d7/notes.txt" "$T/d7/sample_a_label1.png" "$T/d7/sample_9_label1.png.txt"
expect 0 bl --dump 2 "$T/d7" --quiet
contains "$T/out" "wrote 2 samples"
contains "$T/out" "removed 2 files of an earlier --dump"
same "$(ls "$T/d7" | grep -cE '^sample_[0-9]+_label[0-9]+\.(png|bin)$')" 2 "samples after a smaller --dump"
for f in sample_0 sample_1; do
  cmp -s "$T/d1/$(cd "$T/d1" && ls $f\_label*)" "$T/d7/$(cd "$T/d7" && ls $f\_label*)" || fail "$f differs after a second --dump"
done
same "$(ls "$T/d7" | grep -c -e notes.txt -e sample_a_label1.png -e png.txt)" 3 "other files kept"
expect 0 bl --dump 2 "$T/d7" --dump-format raw --quiet
contains "$T/out" "removed 2 files of an earlier --dump"
same "$(ls "$T/d7" | grep -cE '^sample_[01]_label[0-9]+\.bin$')" 2 "raw samples"
same "$(ls "$T/d7" | grep -cE '^sample_[0-9]+_label[0-9]+\.png$')" 0 "PNGs of the earlier --dump"

# The sample side is the library's 1..4096, as imshard-train's --size and
# Python's size (before: 8..4096 here, so a loader of side 1..7 that those
# made could not be measured or dumped here).
for s in 1 7; do
  expect 0 bl --size "$s" --dump 2 "$T/ds$s" --dump-format raw --dtype u8 --quiet
  same "$(wc -c <"$T/ds$s/$(cd "$T/ds$s" && ls sample_0_label*)")" $((3 * s * s)) "a --size $s sample's bytes"
done

# Bad options: exit 2, one line.
for bad in "--batch 0" "--rank 2 --world 2" "--dtype f64" "--layout chw" \
	   "--mean 1,2" "--std 1,0,1" "--std 1e-45,1,1" "--size 0" "--size 5000" "--threads 0" \
	   "--threads 2000" "--augment bogus" "--dump 0 $T/d9" "--dump 2" \
	   "--seconds 0" "--mean 1,2,x" "--dump 2 --json" \
	   "--dump-format raw" "--dump 2 $T/d9 --dump-format jpeg"; do
  # shellcheck disable=SC2086
  expect 2 "$IMSHARD" bench-load "$m" $bad
  one_line "$T/err"
done
expect 2 "$IMSHARD" bench-load
one_line "$T/err"
absent "$T/d9"
# a whole-number option's range is said in whole numbers (before: "1 and
# 1.04858e+06", which is not even the bound)
expect 2 "$IMSHARD" bench-load "$m" --world 0
contains "$T/err" "--world must be between 1 and 1048576, got 0"
expect 2 "$IMSHARD" bench-load "$m" --epochs 0
contains "$T/err" "--epochs must be between 1 and 1000000, got 0"
# u8 samples are the pixels: a normalisation with them is refused, not
# dropped (before: --mean/--std were ignored without a word)
expect 2 "$IMSHARD" bench-load "$m" --dtype u8 --mean 1,2,3 --quiet
one_line "$T/err"
contains "$T/err" "--mean and --std need --dtype f32, f16 or bf16"
expect 2 "$IMSHARD" bench-load "$m" --dtype u8 --std 2,2,2 --quiet
one_line "$T/err"
expect 0 "$IMSHARD" bench-load "$m" --dtype u8 --mean 0,0,0 --std 1,1,1 --epochs 1 --seconds 0 --size 16 --quiet

# Loader errors: exit 1, one line.
expect 1 "$IMSHARD" bench-load "$T/none.json" --quiet
one_line "$T/err"
contains "$T/err" "bench-load"
# A batch larger than the rank's share cannot make one batch.
expect 1 "$IMSHARD" bench-load "$m" --batch 64 --size 64 --quiet
one_line "$T/err"
# --dump's folder: made (nested too) only for a run that gets to write
# in it; a file there is refused before the loader runs (before: an
# empty folder was left by a failed run, a nested one was not made, and
# a file was found after the measurement, naming a temporary).
expect 1 "$IMSHARD" bench-load "$T/none.json" --dump 2 "$T/dd/x" --quiet
one_line "$T/err"
absent "$T/dd"
expect 1 "$IMSHARD" bench-load "$m" --batch 64 --size 64 --dump 2 "$T/dd" --quiet
absent "$T/dd"
mkdir "$T/dkeep"
expect 1 "$IMSHARD" bench-load "$T/none.json" --dump 2 "$T/dkeep" --quiet
exists "$T/dkeep"
: >"$T/dfile"
expect 2 "$IMSHARD" bench-load "$m" --dump 2 "$T/dfile" --epochs 1 --size 16 --batch 4
one_line "$T/err"
contains "$T/err" "is not a folder"
expect 0 "$IMSHARD" bench-load "$m" --dump 2 "$T/dd/x/y" --epochs 1 --size 16 --batch 4 --quiet
same "$(ls "$T/dd/x/y" | grep -c '^sample_[01]_label[0-9]*\.png$')" 2

# Ctrl-C while the first batch is made (the records as 1536-pixel PNGs,
# which decode whole: seconds for a batch of them all on one thread): the
# run stops within a second with exit 1 and says so (before: only once the
# batch was made, the wait for it looking at nothing else)
expect 0 "$IMSHARD" pack "$T/s_train.lst" "$T/s" -o "$T/slow/train" --resize 1536 \
  --encoding png --quiet
"${heed_int[@]}" "$IMSHARD" bench-load "$T/slow/train.json" --epochs 1 --batch 48 --size 64 \
  --threads 1 --quiet >/dev/null 2>"$T/int.err" &
pid=$!
sleep 0.5 # open, at its first batch
t0=$(date +%s%N)
kill -INT $pid
wait $pid
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
same "$rc" 1 "(exit status after SIGINT)"
contains "$T/int.err" "bench-load: interrupted after 0 batches"
same "$((ms < 1000))" 1 "(Ctrl-C within a second: took $ms ms)"

# --help documents every option.
expect 0 "$IMSHARD" bench-load --help
for o in batch size augment val threads rank world seed epochs seconds layout \
	 dtype mean std prefetch shard-owning no-pinned dump dump-format json quiet help; do
  contains "$T/out" "--$o"
done
contains "$T/out" "usage: imshard bench-load MANIFEST.json"
finish
