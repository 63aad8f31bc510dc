#!/usr/bin/env bash
# imshard pack: every encoding, thread-count independence, odd-but-valid
# and bad files, --max-errors, refusal to overwrite, and bad usage.
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1
source "$(dirname "$0")/fixtures.sh"

expect 0 "$IMSHARD" sample "$T/s" --classes 4 --per-class 12 --seed 3 --quiet
expect 0 "$IMSHARD" list "$T/s" -o "$T/s" --no-shuffle --quiet
exists "$T/s_train.lst"

# --help documents every option.
expect 0 "$IMSHARD" pack --help
for o in --output --shards --shard-size --encoding --resize --max-size --center-crop \
  --quality --threads --max-errors --classes --max-label --shuffle --seed --order \
  --check-decode --force --quiet; do
  contains "$T/out" "$o"
done

# Same records whatever the thread count: shards are byte-identical.
expect 0 "$IMSHARD" pack "$T/s_train.lst" "$T/s" -o "$T/k1/train" --threads 1 --shards 3 --quiet
expect 0 "$IMSHARD" pack "$T/s_train.lst" "$T/s" -o "$T/k2/train" --threads 2 --shards 3
contains "$T/err" "packed 48 of 48 images into 3 shards"
contains "$T/err" "wrote '$T/k2/train.json'"
for i in 0 1 2; do
  f=train-0000$i-of-00003.mdb
  checks=$((checks + 1))
  cmp -s "$T/k1/$f" "$T/k2/$f" || fail "$f differs between 1 and 2 threads"
done
lacks "$T/err" "shards asked for"
absent "$T/k1/train.errors.tsv"
absent "$T/k1/train.lock"
same "$(json "$T/k1/train.json" 'j["records"]')" 48
same "$(json "$T/k1/train.json" 'j["encoding"]')" keep
same "$(json "$T/k1/train.json" '",".join(j["classes"])')" "$(ls "$T/s" | paste -sd,)"
same "$(json "$T/k1/train.json" 'j["class_counts"]')" "[12, 12, 12, 12]"
same "$(json "$T/k1/train.json" '[s["records"] for s in j["shards"]]')" "[16, 16, 16]"

# --shard-size: a record that would take its shard past the size starts
# the next one (each record is its file's bytes, kept, after a 48-byte
# header: docs/FORMAT.md); without it one shard of at most 1 GiB
expect 0 "$IMSHARD" pack "$T/s_train.lst" "$T/s" -o "$T/ss/train" --shard-size 16K --threads 2 --quiet
want=$(/usr/bin/python3 - "$T/s_train.lst" "$T/s" <<'PY'
import os, sys
counts, size = [], 0
for line in open(sys.argv[1]):
    n = 48 + os.path.getsize(os.path.join(sys.argv[2], line.rstrip("\n").split("\t")[2]))
    if counts and size + n > 16384:
        counts.append(0)
        size = 0
    if not counts:
        counts.append(0)
    counts[-1] += 1
    size += n
print(counts)
PY
)
same "$(json "$T/ss/train.json" '[s["records"] for s in j["shards"]]')" "$want" "(--shard-size 16K)"
same "$(json "$T/ss/train.json" 'len(j["shards"]) > 2')" True "(16K makes several shards)"
same "$(json "$T/ss/train.json" 'j["options"]["shard_size"]')" 16384 "(the size recorded)"
expect 0 "$IMSHARD" pack "$T/s_train.lst" "$T/s" -o "$T/j/train" --resize 32 --quality 80 --quiet
same "$(json "$T/j/train.json" 'j["encoding"]')" jpeg
expect 0 "$IMSHARD" verify "$T/j/train.json" --decode
expect 0 "$IMSHARD" pack "$T/s_train.lst" "$T/s" -o "$T/p/train" --encoding png --resize 24 --center-crop --quiet
expect 0 "$IMSHARD" verify "$T/p/train.json" --decode
expect 0 "$IMSHARD" pack "$T/s_train.lst" "$T/s" -o "$T/r/train" --encoding raw --resize 16 --max-size 20 --quiet
expect 0 "$IMSHARD" verify "$T/r/train.json"
# Record headers hold the sizes asked for.
hdr='import lmdb,struct,sys,json,os
m=json.load(open(sys.argv[1])); d=os.path.dirname(sys.argv[1]); out=set()
for s in m["shards"]:
  e=lmdb.open(os.path.join(d,s["path"]),subdir=False,readonly=True,lock=False)
  for k,v in e.begin().cursor():
    enc,fl,ch,ori,lab,nx=struct.unpack_from("<BBBBiH",v,8); w,h=struct.unpack_from("<II",v,20)
    out.add(eval(sys.argv[2]))
