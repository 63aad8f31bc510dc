#!/usr/bin/env bash
# test_list.sh - `imshard list`: outputs, labels, stratified split counts,
# determinism, --recursive/--exts, summary and error messages, exit codes.
#
# Environment: IMSHARD (the imshard binary), IMS_TMP (scratch folder).
# Fixtures are empty files in layouts that mirror Caltech-256 and the
# iNaturalist species folders; listing never reads image contents.
set -euo pipefail

: "${IMSHARD:?set IMSHARD to the imshard binary}"
: "${IMS_TMP:?set IMS_TMP to a scratch folder}"
source "$(dirname "$0")/scratch.sh" cli_list
trap scratch_on_exit EXIT
failures=0

fail() {
	# the line in this script's main body that led here
	echo "FAIL (line ${BASH_LINENO[${#BASH_LINENO[@]} - 2]}): $*" >&2
	failures=$((failures + 1))
}

# run ARGS...: runs imshard, keeps its exit code in $rc and its output in
# $T/stdout and $T/stderr.
run() {
	set +e
	"$IMSHARD" "$@" >"$T/stdout" 2>"$T/stderr"
	rc=$?
	set -e
}

expect_rc() {
	if [ "$rc" -ne "$1" ]; then
		fail "exit code $rc, expected $1; stderr:"
		sed 's/^/    /' "$T/stderr" >&2
	fi
}

expect_stderr() {
	grep -qF -- "$1" "$T/stderr" || { fail "stderr lacks '$1':"; sed 's/^/    /' "$T/stderr" >&2; }
}

expect_stderr_lines() {
	local n
	n=$(wc -l <"$T/stderr")
	[ "$n" -eq "$1" ] || { fail "stderr has $n lines, expected $1:"; sed 's/^/    /' "$T/stderr" >&2; }
}

