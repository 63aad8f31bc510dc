#!/usr/bin/env bash
# A reader written from docs/FORMAT.md alone (Python, lmdb module) reads
# every record of splits in each encoding and checks every CRC.
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1
reader="$IMS_SRC/tests/interop/read_split.py"
/usr/bin/python3 -c 'import lmdb' 2>/dev/null || { echo "python3-lmdb is missing (scripts/setup.sh installs it)"; exit 1; }

expect 0 "$IMSHARD" sample "$T/s" --classes 3 --per-class 10 --quiet
expect 0 "$IMSHARD" list "$T/s" -o "$T/s" --no-shuffle --quiet
for enc in keep jpeg png raw; do
  extra=""
  [ $enc != keep ] && extra="--resize 24"
  expect 0 "$IMSHARD" pack "$T/s_train.lst" "$T/s" -o "$T/p/$enc" --encoding $enc $extra --shards 2 --quiet
  mkdir -p "$T/dump/$enc"
  expect 0 /usr/bin/python3 "$reader" "$T/p/$enc.json" "$T/dump/$enc"
  contains "$T/out" "records 30"
done
# keep payloads are the source files.
i=0
while IFS=$'\t' read -r idx label path; do
  checks=$((checks + 1))
  cmp -s "$T/s/$path" "$T/dump/keep/$i.bin" || fail "record $i differs from $path"
  i=$((i + 1))
done <"$T/s_train.lst"
# The reader notices damage too (it is not a test that cannot fail).
shard=$(ls "$T/p/keep-00000-of-00002.mdb")
/usr/bin/python3 -c '
import sys
p = sys.argv[1]; f = open(p, "r+b"); data = f.read(); at = data.find(b"IMSR") + 200
f.seek(at); f.write(bytes([data[at] ^ 1]))' "$shard"
expect 1 /usr/bin/python3 "$reader" "$T/p/keep.json"
contains "$T/err" "crc"
# ... and checks the shard digest as FORMAT.md defines it: a label changed
# with its header CRC fixed up is caught by nothing else.
expect 0 /usr/bin/python3 "$IMS_SRC/tests/cli/split_edit.py" relabel "$T/p/png.json" 3 2
expect 1 /usr/bin/python3 "$reader" "$T/p/png.json"
contains "$T/err" "png-00000-of-00002.mdb: digest"
finish