print(sorted(out))'
same "$(/usr/bin/python3 -c "$hdr" "$T/j/train.json" 'min(w,h)')" "[32]"
same "$(/usr/bin/python3 -c "$hdr" "$T/p/train.json" '(w,h,enc)')" "[(24, 24, 2)]"
same "$(/usr/bin/python3 -c "$hdr" "$T/r/train.json" '(min(w,h)<=16 and max(w,h)<=20, enc, ch)')" "[(True, 3, 1), (True, 3, 3), (True, 3, 4)]"

# --quality is the JPEG quality: 80 makes smaller records than the
# default 95, 30 smaller still.
expect 0 "$IMSHARD" pack "$T/s_train.lst" "$T/s" -o "$T/j95/train" --resize 32 --quiet
expect 0 "$IMSHARD" pack "$T/s_train.lst" "$T/s" -o "$T/j30/train" --resize 32 --quality 30 --quiet
rec_bytes='import lmdb,sys,json,os
m=json.load(open(sys.argv[1])); d=os.path.dirname(sys.argv[1]); n=0
for s in m["shards"]:
  e=lmdb.open(os.path.join(d,s["path"]),subdir=False,readonly=True,lock=False)
  n+=sum(len(v) for k,v in e.begin().cursor())
print(n)'
b95=$(/usr/bin/python3 -c "$rec_bytes" "$T/j95/train.json")
b80=$(/usr/bin/python3 -c "$rec_bytes" "$T/j/train.json")
b30=$(/usr/bin/python3 -c "$rec_bytes" "$T/j30/train.json")
checks=$((checks + 1))
[ "$b95" -gt "$b80" ] && [ "$b80" -gt "$b30" ] || fail "record bytes at quality 95, 80, 30: $b95 $b80 $b30"

# Odd-but-valid files all pack; every bad kind is skipped and named.
make_odd_tree "$T/odd"
expect 0 "$IMSHARD" list "$T/odd" -o "$T/odd/l" --no-shuffle --exts .jpg,.jpeg,.png --quiet
ngood=$(n_words $GOOD_FIXTURES)
nbad=$(n_words $BAD_FIXTURES)
for enc in keep jpeg; do
  expect 0 "$IMSHARD" pack "$T/odd/l_train.lst" "$T/odd" -o "$T/odd/$enc" --encoding $enc
  same "$(json "$T/odd/$enc.json" 'j["records"]')" "$ngood" "($enc records)"
  same "$(json "$T/odd/$enc.json" 'j["skipped"]')" "$nbad" "($enc skipped)"
  same "$(json "$T/odd/$enc.json" 'j["errors_file"]')" "$enc.errors.tsv"
  same "$(($(wc -l <"$T/odd/$enc.errors.tsv") - 1))" "$nbad" "($enc errors.tsv rows)"
  for f in $BAD_FIXTURES; do
    contains "$T/odd/$enc.errors.tsv" "bad/$f"
  done
  # stderr names the first 5 and counts the rest (all are in errors.tsv)
  same "$(grep -c "^imshard: skipped 'bad/" "$T/err")" 5 "($enc skipped files named)"
  contains "$T/err" "imshard: ... and $((nbad - 5)) more skipped files"
  contains "$T/err" "$nbad skipped, listed in"
  expect 0 "$IMSHARD" verify "$T/odd/$enc.json" --decode
done
# Reasons say what is wrong.
contains "$T/odd/keep.errors.tsv" "empty file"
grep -F "bad/huge.png" "$T/odd/keep.errors.tsv" | grep -qiE "large|limit|absurd|exceed" ||
  fail "huge.png reason does not mention the size"
grep -F "bad/text.jpg" "$T/odd/keep.errors.tsv" | grep -qi "not a JPEG or PNG" ||
  fail "text.jpg reason does not say it is not an image"
# Decided by content: the PNG named .JPEG is a PNG record.
same "$(/usr/bin/python3 -c "$hdr" "$T/odd/keep.json" 'enc')" "[1, 2]"

# EXIF orientation: keep records it with the stored size, re-encoding
# applies it; every exif_N.jpg shows the same 96x64 upright picture.
for n in 1 2 3 4 5 6 7 8; do printf '%d\t0\tgood/exif_%d.jpg\n' $n $n; done >"$T/odd/exif.lst"
expect 0 "$IMSHARD" pack "$T/odd/exif.lst" "$T/odd" -o "$T/odd/exif_keep" --quiet
same "$(/usr/bin/python3 -c "$hdr" "$T/odd/exif_keep.json" \
  '(ori, (w, h) if ori < 5 else (h, w), struct.unpack_from("<II", v, 28))')" \
  "$(/usr/bin/python3 -c 'print(sorted((n, (96, 64), (96, 64)) for n in range(1, 9)))')"
