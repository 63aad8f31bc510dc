#!/usr/bin/env bash
# imshard convert cifar10: the binary batches of
# tests/fixtures/make_cifar10.py packed as raw 32x32x3 records whose
# payload is the generator's pixels interleaved, byte for byte; FILE#RECORD
# lists; ROOT as the batches folder itself; balanced subsets; PNG encoding;
# faulty batches named in one line with exit 1.
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1

GEN="$IMS_SRC/tests/fixtures/make_cifar10.py"
gen() { /usr/bin/python3 "$GEN" "$@" || fail "generator failed: $*"; }

# Reads one split's records: prints sorted(set(EXPR)) over every record,
# with enc, fl, ch, lab, w, h, the payload p and its key index i.
# expected(g) gives the generator's interleaved bytes for global record g.
rec='import lmdb,struct,sys,json,os
sys.path.insert(0, os.path.join(os.environ["IMS_SRC"], "tests/fixtures"))
import make_cifar10 as m
def expected(g):
  pl = m.planes(g)
  return bytes(pl[c * 1024 + k] for k in range(1024) for c in range(3))
j=json.load(open(sys.argv[1])); d=os.path.dirname(sys.argv[1]); out=set()
for s in j["shards"]:
  e=lmdb.open(os.path.join(d,s["path"]),subdir=False,readonly=True,lock=False)
  for k,v in e.begin().cursor():
    i=struct.unpack(">Q",k)[0]
    enc,fl,ch,ori,lab,nx=struct.unpack_from("<BBBBiH",v,8); w,h=struct.unpack_from("<II",v,20)
    hs=struct.unpack_from("<H",v,6)[0]; p=bytes(v[hs:])
    out.add(eval(sys.argv[2]))
print(sorted(out))'
records() { /usr/bin/python3 -c "$rec" "$@"; }

gen "$T/c"
N=20 # records per batch

# Default: keep, i.e. raw pixels as they are (--no-shuffle: records in
# the batches' order, so record i is row i of the batches).
expect 0 "$IMSHARD" convert cifar10 "$T/c" -o "$T/o" --no-shuffle
contains "$T/err" "convert: train: 100 records, 10 classes, 10 to 10 per class, 0 skipped"
contains "$T/err" "convert: test: 20 records, 10 classes, 2 to 2 per class, 0 skipped"
same "$(json "$T/o/train.json" 'j["records"]')" 100
same "$(json "$T/o/test.json" 'j["records"]')" 20
same "$(json "$T/o/train.json" 'j["encoding"]')" keep
same "$(json "$T/o/train.json" 'j["class_counts"]')" "[10, 10, 10, 10, 10, 10, 10, 10, 10, 10]"
same "$(json "$T/o/test.json" 'j["skipped"]')" 0
same "$(paste -sd, "$T/o/classes.txt")" "airplane,automobile,bird,cat,deer,dog,frog,horse,ship,truck"
same "$(json "$T/o/train.json" '",".join(j["classes"])')" "$(paste -sd, "$T/o/classes.txt")"
# Lists: FILE#RECORD paths, index = position in the split, label byte.
same "$(wc -l <"$T/o/train.lst")" 100
same "$(sed -n 1p "$T/o/train.lst")" "$(printf '0\t1\tcifar-10-batches-bin/data_batch_1.bin#0')"
same "$(sed -n 22p "$T/o/train.lst")" "$(printf '21\t4\tcifar-10-batches-bin/data_batch_2.bin#1')"
same "$(sed -n 100p "$T/o/train.lst")" "$(printf '99\t8\tcifar-10-batches-bin/data_batch_5.bin#19')"
same "$(sed -n 20p "$T/o/test.lst")" "$(printf '19\t8\tcifar-10-batches-bin/test_batch.bin#19')"
# Headers: raw (3), marked original (flag 1), 32x32x3, labels from the records.
same "$(records "$T/o/train.json" '(enc, fl & 1, ch, w, h, len(p))')" "[(3, 1, 3, 32, 32, 3072)]"
same "$(records "$T/o/train.json" 'lab == m.label(i)')" "[True]"
same "$(records "$T/o/test.json" 'lab == m.label(5 * 20 + i)')" "[True]"
# Payloads: exactly the generator's pixels, planar R,G,B made interleaved.
same "$(records "$T/o/train.json" 'p == expected(i)')" "[True]"
same "$(records "$T/o/test.json" 'p == expected(5 * 20 + i)')" "[True]"
expect 0 "$IMSHARD" verify "$T/o/train.json"
expect 0 "$IMSHARD" verify "$T/o/test.json" --decode

