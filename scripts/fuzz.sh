#!/usr/bin/env bash
# Builds the libFuzzer harnesses (tests/fuzz, clang with ASan + UBSan into
# build-fuzz), makes their seed corpora from the project's own outputs and
# runs each for SECONDS (default 10). Exits non-zero when a harness finds a
# crash, a leak or undefined behaviour; the input is left in
# build-fuzz/findings/ (turn it into a regression test).
#   scripts/fuzz.sh [SECONDS [HARNESS...]]   (HARNESS: shard for fuzz_shard, ...)
# FUZZ_SEED=N fixes libFuzzer's random seed (CI: the same inputs every run,
# so a run fails only on a change; unset: a new seed each run).
# TMPDIR, when set, holds the scratch files too (unset: /dev/shm, in RAM).
set -euo pipefail
case "${1:-}" in -h | --help)
  # the comment above, as the other scripts' --help
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
  exit 0 ;;
esac
cd "$(dirname "$0")/.."
secs=${1:-10}
case "$secs" in '' | *[!0-9]*) echo "fuzz.sh: SECONDS must be a whole number, got '$secs'" >&2; exit 2 ;; esac
all="record manifest shard lst decode augment inat cifar imagenet imagenet_devkit safetensors checkpoint report"
harnesses=${*:2}
for h in $harnesses; do
  case " $all " in *" $h "*) ;; *) echo "fuzz.sh: no harness '$h' (one of: $all)" >&2; exit 2 ;; esac
done
bash scripts/setup.sh
command -v clang >/dev/null || { echo "fuzz.sh: clang is missing (scripts/setup.sh installs it)" >&2; exit 1; }

dir=build-fuzz
# without CUDA: the harnesses read files on the host, and a trainer
# library with CUDA sources makes CMake link them through the CUDA host
# linker (g++), which knows no -fsanitize=fuzzer
CC=clang bash scripts/build.sh "$dir" -DIMSHARD_FUZZ=ON -DIMSHARD_BUILD_TESTS=OFF \
  -DIMSHARD_SANITIZE=address,undefined -DIMSHARD_WERROR=OFF -DIMSHARD_WITH_CUDA=OFF

# --- seed corpora -----------------------------------------------------------
seeds="$dir/seeds"
rm -rf "$seeds" && for h in $all; do mkdir -p "$seeds/$h"; done
work=$(mktemp -d)
# The harnesses write each input to a file (fuzz_util.h): give them a
# folder in RAM when there is one and TMPDIR does not say where, removed
# with the rest at exit.
shm=/dev/shm
[ -z "${TMPDIR:-}" ] && [ -d "$shm" ] && [ -w "$shm" ] || shm=$work
scratch=$(mktemp -d "$shm/imshard-fuzz.XXXXXX")
trap 'rm -rf "$work" "$scratch"' EXIT
im=build/tools/imshard
[ -x "$im" ] || im="$dir/tools/imshard"
[ -x "$im" ] || cmake --build "$dir" --target imshard -j"$(nproc)" >/dev/null
"$im" sample "$work/s" --classes 3 --per-class 4 --quiet
"$im" list "$work/s" -o "$work/s" --quiet
"$im" pack "$work/s_train.lst" "$work/s" -o "$work/p/train" --quiet
cp "$work/p/train.json" "$seeds/manifest/"
# and the same manifest as format 1 wrote it (32-bit digests as numbers)
/usr/bin/python3 -c '
import json, sys
j = json.load(open(sys.argv[1])); j["format_version"] = 1
for s in j["shards"]: s["digest"] = int(s["digest"], 16) & 0xFFFFFFFF
json.dump(j, open(sys.argv[2], "w"), indent=1)' "$work/p/train.json" "$seeds/manifest/format1.json"
# Shards: the pack above (one leaf page, every image on overflow pages) and
# 120 raw 4x4 images (values inside the leaves, four leaves under a branch).
"$im" sample "$work/t" --classes 3 --per-class 40 --quiet
"$im" list "$work/t" -o "$work/t" --quiet
"$im" pack "$work/t_train.lst" "$work/t" -o "$work/q/train" --encoding raw --resize 4 --quiet
cp "$work"/p/train-00000-of-00001.mdb "$seeds/shard/keep.mdb"
cp "$work"/q/train-00000-of-00001.mdb "$seeds/shard/raw.mdb"
cp "$work/s_train.lst" "$seeds/lst/"
cp "$work/s.classes" "$seeds/lst/"
find "$work/s" -type f \( -name '*.jpg' -o -name '*.png' \) | head -6 | while read -r f; do
  cp "$f" "$seeds/decode/"
  cp "$f" "$seeds/augment/"