expect 0 "$IMSHARD" pack "$T/odd/exif.lst" "$T/odd" -o "$T/odd/exif_png" --encoding png --quiet
same "$(/usr/bin/python3 -c "$hdr" "$T/odd/exif_png.json" '(ori, w, h)')" "[(1, 96, 64)]"

# A JPEG cut inside its entropy data with its end marker intact passes
# keep mode's structural check; --check-decode and re-encoding skip it,
# and verify --decode names it.
mkdir -p "$T/dmg/c"
cp "$T/odd.fx/$DAMAGED_INSIDE" "$T/odd.fx/rgb.jpg" "$T/dmg/c/"
printf '0\t0\tc/rgb.jpg\n1\t0\tc/%s\n' "$DAMAGED_INSIDE" >"$T/dmg/l.lst"
expect 0 "$IMSHARD" pack "$T/dmg/l.lst" "$T/dmg" -o "$T/dmg/keep" --quiet
same "$(json "$T/dmg/keep.json" 'j["records"]')" 2
expect 1 "$IMSHARD" verify "$T/dmg/keep.json" --decode
contains "$T/err" "record 1: cannot decode"
expect 0 "$IMSHARD" pack "$T/dmg/l.lst" "$T/dmg" -o "$T/dmg/checked" --check-decode --quiet
same "$(json "$T/dmg/checked.json" 'j["records"]')" 1
contains "$T/dmg/checked.errors.tsv" "$DAMAGED_INSIDE"
expect 0 "$IMSHARD" pack "$T/dmg/l.lst" "$T/dmg" -o "$T/dmg/jpeg" --encoding jpeg --quiet
same "$(json "$T/dmg/jpeg.json" 'j["records"]')" 1

# --max-errors: failing past N publishes nothing but names the files.
expect 1 "$IMSHARD" pack "$T/odd/l_train.lst" "$T/odd" -o "$T/odd/max" --max-errors 2
contains "$T/err" "--max-errors 2"
absent "$T/odd/max.json"
exists "$T/odd/max.errors.tsv"
checks=$((checks + 1))
ls "$T/odd" | grep -q '^max-.*mdb' && fail "shards left behind after --max-errors"
# Every file bad: nothing published.
grep -P '\tbad/' "$T/odd/l_train.lst" >"$T/odd/bad.lst"
expect 1 "$IMSHARD" pack "$T/odd/bad.lst" "$T/odd" -o "$T/odd/allbad"
contains "$T/err" "no image could be packed"
absent "$T/odd/allbad.json"

# A file that vanished is skipped with the OS's reason.
printf '0\t0\tnot/there.jpg\n1\t0\tgood/rgb.jpg\n' >"$T/odd/missing.lst"
expect 0 "$IMSHARD" pack "$T/odd/missing.lst" "$T/odd" -o "$T/odd/missing"
contains "$T/odd/missing.errors.tsv" "No such file"
same "$(json "$T/odd/missing.json" 'j["records"]')" 1
# A path with a leading or trailing space (a list typed by hand or
# exported from a spreadsheet) is skipped with the reason said; a file
# whose name really starts with a space is packed, never stripped.
mkdir -p "$T/sp/cat"
cp "$T/odd/good/rgb.jpg" "$T/sp/cat/1.jpg"
cp "$T/odd/good/rgb.jpg" "$T/sp/cat/ 2.jpg"
printf '0\t0\t cat/1.jpg\n1\t0\tcat/1.jpg \n2\t0\tcat/ 2.jpg\n3\t0\t cat/9.jpg\n' >"$T/sp/l.lst"
expect 0 "$IMSHARD" pack "$T/sp/l.lst" "$T/sp" -o "$T/sp/o"
contains "$T/err" "skipped ' cat/1.jpg' (row 0): cannot open: No such file or directory (the path starts with a space; 'cat/1.jpg', without it, exists: fix the list row)"
contains "$T/err" "skipped 'cat/1.jpg ' (row 1): cannot open: No such file or directory (the path ends with a space; 'cat/1.jpg', without it, exists"
contains "$T/err" "skipped ' cat/9.jpg' (row 3): cannot open: No such file or directory (the path starts with a space)"
contains "$T/sp/o.errors.tsv" "the path starts with a space"
same "$(json "$T/sp/o.json" 'j["records"]')" 1

