#!/usr/bin/env bash
# Messages as a user reads them: an error stays near one line when it
# concerns many items (short classes, skipped files: the first 5 named,
# the rest counted), convert's short-class error names --allow-short, a
# missing dataset layout names every path looked for, and counts of one
# take the singular ("1 shard", "1 record", "1 class").
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1

# --- short classes: 12 classes of 3 images, 5 wanted ----------------------
expect 0 "$IMSHARD" sample "$T/s12" --classes 12 --per-class 3 --quiet
expect 1 "$IMSHARD" convert folder "$T/s12" -o "$T/c12" --per-class-train 5 --quiet
same "$(wc -l <"$T/err")" 7 "convert's short-class error: a line, 5 classes, a count"
same "$(head -n1 "$T/err" | grep -c -- '--allow-short')" 1 "the error line names --allow-short"
contains "$T/err" "imshard: convert: train: cannot take the subset: 12 classes have fewer images than wanted"
contains "$T/err" "'checkerboard' (label 0): 3 images, 5 wanted"
contains "$T/err" "imshard:   ... and 7 more classes"
absent "$T/c12/train.json"
# with --allow-short: a warning, summarised the same way
expect 0 "$IMSHARD" convert folder "$T/s12" -o "$T/c12" --per-class-train 5 --allow-short
contains "$T/err" "imshard: warning: convert: train: 12 classes had fewer images than wanted"
same "$(grep -c "of 5 wanted" "$T/err")" 5 "short classes named in the warning"
contains "$T/err" "imshard:   ... and 7 more classes"
# subset: the same list
expect 0 "$IMSHARD" list "$T/s12" -o "$T/l12" --quiet
expect 1 "$IMSHARD" subset "$T/l12_train.lst" -o "$T/sub.lst" --per-class 5
same "$(wc -l <"$T/err")" 7 "subset's short-class error: a line, 5 classes, a count"
contains "$T/err" "imshard:   ... and 7 more classes"

# --- pack: 5 skipped files named, the rest counted, before the error -------
mkdir -p "$T/bad/a" "$T/bad/b"
for i in 0 1 2 3 4 5 6 7 8; do echo "not an image $i" >"$T/bad/a/x$i.jpg"; done
echo "not an image" >"$T/bad/b/y.jpg"
expect 0 "$IMSHARD" list "$T/bad" -o "$T/bl" --no-shuffle --quiet
expect 1 "$IMSHARD" pack "$T/bl_train.lst" "$T/bad" -o "$T/bp/p"
same "$(grep -c "^imshard: skipped '" "$T/err")" 5 "skipped files named"
contains "$T/err" "imshard: ... and 5 more skipped files"
same "$(tail -n1 "$T/err" | grep -c 'no image could be packed: all 10 files were skipped')" 1 "pack's error last"
same "$(wc -l <"$T/err")" 7 "pack's lines: 5 named, a count, the error"

# --- missing layouts: every path looked for --------------------------------
mkdir -p "$T/empty" "$T/half/train"
expect 1 "$IMSHARD" convert cifar10 "$T/empty" -o "$T/o" --quiet
one_line "$T/err"
for p in cifar-10-batches-bin/data_batch_1.bin data_batch_1.bin batches.meta.txt; do contains "$T/err" "'$T/empty/$p'"; done
expect 1 "$IMSHARD" convert inat2017 "$T/empty" -o "$T/o" --quiet
one_line "$T/err"
for p in train2017.json val2017.json train_val_images/; do contains "$T/err" "'$T/empty/$p'"; done
# a devkit ImageNet with only train/: both missing pieces named at once
expect 1 "$IMSHARD" convert imagenet "$T/half" -o "$T/o" --quiet
one_line "$T/err"
contains "$T/err" "missing '$T/half/map_clsloc.txt', '$T/half/val'"

# --- counts of one ----------------------------------------------------------
expect 0 "$IMSHARD" sample "$T/s2" --classes 2 --per-class 1
contains "$T/err" "wrote 2 images in 2 classes"
expect 0 "$IMSHARD" list "$T/s2" -o "$T/l2" --no-shuffle
contains "$T/err" "2 classes, 2 images"
head -n1 "$T/l2_train.lst" >"$T/one.lst"
expect 0 "$IMSHARD" pack "$T/one.lst" "$T/s2" -o "$T/p1/one"
contains "$T/err" "packed 1 of 1 image into 1 shard ("
lacks "$T/err" "of 1 images"
expect 0 "$IMSHARD" verify "$T/p1/one.json"
contains "$T/err" "OK: 1 record in 1 shard checked"
expect 0 "$IMSHARD" extract "$T/p1/one.json" -o "$T/x1"
contains "$T/err" "extracted 1 record to"
expect 0 "$IMSHARD" info "$T/p1/one.json"
contains "$T/out" "in 1 shard"

# --- a message is one write -------------------------------------------------
# The ranks of an mpirun job share stderr, which is unbuffered: a line
# written in pieces interleaved with another rank's ("imshard: imshard:
# rank 0: ..."), so each message goes out in one write(2). Seen with
# strace where it may trace (not in every container).
if command -v strace >/dev/null && strace -f -qq -e trace=none true 2>/dev/null; then
  # (LeakSanitizer refuses to run under ptrace: off for this run of an
  # ASan build)
  run env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
    strace -f -qq -s 4096 -e trace=write -e signal=none -o "$T/writes" "$IMSHARD" info "$T/none.json"
  same "$rc" 1 "exit status of info on a missing manifest"
  same "$(grep -c 'write(2, ' "$T/writes")" 1 "stderr writes for one error line"
  contains "$T/writes" "write(2, \"imshard: info: cannot open manifest"
else
  echo "note: strace cannot trace here: one write per message not checked"
fi

finish
