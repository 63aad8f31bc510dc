#!/usr/bin/env bash
# Packing when the disk fills up (a file-size limit stands in for a full
# filesystem): one clear line, exit 1, and nothing left that looks like a
# split (no manifest, no shard, no partial file); the same command then
# succeeds once there is room. Inputs removed while the pack runs are
# packed or skipped and named, never half-read into the split. A
# read-only output folder and an output folder that is a file are refused
# with one line.
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1

expect 0 "$IMSHARD" sample "$T/s" --classes 4 --per-class 40 --seed 2 --quiet
expect 0 "$IMSHARD" list "$T/s" -o "$T/s" --no-shuffle --quiet
args=(pack "$T/s_train.lst" "$T/s" --threads 1 --quiet)

# 512 blocks of 512 bytes: a little of the first shard fits. SIGXFSZ is
# ignored, as a full disk raises no signal: writes fail with an error.
run bash -c 'ulimit -f 512; trap "" XFSZ; exec "$@"' full "$IMSHARD" "${args[@]}" -o "$T/full/train"
checks=$((checks + 1))
[ "$rc" = 1 ] || fail "pack into a full disk exited $rc, expected 1"
one_line "$T/err"
contains "$T/err" "File too large"
absent "$T/full/train.json"
checks=$((checks + 1))
[ -z "$(ls -A "$T/full" 2>/dev/null)" ] || fail "a failed pack left files: $(ls -A "$T/full")"

# with room, the same command gives a complete, verifiable split
expect 0 "$IMSHARD" "${args[@]}" -o "$T/full/train"
expect 0 "$IMSHARD" verify "$T/full/train.json"

# inputs that vanish while the pack runs: whatever the timing, each listed
# file is either packed or skipped and named; the split is complete and
# verifies, and records + skipped = rows listed
expect 0 "$IMSHARD" sample "$T/v" --classes 4 --per-class 150 --seed 4 --quiet
expect 0 "$IMSHARD" list "$T/v" -o "$T/v" --no-shuffle --quiet
rows=$(grep -c . "$T/v_train.lst")
"$IMSHARD" pack "$T/v_train.lst" "$T/v" -o "$T/vout/train" --threads 1 --encoding jpeg --quality 95 \
  >"$T/vanish.out" 2>"$T/vanish.err" &
job=$!
# remove every third listed file, from the end of the list backwards, as
# the pack works through it from the start
awk -F'\t' 'NR % 3 == 0 { print $NF }' "$T/v_train.lst" | tac | while read -r f; do
  rm -f "$T/v/$f"
done
wait "$job"
rc=$?
same "$rc" 0 "pack while inputs vanish"
expect 0 "$IMSHARD" verify "$T/vout/train.json"
records=$(json "$T/vout/train.json" 'j["records"]')
skipped=0
[ -e "$T/vout/train.errors.tsv" ] && skipped=$(($(grep -c . "$T/vout/train.errors.tsv") - 1))
same "$((records + skipped))" "$rows" "records $records + skipped $skipped = rows listed"
checks=$((checks + 1))
[ "$skipped" -eq 0 ] || [ "$(grep -c "No such file" "$T/vout/train.errors.tsv")" -eq "$skipped" ] ||
  fail "a skipped file is not named as missing: $(head -3 "$T/vout/train.errors.tsv")"

# a read-only output folder (a read-only tmpfs: permissions would not stop
# root); checked where this process may mount, said and passed over where not
mkdir -p "$T/ro"
if mount -t tmpfs -o ro,size=1m tmpfs "$T/ro" 2>/dev/null; then
  trap 'umount "$T/ro" 2>/dev/null' EXIT
  expect 1 "$IMSHARD" "${args[@]}" -o "$T/ro/train"
  one_line "$T/err"
  contains "$T/err" "Read-only file system"
  umount "$T/ro"
  trap - EXIT
else
  echo "note: cannot mount a read-only tmpfs here: the read-only output check is not run" >&2
fi

# an output folder that is a file
: >"$T/afile"
expect 1 "$IMSHARD" "${args[@]}" -o "$T/afile/train"
one_line "$T/err"

# NAME.json that is a folder or a FIFO is no split: refused with what it
# is, with or without --force (before: "split already exists; use --force",
# and --force then failed to remove the folder or replaced the FIFO)
mkdir -p "$T/kind/train.json" "$T/kind2"
mkfifo "$T/kind2/train.json"
for f in "" --force; do
  expect 1 "$IMSHARD" "${args[@]}" -o "$T/kind/train" $f
  one_line "$T/err"
  contains "$T/err" "'$T/kind/train.json' is a folder, not a split's manifest: remove it or choose another name"
  lacks "$T/err" "use --force"
  expect 1 "$IMSHARD" "${args[@]}" -o "$T/kind2/train" $f
  contains "$T/err" "'$T/kind2/train.json' is a FIFO, not a split's manifest"
done
checks=$((checks + 1))
[ -p "$T/kind2/train.json" ] && [ "$(ls -A "$T/kind2")" = train.json ] && [ "$(ls -A "$T/kind")" = train.json ] ||
  fail "a refused pack changed the folder: $(ls -A "$T/kind" "$T/kind2")"
finish