expect_eq() { # what got want
	[ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"
}

# Rows of FILE with label L.
count_label() { awk -F'\t' -v l="$2" '$2 == l' "$1" | wc -l | tr -d ' '; }
rows() { wc -l <"$1" | tr -d ' '; }

# usage_error ARGS...: exit 2, one line `imshard: list: ...`, nothing written.
usage_error() {
	run list "$@"
	expect_rc 2
	expect_stderr_lines 1
	grep -q '^imshard: list: ' "$T/stderr" || fail "usage error not prefixed: $(cat "$T/stderr")"
	[ ! -s "$T/stdout" ] || fail "usage error printed to stdout"
}

# ---- fixture: Caltech-256 layout -------------------------------------------
C="$T/caltech/256_ObjectCategories"
make_class() { # folder count
	mkdir -p "$C/$1"
	local i
	for i in $(seq 1 "$2"); do
		: >"$C/$1/${1%%.*}_$(printf %04d "$i").jpg"
	done
}
make_class 001.ak47 10
make_class 015.bonsai-101 5
make_class 056.dog 7
make_class 198.spider 4
make_class 257.clutter 20
: >"$C/198.spider/RENAME2"
mkdir -p "$C/056.dog/greg/vision309"
: >"$C/.DS_Store"
: >"$C/001.ak47/._001_0001.jpg"
mv "$C/257.clutter/257_0003.jpg" "$C/257.clutter/257_0003.JPG" # mixed case
ALL=46

# ---- --help ---------------------------------------------------------------
run list --help
expect_rc 0
for opt in -o --output --recursive --exts --train-ratio --test-ratio --seed \
	--no-shuffle --quiet --help PREFIX_train.lst PREFIX_val.lst \
	PREFIX_test.lst PREFIX.classes; do
	grep -qF -- "$opt" "$T/stdout" || fail "--help does not mention $opt"
done
[ ! -s "$T/stderr" ] || fail "--help wrote to stderr"
run list -h
expect_rc 0

# ---- default: everything in _train.lst, shuffled ----------------------------
run list "$C" -o "$T/out/caltech"
expect_rc 0
[ ! -s "$T/stdout" ] || fail "list printed to stdout"
expect_stderr "5 classes, $ALL images"
expect_stderr "skipped 1 file not matching .jpg,.jpeg,.png"
expect_stderr "_train.lst': $ALL images"
[ -f "$T/out/caltech_train.lst" ] || fail "no caltech_train.lst"
[ ! -e "$T/out/caltech_val.lst" ] || fail "caltech_val.lst written without a split"
[ ! -e "$T/out/caltech_test.lst" ] || fail "caltech_test.lst written without a split"
printf '001.ak47\n015.bonsai-101\n056.dog\n198.spider\n257.clutter\n' >"$T/want.classes"
cmp -s "$T/want.classes" "$T/out/caltech.classes" || fail "caltech.classes differs"
L="$T/out/caltech_train.lst"
expect_eq rows "$(rows "$L")" $ALL
expect_eq "label 0" "$(count_label "$L" 0)" 10
expect_eq "label 1" "$(count_label "$L" 1)" 5
expect_eq "label 2" "$(count_label "$L" 2)" 7
expect_eq "label 3" "$(count_label "$L" 3)" 4
expect_eq "label 4" "$(count_label "$L" 4)" 20
# Exactly three TAB-separated columns, integer labels, relative paths.
bad=$(awk -F'\t' 'NF != 3 || $1 !~ /^[0-9]+$/ || $2 !~ /^[0-9]+$/ || $3 ~ /^\//' "$L" | wc -l)
expect_eq "malformed rows" "$bad" 0
grep -qxF "$(printf '0\t0\t001.ak47/001_0001.jpg')" "$L" || fail "row 0 missing"
grep -qxF "$(printf '45\t4\t257.clutter/257_0020.jpg')" "$L" || fail "last row missing"
grep -qF "257.clutter/257_0003.JPG" "$L" || fail ".JPG not listed"
! grep -q 'RENAME2\|DS_Store\|\._001' "$L" || fail "non-images or hidden files listed"
expect_eq "indexes" "$(cut -f1 "$L" | sort -n | tr '\n' ' ')" "$(seq 0 45 | tr '\n' ' ')"
cut -f1 "$L" | sort -n -c 2>/dev/null && fail "rows not shuffled by default"

# --no-shuffle: sorted order, index = row number.
run list "$C" -o "$T/sorted/caltech" --no-shuffle --quiet
expect_rc 0
[ ! -s "$T/stderr" ] || fail "--quiet printed: $(cat "$T/stderr")"
expect_eq "sorted indexes" "$(cut -f1 "$T/sorted/caltech_train.lst" | tr '\n' ' ')" "$(seq 0 45 | tr '\n' ' ')"
expect_eq "sorted paths" "$(cut -f3 "$T/sorted/caltech_train.lst" | LC_ALL=C sort -c && echo ok)" ok
# Same rows as the shuffled list.
expect_eq "same rows" "$(sort "$L" | md5sum)" "$(sort "$T/sorted/caltech_train.lst" | md5sum)"

# ---- stratified split --------------------------------------------------------
run list "$C" -o "$T/split/c" --train-ratio 0.8 --seed 7
expect_rc 0
expect_stderr "_val.lst': 9 images"
V="$T/split/c_val.lst"
TR="$T/split/c_train.lst"
[ ! -e "$T/split/c_test.lst" ] || fail "c_test.lst written with test ratio 0"
# round(n * 0.2) per class: 10->2 5->1 7->1 4->1 20->4
for lc in 0:2 1:1 2:1 3:1 4:4; do
	expect_eq "val label ${lc%%:*}" "$(count_label "$V" "${lc%%:*}")" "${lc##*:}"
done
expect_eq "train rows" "$(rows "$TR")" 37
# Disjoint and covering.
expect_eq "cover" "$(cat "$TR" "$V" | sort | md5sum)" "$(sort "$L" | md5sum)"
expect_eq "disjoint" "$(cat "$TR" "$V" | cut -f3 | sort | uniq -d | wc -l)" 0
cmp -s "$T/want.classes" "$T/split/c.classes" || fail "split classes differ"

# Same seed: same files; another seed: another split, same counts.
run list "$C" -o "$T/split2/c" --train-ratio 0.8 --seed 7 --quiet
expect_rc 0
cmp -s "$V" "$T/split2/c_val.lst" || fail "same seed gave another val list"
cmp -s "$TR" "$T/split2/c_train.lst" || fail "same seed gave another train list"
run list "$C" -o "$T/split3/c" --train-ratio 0.8 --seed 8 --quiet
expect_rc 0
[ "$(sort "$V")" != "$(sort "$T/split3/c_val.lst")" ] || fail "seeds 7 and 8 gave the same val rows"
expect_eq "seed 8 val rows" "$(rows "$T/split3/c_val.lst")" 9

# A run that cannot write every file writes none: the earlier lists stay
# together (before: the new train list was written, then the val list
# failed, leaving the same images in train and val). A folder at the val
# list's name is the failure here.
cp -r "$T/split2" "$T/split4"
rm "$T/split4/c_val.lst"
mkdir "$T/split4/c_val.lst"
run list "$C" -o "$T/split4/c" --train-ratio 0.8 --seed 8 --quiet
expect_rc 1
expect_stderr_lines 1
expect_stderr "c_val.lst' is a folder: nothing was written"
cmp -s "$TR" "$T/split4/c_train.lst" || fail "a failed list replaced the train list"
cmp -s "$T/split2/c.classes" "$T/split4/c.classes" || fail "a failed list replaced the classes"
expect_eq "no temporaries" "$(ls "$T/split4" | grep -c tmp || true)" 0
# and a successful run leaves no temporary either
expect_eq "no temporaries" "$(ls "$T/split3" | grep -c tmp || true)" 0

# Train, val and test.
run list "$C" -o "$T/three/c" --train-ratio 0.7 --test-ratio 0.1 --no-shuffle
expect_rc 0
# test round(n*0.1): 10->1 5->1 7->1 4->0 20->2; val round(n*0.2): 2 1 1 1 4
for lc in 0:1 1:1 2:1 3:0 4:2; do
	expect_eq "test label ${lc%%:*}" "$(count_label "$T/three/c_test.lst" "${lc%%:*}")" "${lc##*:}"
done
expect_eq "val rows" "$(rows "$T/three/c_val.lst")" 9
expect_eq "test rows" "$(rows "$T/three/c_test.lst")" 5
expect_eq "train rows" "$(rows "$T/three/c_train.lst")" 32
expect_eq "three-way cover" "$(cat "$T/three"/c_*.lst | sort | md5sum)" "$(sort "$L" | md5sum)"
# --no-shuffle keeps each split in sorted order.
cut -f1 "$T/three/c_val.lst" | sort -n -c || fail "--no-shuffle val not sorted"

# Train + test = 1: no val file.
run list "$C" -o "$T/tt/c" --train-ratio 0.8 --test-ratio 0.2 --quiet
expect_rc 0
[ -f "$T/tt/c_test.lst" ] || fail "no c_test.lst"
[ ! -e "$T/tt/c_val.lst" ] || fail "c_val.lst written when train + test = 1"
# Rerun without a split: the old _test.lst stays, with a warning.
run list "$C" -o "$T/tt/c"
expect_rc 0
expect_stderr "warning: '$T/tt/c_test.lst' is left from an earlier run; this run writes no test list"
expect_eq "rerun train rows" "$(rows "$T/tt/c_train.lst")" $ALL

# ---- --recursive and --exts ----------------------------------------------------
: >"$C/056.dog/greg/056_0100.jpg"
run list "$C" -o "$T/nest/c"
expect_rc 0
expect_stderr "skipped 1 image in folders nested inside class folders"
run list "$C" -o "$T/rec/c" --recursive --no-shuffle
expect_rc 0
expect_stderr "6 classes, 47 images"
expect_eq "recursive classes" "$(tr '\n' ' ' <"$T/rec/c.classes")" \
	"001.ak47 015.bonsai-101 056.dog 056.dog/greg 198.spider 257.clutter "
grep -qxF "$(printf '22\t3\t056.dog/greg/056_0100.jpg')" "$T/rec/c_train.lst" || fail "nested row"
rm "$C/056.dog/greg/056_0100.jpg"

run list "$C" -o "$T/png/c" --exts .png
expect_rc 1
expect_stderr "imshard: cannot list '$C': none of its 5 class folders holds a file matching .png"
[ ! -e "$T/png/c_train.lst" ] || fail "output written on failure"
run list "$C" -o "$T/jpgonly/c" --exts JPG --quiet
expect_rc 0
expect_eq "JPG rows" "$(rows "$T/jpgonly/c_train.lst")" $ALL

# a class folder linking to another: its images would be listed under two
# labels (before: listed twice, silently). One line, nothing written.
ln -s 001.ak47 "$C/002.ak47-copy"
run list "$C" -o "$T/twice/c"
expect_rc 1
expect_stderr_lines 1
expect_stderr "the class folders '001.ak47' and '002.ak47-copy' are one folder"
[ ! -e "$T/twice" ] || fail "output written when refused"
rm "$C/002.ak47-copy"

# an entry named like an image that is no regular file (a FIFO): named and
# said to be no file (before: counted with RENAME2 in "skipped 2 files not
# matching .jpg,...")
mkfifo "$C/001.ak47/fifo.jpg"
run list "$C" -o "$T/fifo/c"
expect_rc 0
expect_stderr "skipped 1 entry named like an image that is no regular file ('001.ak47/fifo.jpg': a FIFO, socket or device)"
expect_stderr "skipped 1 file not matching .jpg,.jpeg,.png"
grep -q "fifo.jpg" "$T/fifo/c_train.lst" && fail "a FIFO listed"
rm "$C/001.ak47/fifo.jpg"

# ---- names with spaces and non-ASCII ----------------------------------------
A="$T/inat/train_val_images/Aves"
mkdir -p "$A/Anas superciliosa × platyrhynchos" "$A/Anas platyrhynchos" "$A/Anas é"
: >"$A/Anas superciliosa × platyrhynchos/0d3c9e2f.jpg"
: >"$A/Anas platyrhynchos/1.jpg"
: >"$A/Anas é/2 with space.jpeg"
run list "$A" -o "$T/inat/aves" --no-shuffle
expect_rc 0
printf 'Anas platyrhynchos\nAnas superciliosa × platyrhynchos\nAnas é\n' >"$T/want2"
cmp -s "$T/want2" "$T/inat/aves.classes" || fail "species classes differ"
grep -qxF "$(printf '1\t1\tAnas superciliosa × platyrhynchos/0d3c9e2f.jpg')" "$T/inat/aves_train.lst" ||
	fail "species row"
grep -qxF "$(printf '2\t2\tAnas é/2 with space.jpeg')" "$T/inat/aves_train.lst" || fail "é row"
run list "$T/inat/train_val_images" -o "$T/inat/all" --recursive --quiet
expect_rc 0
grep -qxF "Aves/Anas superciliosa × platyrhynchos" "$T/inat/all.classes" || fail "recursive species class"

# ---- runtime errors: exit 1, one line, nothing written ---------------------------
run list "$T/nope" -o "$T/err/x"
expect_rc 1
expect_stderr "imshard: cannot list '$T/nope': No such file or directory"
expect_stderr_lines 1
[ ! -e "$T/err" ] || fail "outputs created for a missing ROOT"
run list "$C/001.ak47/001_0001.jpg" -o "$T/err/x"
expect_rc 1
expect_stderr "not a folder"
mkdir -p "$T/emptyroot"
run list "$T/emptyroot" -o "$T/err/x"
expect_rc 1
expect_stderr "no class subfolders"
: >"$T/blocker"
run list "$C" -o "$T/blocker/sub/x" --quiet
expect_rc 1
expect_stderr "cannot create folder"

# ---- usage errors: exit 2, one line ----------------------------------------------
usage_error
usage_error "$C"
usage_error "$C" "$C" -o "$T/u/x"
usage_error "$C" -o "$T/u/x" --bogus
usage_error "$C" -o "$T/u/x" -z
usage_error "$C" -o
usage_error "$C" -o "$T/u/"
# '.' and '..' name folders too (they wrote hidden '._train.lst', '..classes')
usage_error "$C" -o "$T/u/."
expect_stderr "not a folder"
usage_error "$C" -o "$T/u/.."
expect_stderr "not a folder"
usage_error "$C" -o "$T/u/x.lst"
usage_error "$C" -o "$T/u/x" --train-ratio 0
usage_error "$C" -o "$T/u/x" --train-ratio 1.5
usage_error "$C" -o "$T/u/x" --train-ratio abc
usage_error "$C" -o "$T/u/x" --test-ratio -0.1
expect_stderr "--test-ratio must be in [0, 1), got -0.1"
usage_error "$C" -o "$T/u/x" --test-ratio 1
expect_stderr "--test-ratio must be in [0, 1), got 1"
usage_error "$C" -o "$T/u/x" --train-ratio 0.8 --test-ratio 0.3
expect_stderr "exceeds 1"
usage_error "$C" -o "$T/u/x" --seed -1
usage_error "$C" -o "$T/u/x" --exts ".jpg,,.png"
expect_stderr "empty extension"
usage_error "$C" -o "$T/u/x" --no-shuffle=1
[ ! -e "$T/u" ] || fail "usage error created outputs"
# a ratio that leaves a split empty: written, and said so (before: an
# empty list without a word)
run list "$C" -o "$T/thin/c" --train-ratio 0.999
expect_rc 0
# with the size a class needs for one image (before: not said)
expect_stderr "thin/c_val.lst' is empty: the val ratio 0.001 rounds to no image in any class (a class needs 500 images for one; every class here has fewer): lower --train-ratio or --test-ratio"
[ -e "$T/thin/c_val.lst" ] && [ ! -s "$T/thin/c_val.lst" ] || fail "the empty val list was not written"
run list "$C" -o "$T/thin/t" --train-ratio 0.99 --test-ratio 0.01
expect_rc 0
expect_stderr "thin/t_test.lst' is empty: the test ratio 0.01 rounds to no image in any class (a class needs 50 images for one; every class here has fewer): raise --test-ratio"
# a broken link named like an image: said so, not "not matching"
# (before: counted with the files of other extensions)
mkdir -p "$T/bl/a" "$T/bl/b"
: >"$T/bl/a/x.jpg"
: >"$T/bl/b/y.jpg"
ln -s gone.jpg "$T/bl/a/photo.jpg"
ln -s self.jpg "$T/bl/b/self.jpg"
run list "$T/bl" -o "$T/blout/d"
expect_rc 0
expect_stderr "skipped 2 broken links (their target is missing, or the links loop)"
grep -qF "not matching" "$T/stderr" && fail "broken links counted as files not matching"
# a link back to a folder being listed: not walked twice, counted and
# named (before: skipped without a word; as a class folder it was a
# class that quietly did not exist)
mkdir -p "$T/lp/a/deep"
: >"$T/lp/a/x.jpg"
ln -s .. "$T/lp/a/deep/up"
ln -s . "$T/lp/again"
run list "$T/lp" -o "$T/lpout/d"
expect_rc 0
expect_stderr "skipped 2 links that lead back to a folder already being listed ('a/deep/up' first; not walked twice)"
[ "$(cat "$T/lpout/d.classes")" = a ] || fail "the looping link became a class"
# lists written into ROOT: a later listing would take their folder for a
# class and shift every label after it (before: written, then read so)
usage_error "$C" -o "$C/0lists/c"
expect_stderr "writes into a folder under ROOT '$C', where a later listing would read it"
[ ! -e "$C/0lists" ] || fail "refused -o left its folder in ROOT"
(cd "$C" && "$IMSHARD" list . -o lists/c >"$T/stdout" 2>"$T/stderr") && fail "'list . -o lists/c' from ROOT was accepted"
# ROOT itself holds no class: lists there are fine
run list "$C" -o "$C/c" --quiet
expect_rc 0
rm -f "$C"/c_train.lst "$C"/c.classes
ln -s "$C" "$T/via_link"
usage_error "$C" -o "$T/via_link/0lists/c"

# a file-size limit (ulimit -f, standing in for a full disk) is an error
# naming the file, not a kill by SIGXFSZ (before: exit 153, and the
# temporary list left behind)
mkdir "$T/fsz"
set +e
(ulimit -f 1; exec "$IMSHARD" list "$C" -o "$T/fsz/c" --quiet) >"$T/stdout" 2>"$T/stderr"
rc=$?
set -e
expect_rc 1
expect_stderr_lines 1
expect_stderr "File too large"
expect_stderr "imshard: list: cannot write '$T/fsz/c_train.lst': File too large"
! grep -q '\.tmp\.' "$T/stderr" || fail "the message names a temporary: $(cat "$T/stderr")"
expect_eq "files left by a list past a file-size limit" "$(ls -A "$T/fsz")" ""

# the same into folders the run makes: a failed run removes them again,
# as subset does (before: '$T/fsz/new/sub' stayed, empty)
set +e
(ulimit -f 1; exec "$IMSHARD" list "$C" -o "$T/fsz/new/sub/c" --quiet) >"$T/stdout" 2>"$T/stderr"
rc=$?
set -e
expect_rc 1
expect_stderr "imshard: list: cannot write '$T/fsz/new/sub/c_train.lst': File too large"
expect_eq "folders left by a failed list" "$(ls -A "$T/fsz")" ""

if [ "$failures" -ne 0 ]; then
	echo "test_list.sh: $failures failure(s)" >&2
	exit 1
fi
echo "test_list.sh: ok"