# im2rec lists with float and extra labels pack as they are.
printf '7\t2.000000\t0.5\tgood/rgb.jpg\n9\t0.000000\t-1.25\tgood/gray.jpg\n' >"$T/odd/multi.lst"
expect 0 "$IMSHARD" pack "$T/odd/multi.lst" "$T/odd" -o "$T/odd/multi" --quiet
same "$(json "$T/odd/multi.json" 'j["extra_labels"]')" 1
same "$(json "$T/odd/multi.json" 'j["class_counts"]')" "[1, 0, 1]"
same "$(/usr/bin/python3 -c "$hdr" "$T/odd/multi.json" '(lab, nx, struct.unpack_from("<f",v,48)[0])')" \
  "[(0, 1, -1.25), (2, 1, 0.5)]"

# An existing split is not replaced without --force.
expect 1 "$IMSHARD" pack "$T/s_train.lst" "$T/s" -o "$T/k1/train" --shards 1
one_line "$T/err"
contains "$T/err" "--force"
same "$(json "$T/k1/train.json" 'len(j["shards"])')" 3
expect 0 "$IMSHARD" pack "$T/s_train.lst" "$T/s" -o "$T/k1/train" --shards 1 --force --quiet
same "$(json "$T/k1/train.json" 'len(j["shards"])')" 1
absent "$T/k1/train-00001-of-00003.mdb"
expect 0 "$IMSHARD" verify "$T/k1/train.json"
# A failed --force leaves the split it keeps whole: its errors file too
# (the failed run's went over it while the manifest still named it).
mkdir -p "$T/ef"
(head -5 "$T/s_train.lst"; printf '90\t0\tgone.jpg\n') >"$T/ef/some.lst"
printf '0\t0\tnope.jpg\n' >"$T/ef/bad.lst"
expect 0 "$IMSHARD" pack "$T/ef/some.lst" "$T/s" -o "$T/ef/x" --quiet
cp "$T/ef/x.errors.tsv" "$T/ef/kept.tsv"
expect 1 "$IMSHARD" pack "$T/ef/bad.lst" "$T/s" -o "$T/ef/x" --force --quiet
one_line "$T/err"
contains "$T/err" "all 1 files were skipped (the first: 'nope.jpg': cannot open"
contains "$T/err" "'$T/ef/x.json' is kept as it was, with its errors file"
checks=$((checks + 1))
cmp -s "$T/ef/x.errors.tsv" "$T/ef/kept.tsv" || fail "a failed --force changed the kept split's errors file: $(cat "$T/ef/x.errors.tsv")"
same "$(json "$T/ef/x.json" 'j["errors_file"]')" x.errors.tsv
expect 1 "$IMSHARD" pack "$T/ef/some.lst" "$T/s" -o "$T/ef/x" --force --max-errors 0 --quiet
contains "$T/err" "'$T/ef/x.json' is kept as it was"
same "$(ls "$T/ef" | grep -c tmp)" 0 "(temporaries left)"
expect 0 "$IMSHARD" verify "$T/ef/x.json"
# Replaced by a run without skips: the old errors file goes with the split.
expect 0 "$IMSHARD" pack "$T/s_train.lst" "$T/s" -o "$T/ef/x" --force --quiet
absent "$T/ef/x.errors.tsv"

# --shards N where every row of some ranges is skipped: those shards are
# left out, and a warning says so even with --quiet (it said nothing).
mkdir -p "$T/fs"
(head -2 "$T/s_train.lst"; printf '97\t0\tm1.jpg\n98\t0\tm2.jpg\n99\t0\tm3.jpg\n') >"$T/fs/mix.lst"
expect 0 "$IMSHARD" pack "$T/fs/mix.lst" "$T/s" -o "$T/fs/q" --shards 5 --quiet
one_line "$T/err"
contains "$T/err" "warning: pack: wrote 2 of the 5 shards asked for (--shards 5): the rows of the other 3 shards were all skipped (3 skipped files in all, listed in '$T/fs/q.errors.tsv')"
same "$(json "$T/fs/q.json" 'len(j["shards"])')" 2
same "$(ls "$T/fs" | grep -c '^q-.*\.mdb$')" 2 "(shard files)"
expect 0 "$IMSHARD" pack "$T/fs/mix.lst" "$T/s" -o "$T/fs/v" --shards 5
contains "$T/err" "packed 2 of 5 images into 2 shards"
contains "$T/err" "wrote 2 of the 5 shards asked for"