done
# A checkpoint and a run folder: two steps of convnet7 at 16 x 16 on 3
# classes (SGD, and AdamW for the optimiser state of the other kind).
tr=build/tools/imshard-train
[ -x "$tr" ] || tr="$dir/tools/imshard-train"
[ -x "$tr" ] || cmake --build "$dir" --target imshard-train -j"$(nproc)" >/dev/null
"$im" convert folder "$work/s" -o "$work/c" --val-ratio 0.25 --seed 3 --quiet
for o in sgd adamw; do
  ASAN_OPTIONS=detect_leaks=0 "$tr" --train "$work/c/train.json" --val "$work/c/val.json" \
    --model convnet7 --size 16 --threads 1 --batch-size 4 --max-steps 2 --optimizer $o \
    --log-dir "$work/run-$o" --checkpoint-dir "$work/run-$o" --quiet
  cp "$work/run-$o/checkpoint.safetensors" "$seeds/checkpoint/$o.safetensors"
done
cp "$work/run-sgd/checkpoint.safetensors" "$seeds/safetensors/checkpoint.safetensors"
/usr/bin/python3 - "$work/p" "$seeds" <<'PY'
import glob, json, os, struct, sys
import lmdb
p, seeds = sys.argv[1], sys.argv[2]
for shard in sorted(glob.glob(os.path.join(p, "*.mdb"))):
    env = lmdb.open(shard, subdir=False, readonly=True, lock=False)
    with env.begin() as t:
        for i, (k, v) in enumerate(t.cursor()):
            if i >= 4:
                break
            open(os.path.join(seeds, "record", "r%d" % i), "wb").write(bytes(v))
# iNat 2017: two images, two categories
coco = {"images": [{"id": 1, "file_name": "train_val_images/A/a/1.jpg", "width": 8, "height": 8},
                   {"id": 2, "file_name": "train_val_images/B/b/2.jpg", "width": 8, "height": 8}],
        "annotations": [{"id": 1, "image_id": 1, "category_id": 0}, {"id": 2, "image_id": 2, "category_id": 1}],
        "categories": [{"id": 0, "name": "a", "supercategory": "A"}, {"id": 1, "name": "b", "supercategory": "B"}]}
open(os.path.join(seeds, "inat", "coco.json"), "w").write(json.dumps(coco))
# CIFAR-10: two records of a batch; and the class names
rec = lambda label: bytes([label]) + bytes(range(256)) * 12
open(os.path.join(seeds, "cifar", "batch"), "wb").write(rec(3) + rec(7))
open(os.path.join(seeds, "cifar", "meta"), "w").write("\n".join("c%d" % i for i in range(10)) + "\n")
# ImageNet (Kaggle): the first byte picks the file the rest becomes
open(os.path.join(seeds, "imagenet", "mapping"), "wb").write(b"\x00n01440764 tench, Tinca tinca\nn01443537 goldfish\n")
open(os.path.join(seeds, "imagenet", "solution"), "wb").write(
    b"\x01ImageId,PredictionString\nILSVRC2012_val_00000001,n01440764 1 2 3 4\n"
    b"ILSVRC2012_val_00000002,n01443537 5 6 7 8\n")