# ROOT may be the batches folder itself; --encoding raw stores the same.
expect 0 "$IMSHARD" convert cifar10 "$T/c/cifar-10-batches-bin" -o "$T/flat" --encoding raw --no-shuffle --quiet
same "$(sed -n 1p "$T/flat/train.lst")" "$(printf '0\t1\tdata_batch_1.bin#0')"
same "$(records "$T/flat/train.json" 'p == expected(i) and enc == 3')" "[True]"

# Balanced subsets from train; test whole.
expect 0 "$IMSHARD" convert cifar10 "$T/c" -o "$T/sub" --per-class-train 2 --seed 4 --quiet
same "$(json "$T/sub/train.json" 'j["records"]')" 20
same "$(json "$T/sub/train.json" 'j["class_counts"]')" "[2, 2, 2, 2, 2, 2, 2, 2, 2, 2]"
same "$(json "$T/sub/test.json" 'j["records"]')" 20
same "$(wc -l <"$T/sub/train.lst")" 20
# A subset's rows keep their label byte and global record number.
same "$(awk -F'\t' '{split($3, a, "#"); b = substr(a[1], length(a[1]) - 4, 1); g = (b - 1) * 20 + a[2]; if ((3 * g + 1) % 10 != $2) print "bad " $0}' "$T/sub/train.lst")" ""
expect 1 "$IMSHARD" convert cifar10 "$T/c" -o "$T/short" --per-class-test 3 --quiet
contains "$T/err" "fewer"
absent "$T/short/test.json"

# Re-encoding: PNG (lossless, so decoding gives the same pixels) and JPEG.
expect 0 "$IMSHARD" convert cifar10 "$T/c" -o "$T/png" --encoding png --quiet
same "$(json "$T/png/train.json" 'j["encoding"]')" png
same "$(records "$T/png/train.json" '(enc, fl & 1, ch, w, h)')" "[(2, 0, 3, 32, 32)]"
expect 0 "$IMSHARD" verify "$T/png/train.json" --decode
expect 0 "$IMSHARD" verify "$T/png/test.json" --decode
expect 0 "$IMSHARD" convert cifar10 "$T/c" -o "$T/jpg" --encoding jpeg --resize 64 --quiet
same "$(records "$T/jpg/test.json" '(enc, w, h)')" "[(1, 64, 64)]"
expect 0 "$IMSHARD" verify "$T/jpg/test.json" --decode

# Options that do not apply to cifar10 are usage errors.
expect 2 "$IMSHARD" convert cifar10 "$T/c" -o "$T/u" --val-ratio 0.1
one_line "$T/err"
# So is a JPEG quality without JPEG: the default stores raw pixels, and
# --quality was silently ignored.
for enc in "" "--encoding raw" "--encoding png"; do
  expect 2 "$IMSHARD" convert cifar10 "$T/c" -o "$T/u" --quality 50 $enc
  one_line "$T/err"
  contains "$T/err" "--quality applies to --encoding jpeg only"
done
absent "$T/u"

# Faults: exit 1, one line naming the file, nothing published.
gen "$T/trunc" --broken truncated
expect 1 "$IMSHARD" convert cifar10 "$T/trunc" -o "$T/ot" --quiet
one_line "$T/err"
contains "$T/err" "data_batch_3.bin' is 61459 bytes, not a multiple of 3073"
absent "$T/ot/train.json"
gen "$T/label" --broken badlabel
expect 1 "$IMSHARD" convert cifar10 "$T/label" -o "$T/ol" --quiet
one_line "$T/err"
contains "$T/err" "data_batch_2.bin' record 5 (byte offset 15365) has label 10"
absent "$T/ol/train.json"
gen "$T/miss" --broken missing-batch
expect 1 "$IMSHARD" convert cifar10 "$T/miss" -o "$T/om" --quiet
one_line "$T/err"
contains "$T/err" "data_batch_4.bin"
gen "$T/meta" --broken meta
expect 1 "$IMSHARD" convert cifar10 "$T/meta" -o "$T/ox" --quiet
one_line "$T/err"
contains "$T/err" "batches.meta.txt' holds 9 class names, expected 10"
mkdir -p "$T/py/cifar-10-batches-py"
expect 1 "$IMSHARD" convert cifar10 "$T/py" -o "$T/op" --quiet
one_line "$T/err"
contains "$T/err" "binary version"

finish