# Working shards an earlier run left (.partial, .compact) are removed by
# the next pack of the name, whatever their index (docs/FORMAT.md), with
# or without a manifest; look-alikes of another name or shape stay.
mkdir -p "$T/wk"
for force in "" --force; do
  truncate -s 1M "$T/wk/x-00004.mdb.partial" "$T/wk/x-00002.mdb.compact" \
    "$T/wk/x-0004.mdb.partial" "$T/wk/y-00004.mdb.partial"
  expect 0 "$IMSHARD" pack "$T/s_train.lst" "$T/s" -o "$T/wk/x" --quiet $force
  absent "$T/wk/x-00004.mdb.partial"
  absent "$T/wk/x-00002.mdb.compact"
  exists "$T/wk/x-0004.mdb.partial"
  exists "$T/wk/y-00004.mdb.partial"
done

# Bad usage: exit 2, one line, nothing written.
for args in "--encoding gif" "--resize 64 --encoding keep" "--shards 0" "--quality 101" \
  "--shards 2 --shard-size 1M" "--threads -1" "--shard-size 12Q" "--check-decode --encoding png" \
  "--seed 3" "--shuffle --seed x" "--quality 5" "--quality 5 --encoding png" \
  "--quality 5 --encoding raw --resize 16" "--quality 5 --encoding keep"; do
  expect 2 "$IMSHARD" pack "$T/s_train.lst" "$T/s" -o "$T/u/x" $args
  one_line "$T/err"
done
expect 2 "$IMSHARD" pack "$T/s_train.lst" "$T/s"
one_line "$T/err"
contains "$T/err" "-o OUTDIR/NAME is required"
# A split named '.' or '..' would be refused by every reader: so is the
# -o that names one (it once packed, said "into 0 shards", exit 0).
mkdir -p "$T/dots/in"
cd "$T/dots/in" || fail "cd"
for o in "$T/u/." "$T/u/.." "$T/u/..json" . ..; do
  expect 2 "$IMSHARD" pack "$T/s_train.lst" "$T/s" -o "$o"
  one_line "$T/err"
  contains "$T/err" "with NAME a file name, not '."
done
cd - >/dev/null || fail "cd -"
same "$(ls -A "$T/dots" "$T/dots/in" | tr '\n' ' ')" "$T/dots: in  $T/dots/in: " "(files left by -o . or ..)"
absent "$T/u/x.json"
# Runtime failures: exit 1, one line.
expect 1 "$IMSHARD" pack "$T/s_train.lst" "$T/s" -o "$T/u/x" --shards 49
one_line "$T/err"
contains "$T/err" "cannot make 49 shards from a list of 48 images"
expect 1 "$IMSHARD" pack "$T/none.lst" "$T/s" -o "$T/u/x"
one_line "$T/err"
contains "$T/err" "none.lst"
expect 1 "$IMSHARD" pack "$T/s_train.lst" "$T/no-root" -o "$T/u/x"
one_line "$T/err"
contains "$T/err" "no-root"
printf 'garbage line\n' >"$T/bad.lst"
expect 1 "$IMSHARD" pack "$T/bad.lst" "$T/s" -o "$T/u/x"
one_line "$T/err"
contains "$T/err" "line 1"
# So would a JPEG quality without JPEG.
expect 2 "$IMSHARD" pack "$T/s_train.lst" "$T/s" -o "$T/u/x" --encoding png --quality 5
contains "$T/err" "--quality applies to --encoding jpeg only, and the encoding is png"
expect 2 "$IMSHARD" pack "$T/s_train.lst" "$T/s" -o "$T/u/x" --quality 5
contains "$T/err" "the encoding is keep (the default without a resize option)"
# A seed without --shuffle would be ignored: refused, naming the way out.
expect 2 "$IMSHARD" pack "$T/s_train.lst" "$T/s" -o "$T/u/x" --seed 3
contains "$T/err" "add --shuffle or drop --seed"
# None of these failures left anything behind, not even the folder.
checks=$((checks + 1))
[ -e "$T/u" ] && fail "a failed pack left the folder it made: $(ls -R "$T/u")"