# ImageNet (devkit): map_clsloc.txt or the validation ground truth
open(os.path.join(seeds, "imagenet_devkit", "mapping"), "wb").write(b"\x00n01440764 1 tench\nn01443537 2 goldfish\n")
open(os.path.join(seeds, "imagenet_devkit", "truth"), "wb").write(b"\x011\n2\n")
# safetensors: a small file of every dtype, empty and scalar tensors
def st(tensors, meta):
    hdr, data = {}, b""
    if meta:
        hdr["__metadata__"] = meta
    for name, dtype, shape, raw in tensors:
        hdr[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data
sizes = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2, "F16": 2,
         "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "F64": 8, "I64": 8, "U64": 8}
ts = [(d.lower(), d, [2], bytes(range(1, 1 + 2 * s))) for d, s in sizes.items()]
ts += [("empty", "F32", [0, 3], b""), ("scalar", "I64", [], struct.pack("<q", 7))]
open(os.path.join(seeds, "safetensors", "dtypes.safetensors"), "wb").write(
    st(ts, {"format": "imshard-checkpoint-1", "note": "x"}))
# checkpoint: the real files, and their headers without data (the harness
# fills it with zeros): with the checksum, which then fails, and without
for o in ("sgd", "adamw"):
    raw = open(os.path.join(seeds, "checkpoint", o + ".safetensors"), "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    hdr = json.loads(raw[8:8 + n])
    for tag in ("sum", "nosum"):
        if tag == "nosum":
            del hdr["__metadata__"]["checksum"]
        h = json.dumps(hdr).encode()
        h += b" " * (-len(h) % 8)
        open(os.path.join(seeds, "checkpoint", "%s-%s" % (o, tag)), "wb").write(struct.pack("<Q", len(h)) + h)
# report: a run folder's files joined by 0x1e (fuzz_report.c): the SGD
# run alone, and with the AdamW run as a second folder
run = os.path.join(os.path.dirname(p), "run-sgd")
other = os.path.join(os.path.dirname(p), "run-adamw")
def read(d, name):
    path = os.path.join(d, name)
    return open(path, "rb").read() if os.path.exists(path) else b""
lock = read(run, "imshard-train.lock")
one = [read(run, n) for n in ("metrics.jsonl", "summary.json", "eval.json", "confusion.csv")] + [lock]
open(os.path.join(seeds, "report", "run"), "wb").write(b"\x1e".join(one))
open(os.path.join(seeds, "report", "two"), "wb").write(
    b"\x1e".join(one + [read(other, "metrics.jsonl"), read(other, "summary.json")]))
open(os.path.join(seeds, "report", "metrics"), "wb").write(read(run, "metrics.jsonl"))
# confusion.csv alone, eval.json made from it by the harness (an empty
# eval.json part): 45 classes (past the 40 drawn as a matrix) whose names
# need quoting (a comma, a quote, a line break, a formula's guard), with
# CRLF line ends; and 160 classes of larger counts, past a 64 KiB read
def csv_name(s):
    if s[:1] in ("=", "+", "-", "@"):
        s = "'" + s
    return '"' + s.replace('"', '""') + '"' if any(c in s for c in ',"\r\n\'') else s
def confusion(names, cell, eol):
    rows = [",".join(["true/predicted"] + [csv_name(x) for x in names])]
    for i, x in enumerate(names):
        rows.append(",".join([csv_name(x)] + [str(cell(i, j)) for j in range(len(names))]))
    return (eol.join(rows) + eol).encode()
odd = ["c%d" % i for i in range(40)] + ["a,b", 'say "x"', "two\nlines", "=1+1", "-x"]
for tag, text in (("classes45", confusion(odd, lambda i, j: (i * 7 + j * 3) % 5, "\r\n")),
                  ("classes160", confusion(["n%03d" % i for i in range(160)],
                                           lambda i, j: 900 + i + j if i == j else (i * j) % 97, "\n"))):
    open(os.path.join(seeds, "report", tag), "wb").write(b"\x1e".join(one[:2] + [b"", text]))
PY

# --- runs ------------------------------------------------------------------
find_dir="$dir/findings"
mkdir -p "$find_dir"
status=0
for h in ${harnesses:-$all}; do
  corpus="$dir/corpus/$h"
  mkdir -p "$corpus"
  echo "== fuzz_$h for ${secs} s"
  if ! TMPDIR=$scratch ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$dir/tests/fuzz/fuzz_$h" "$corpus" "$seeds/$h" -max_total_time="$secs" -timeout=10 \
    -rss_limit_mb=2048 -artifact_prefix="$find_dir/$h-" -print_final_stats=1 \
    ${FUZZ_SEED:+-seed="$FUZZ_SEED"} \
    >"$dir/fuzz_$h.log" 2>&1; then
    echo "fuzz.sh: fuzz_$h found a problem (input in $find_dir, log in $dir/fuzz_$h.log):" >&2
    grep -E "ERROR|SUMMARY|runtime error" "$dir/fuzz_$h.log" | head -5 >&2
    status=1
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$dir/fuzz_$h.log" | sed 's/^/  /'
done
exit $status
