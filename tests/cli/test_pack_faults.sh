#!/usr/bin/env bash
# Packing when the disk fills up (a file-size limit stands in for a full
# filesystem): one clear line, exit 1, and nothing left that looks like a
# split (no manifest, no shard, no partial file); the same command then
# succeeds once there is room. An output folder that is a file is refused
# before anything is read.
source "$IMS_TESTLIB"

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

# an output folder that is a file
: >"$T/afile"
expect 1 "$IMSHARD" "${args[@]}" -o "$T/afile/train"
one_line "$T/err"
finish