# Order: the manifest records whether records are shuffled. Said by the
# caller (--shuffle, --order), or read from the rows: the lists that
# 'imshard list' shuffles (numbered first) count as shuffled, its
# --no-shuffle lists and class-grouped lists as not.
same "$(json "$T/k1/train.json" 'j["shuffled"]')" False "(--no-shuffle list)"
expect 0 "$IMSHARD" list "$T/s" -o "$T/sh" --seed 4 --quiet
expect 0 "$IMSHARD" pack "$T/sh_train.lst" "$T/s" -o "$T/ord/a"
contains "$T/err" "recorded as shuffled: rows out of index order"
same "$(json "$T/ord/a.json" 'j["shuffled"]')" True "(imshard list's shuffled list)"
expect 0 "$IMSHARD" pack "$T/s_train.lst" "$T/s" -o "$T/ord/b"
contains "$T/err" "recorded as not shuffled: rows in index order (--shuffle shuffles them)"
sort -t$'\t' -k2,2n -k1,1nr "$T/sh_train.lst" >"$T/ord/grouped.lst"
expect 0 "$IMSHARD" pack "$T/ord/grouped.lst" "$T/s" -o "$T/ord/g" --classes "$T/s.classes"
contains "$T/err" "recorded as not shuffled: rows grouped by class"
same "$(json "$T/ord/g.json" 'j["shuffled"]')" False "(grouped by class)"
expect 0 "$IMSHARD" pack "$T/s_train.lst" "$T/s" -o "$T/ord/c" --shuffle --seed 9
contains "$T/err" "records shuffled with --seed 9"
same "$(json "$T/ord/c.json" 'j["shuffled"]')" True "(--shuffle)"
expect 0 "$IMSHARD" pack "$T/s_train.lst" "$T/s" -o "$T/ord/c2" --shuffle --seed 9 --quiet
expect 0 "$IMSHARD" pack "$T/s_train.lst" "$T/s" -o "$T/ord/c3" --shuffle --seed 10 --quiet
checks=$((checks + 2))
cmp -s "$T/ord/c-00000-of-00001.mdb" "$T/ord/c2-00000-of-00001.mdb" || fail "--shuffle --seed 9 twice differs"
cmp -s "$T/ord/c-00000-of-00001.mdb" "$T/ord/c3-00000-of-00001.mdb" && fail "--seed 10 shuffled as --seed 9"
expect 0 "$IMSHARD" pack "$T/s_train.lst" "$T/s" -o "$T/ord/d" --order shuffled --quiet
same "$(json "$T/ord/d.json" 'j["shuffled"]')" True "(--order shuffled)"
expect 0 "$IMSHARD" pack "$T/sh_train.lst" "$T/s" -o "$T/ord/e" --order list --quiet
same "$(json "$T/ord/e.json" 'j["shuffled"]')" False "(--order list)"
expect 2 "$IMSHARD" pack "$T/s_train.lst" "$T/s" -o "$T/ord/x" --order random
one_line "$T/err"
expect 2 "$IMSHARD" pack "$T/s_train.lst" "$T/s" -o "$T/ord/x" --shuffle --order list
one_line "$T/err"
absent "$T/ord/x.json"

f0=$(sed -n 1p "$T/s_train.lst" | cut -f3)
f1=$(sed -n 2p "$T/s_train.lst" | cut -f3)

# Absolute paths in a list (im2rec users have such lists) are packed when
# they lie under ROOT, also with ROOT /; outside ROOT, or climbing out of it
# with '..', they are refused with the line.
mkdir -p "$T/abs"
awk -F'\t' -v r="$T/s" 'NR <= 6 {print $1 "\t" $2 "\t" r "/" $3}' "$T/s_train.lst" >"$T/abs/a.lst"
expect 0 "$IMSHARD" pack "$T/abs/a.lst" "$T/s" -o "$T/abs/o/a" --quiet
same "$(json "$T/abs/o/a.json" 'j["records"]')" 6
expect 0 "$IMSHARD" pack "$T/abs/a.lst" "$T/s/" -o "$T/abs/o/b" --quiet
expect 0 "$IMSHARD" pack "$T/abs/a.lst" / -o "$T/abs/o/c" --quiet
checks=$((checks + 1))
cmp -s "$T/abs/o/a-00000-of-00001.mdb" "$T/abs/o/c-00000-of-00001.mdb" || fail "ROOT / packed other bytes"
expect 1 "$IMSHARD" pack "$T/abs/a.lst" "$T/odd" -o "$T/abs/o/d"
one_line "$T/err"
contains "$T/err" "a.lst': line 1: path '$T/s/"
contains "$T/err" "' is not under ROOT '$T/odd'"
printf '0\t0\t%s/../s/%s\n' "$T/s" "$f0" >"$T/abs/up.lst"
expect 1 "$IMSHARD" pack "$T/abs/up.lst" / -o "$T/abs/o/e"
contains "$T/err" "has a '..' component"
absent "$T/abs/o/d.json"
absent "$T/abs/o/e.json"

# Names are printed escaped: a file named with ESC and other control bytes
# never reaches the terminal raw (it could clear or retitle it).
esc=$'bad\e[2J\e]0;owned\a.jpg'
mkdir -p "$T/esc/c"
printf 'not an image' >"$T/esc/c/$esc"
cp "$T/s/$f0" "$T/esc/c/good.jpg"
printf '0\t0\tc/good.jpg\n1\t0\tc/%s\n' "$esc" >"$T/esc/l.lst"
expect 0 "$IMSHARD" pack "$T/esc/l.lst" "$T/esc" -o "$T/esc/o/x"
contains "$T/err" "skipped 'c/bad\x1b[2J\x1b]0;owned\x07.jpg' (row 1)"
checks=$((checks + 1))
! grep -q $'\e' "$T/err" || fail "an ESC byte reached stderr"
printf '0\t0\tc/%s/../x.jpg\n' "$esc" >"$T/esc/up.lst"
expect 1 "$IMSHARD" pack "$T/esc/up.lst" "$T/esc" -o "$T/esc/o/y"
one_line "$T/err"
contains "$T/err" "path 'c/bad\x1b[2J"
checks=$((checks + 1))
! grep -q $'\e' "$T/err" || fail "an ESC byte reached stderr"

# Manifests are UTF-8 JSON (docs/FORMAT.md): a class name that is not
# UTF-8 (a Latin-1 folder name) is refused, named with its bytes escaped,
# before anything is written; UTF-8 names from --classes pack, and a ROOT
# path that is not UTF-8 is kept escaped in the informative options, so
# Python's json reads every manifest.
lat=$'caf\xe9'
mkdir -p "$T/lat/r"$'\xff'"/$lat" "$T/lat/r"$'\xff'"/tea"
cp "$T/s/$f0" "$T/lat/r"$'\xff'"/$lat/a.jpg"
cp "$T/s/$f1" "$T/lat/r"$'\xff'"/tea/b.jpg"
expect 0 "$IMSHARD" list "$T/lat/r"$'\xff' -o "$T/lat/l" --no-shuffle --quiet
expect 1 "$IMSHARD" pack "$T/lat/l_train.lst" "$T/lat/r"$'\xff' -o "$T/lat/o/x"
one_line "$T/err"
contains "$T/err" "class 0's name 'caf\xe9' is not UTF-8"
absent "$T/lat/o"
printf 'café\ntea\n' >"$T/lat/utf8.classes"
expect 0 "$IMSHARD" pack "$T/lat/l_train.lst" "$T/lat/r"$'\xff' -o "$T/lat/o/x" --classes "$T/lat/utf8.classes" --quiet
same "$(/usr/bin/python3 -c 'import json,sys; j=json.load(open(sys.argv[1], encoding="utf-8")); print(j["classes"][0], j["options"]["root"].endswith("r\\xff"))' "$T/lat/o/x.json")" "café True"
expect 1 "$IMSHARD" convert folder "$T/lat/r"$'\xff' -o "$T/lat/c"
one_line "$T/err"
contains "$T/err" "'caf\xe9' is not UTF-8"
absent "$T/lat/c/train.json"
absent "$T/lat/c/.imshard-convert"

# Labels are class ids, bounded before anything is sized by them. One
# label 99999999 once grew a pack to 24 GB until it was killed, leaving
# y.lock and a final-named shard: it runs under a memory limit here so
# that, unfixed, it fails instead of taking the machine down.
mkdir -p "$T/lab"
printf '0\t99999999\t%s\n' "$f0" >"$T/lab/h.lst"
run bash -c "$(memcap) exec \"\$@\"" _ "$IMSHARD" pack "$T/lab/h.lst" "$T/s" -o "$T/lab/o/y"
same "$rc" 1 "(huge label)"
one_line "$T/err"
contains "$T/err" "cannot read list '$T/lab/h.lst': line 1: label 99999999 is far beyond the 1 distinct label"
contains "$T/err" "--max-label N"
absent "$T/lab/o"
# Not integers: refused with the line, never rounded ('1e2' was 100).
for l in 1e2 3.5 0x10 -1 2147483648; do
  printf '0\t0\t%s\n1\t%s\t%s\n' "$f0" "$l" "$f1" >"$T/lab/bad.lst"
  expect 1 "$IMSHARD" pack "$T/lab/bad.lst" "$T/s" -o "$T/lab/o/b"
  one_line "$T/err"
  contains "$T/err" "line 2: label '$l'"
done
printf '0\t0\t%s\n1\t\t%s\n' "$f0" "$f1" >"$T/lab/bad.lst"
expect 1 "$IMSHARD" pack "$T/lab/bad.lst" "$T/s" -o "$T/lab/o/b"
contains "$T/err" "line 2: label column 1 is empty"
absent "$T/lab/o"
# im2rec's float labels are integers.
printf '0\t0.000000\t%s\n1\t3.000000\t%s\n' "$f0" "$f1" >"$T/lab/f.lst"
expect 0 "$IMSHARD" pack "$T/lab/f.lst" "$T/s" -o "$T/lab/o/f" --quiet
same "$(json "$T/lab/o/f.json" 'j["class_counts"]')" "[1, 0, 0, 1]"
# A sparse label space is declared with --max-label.
printf '0\t0\t%s\n1\t5000\t%s\n' "$f0" "$f1" >"$T/lab/sparse.lst"
expect 1 "$IMSHARD" pack "$T/lab/sparse.lst" "$T/s" -o "$T/lab/o/sp"
contains "$T/err" "line 2: label 5000 is far beyond the 2 distinct labels"
absent "$T/lab/o/sp.json"
expect 0 "$IMSHARD" pack "$T/lab/sparse.lst" "$T/s" -o "$T/lab/o/sp" --max-label 5000 --quiet
same "$(json "$T/lab/o/sp.json" '(len(j["classes"]), j["classes"][5000], j["class_counts"][5000])')" "(5001, '5000', 1)"
expect 1 "$IMSHARD" pack "$T/lab/sparse.lst" "$T/s" -o "$T/lab/o/sp2" --max-label 4999
contains "$T/err" "line 2: label 5000 is above --max-label 4999"
expect 2 "$IMSHARD" pack "$T/lab/sparse.lst" "$T/s" -o "$T/lab/o/sp2" --max-label 1048576
one_line "$T/err"
# With class names every label needs one (names of another list are
# caught, not padded with numbers).
printf 'a\nb\n' >"$T/lab/two.classes"
printf '0\t0\t%s\n1\t2\t%s\n' "$f0" "$f1" >"$T/lab/named.lst"
expect 1 "$IMSHARD" pack "$T/lab/named.lst" "$T/s" -o "$T/lab/o/n" --classes "$T/lab/two.classes"
contains "$T/err" "line 2: label 2 has no class name: the class names give 2 (labels 0 to 1)"
expect 0 "$IMSHARD" pack "$T/lab/named.lst" "$T/s" -o "$T/lab/o/n" --classes "$T/lab/two.classes" \
  --max-label 2 --quiet
same "$(json "$T/lab/o/n.json" 'j["classes"]')" "['a', 'b', '2']"
checks=$((checks + 1))
[ -z "$(ls "$T/lab/o" | grep -vE '^(f|sp|n)(\.json|-0000.-of-0000.\.mdb)$')" ] ||
  fail "failed packs left files: $(ls "$T/lab/o")"
# A row naming an image an earlier row names is packed as often as it is
# listed (oversampling may be meant), but never silently: a warning, even
# with --quiet, counts such rows, how many carry another label, and names
# the first with the row it repeats ('./' and '//' name the same file).
mkdir -p "$T/rep"
{ sed -n 1,4p "$T/s_train.lst"
  printf '90\t0\t%s\n' "$f0"
  printf '91\t2\t./%s\n' "$(echo "$f1" | sed 's|/|//|')"
  printf '92\t0\t%s\n' "$f0"; } >"$T/rep/r.lst"
expect 0 "$IMSHARD" pack "$T/rep/r.lst" "$T/s" -o "$T/rep/o/r" --quiet
same "$(json "$T/rep/o/r.json" 'j["records"]')" 7 "(repeated rows are packed as listed)"
one_line "$T/err"
contains "$T/err" "warning: pack: 3 of 7 rows repeat an earlier row's image (1 with another label)"
contains "$T/err" "the first: row 4 '$f0' repeats row 0"
contains "$T/err" "each is packed as often as it is listed"
expect 0 "$IMSHARD" pack "$T/rep/r.lst" "$T/s" -o "$T/rep/o/r2"
contains "$T/err" "3 of 7 rows repeat"
# the path is escaped as every line printed (cli_warn): an ESC in it is
# \x1b, never sent to the terminal
esc=$(printf 'e\033[31mx.jpg')
cp "$T/s/$f0" "$T/rep/$esc"
printf '0\t0\t%s\n1\t0\t%s\n' "$esc" "$esc" >"$T/rep/esc.lst"
expect 0 "$IMSHARD" pack "$T/rep/esc.lst" "$T/rep" -o "$T/rep/o/esc" --quiet
contains "$T/err" "the first: row 1 'e\x1b[31mx.jpg' repeats row 0"
same "$(tr -d -c '\033' <"$T/err" | wc -c)" 0 "(ESC bytes in the warning)"
# a list without repeats says nothing of them
expect 0 "$IMSHARD" pack "$T/s_train.lst" "$T/s" -o "$T/rep/o/none" --quiet
same "$(wc -c <"$T/err")" 0 "(no repeats, no warning)"
finish
