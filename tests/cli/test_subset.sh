#!/usr/bin/env bash
# test_subset.sh - `imshard subset`: exact per-class counts, --total's
# remainder rule, determinism, rows kept whole and in input order, short
# classes (error or --allow-short), the classes file carried along, exit
# codes and messages.
#
# Environment: IMSHARD (the imshard binary), IMS_TMP (scratch folder).
set -euo pipefail

: "${IMSHARD:?set IMSHARD to the imshard binary}"
: "${IMS_TMP:?set IMS_TMP to a scratch folder}"
source "$(dirname "$0")/scratch.sh" cli_subset
trap scratch_on_exit EXIT
failures=0

fail() {
	# the line in this script's main body that led here
	echo "FAIL (line ${BASH_LINENO[${#BASH_LINENO[@]} - 2]}): $*" >&2
	failures=$((failures + 1))
}

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

expect_eq() { # what got want
	[ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"
}

count_label() { awk -F'\t' -v l="$2" '$2 == l' "$1" | wc -l | tr -d ' '; }
rows() { wc -l <"$1" | tr -d ' '; }

# OUT is made of whole lines of IN, in IN's order.
check_sub_ordered() { # out in
	local last=0 line n
	while IFS= read -r line; do
		n=$(grep -nxF -- "$line" "$2" | head -1 | cut -d: -f1)
		if [ -z "$n" ]; then
			fail "row not in input: $line"
			return
		fi
		[ "$n" -gt "$last" ] || { fail "input order not kept at: $line"; return; }
		last=$n
	done <"$1"
}

usage_error() {
	run subset "$@"
	expect_rc 2
	[ "$(wc -l <"$T/stderr")" -eq 1 ] || fail "usage error is not one line: $(cat "$T/stderr")"
	grep -q '^imshard: subset: ' "$T/stderr" || fail "usage error not prefixed: $(cat "$T/stderr")"
}

# ---- fixture: a shuffled list of 3 classes (10, 4, 7 rows) -----------------
# label 0 'cat', 1 'dog', 2 an iNaturalist species; an extra float label
# column in the im2rec %f format, so rows are copied byte for byte.
IN="$T/lists/data_train.lst"
mkdir -p "$T/lists"
{
	for i in $(seq 0 9); do printf '%d\t0\t0.%d00000\tcat/%02d.jpg\n' "$i" "$i" "$i"; done
	for i in $(seq 10 13); do printf '%d\t1\t1.500000\tdog/%02d with space.jpg\n' "$i" "$i"; done
	for i in $(seq 14 20); do printf '%d\t2\t-2.250000\tAnas superciliosa × platyrhynchos/%02d.jpg\n' "$i" "$i"; done
} | awk 'BEGIN{srand(3)} {print rand() "\t" $0}' | sort -n | cut -f2- >"$IN"
printf 'cat\ndog\nAnas superciliosa × platyrhynchos\n' >"$T/lists/data.classes"

# ---- --help -----------------------------------------------------------------
run subset --help
expect_rc 0
for opt in -o --output --per-class --total --seed --allow-short --classes \
	--quiet --help; do
	grep -qF -- "$opt" "$T/stdout" || fail "--help does not mention $opt"
done

# ---- --per-class ----------------------------------------------------------------
run subset "$IN" -o "$T/out/small_train.lst" --per-class 3
expect_rc 0
[ ! -s "$T/stdout" ] || fail "subset printed to stdout"
O="$T/out/small_train.lst"
expect_eq rows "$(rows "$O")" 9
for l in 0 1 2; do expect_eq "label $l" "$(count_label "$O" $l)" 3; done
check_sub_ordered "$O" "$IN"
expect_stderr "wrote '$O': 9 of 21 rows, 3 classes, 3 to 3 per class"
cmp -s "$T/lists/data.classes" "$T/out/small.classes" || fail "classes not copied to small.classes"
expect_stderr "small.classes': 3 classes"

# Deterministic; another seed picks other rows; smaller is a subset of larger.
run subset "$IN" -o "$T/out/again.lst" --per-class 3 --quiet
expect_rc 0
[ ! -s "$T/stderr" ] || fail "--quiet printed: $(cat "$T/stderr")"
cmp -s "$O" "$T/out/again.lst" || fail "same seed gave another subset"
# -q is --quiet, as for every other command (before: unknown option)
run subset "$IN" -o "$T/out/again_q.lst" --per-class 3 -q
expect_rc 0
[ ! -s "$T/stderr" ] || fail "-q printed: $(cat "$T/stderr")"
run subset "$IN" -o "$T/out/seed9.lst" --per-class 3 --seed 9 --quiet
expect_rc 0
cmp -s "$O" "$T/out/seed9.lst" && fail "seeds 0 and 9 gave the same subset"
run subset "$IN" -o "$T/out/two.lst" --per-class 2 --quiet
expect_rc 0
check_sub_ordered "$T/out/two.lst" "$O"

# All rows of every class: the input itself.
run subset "$IN" -o "$T/out/all10.lst" --per-class 10 --allow-short --quiet
expect_rc 0
cmp -s "$IN" "$T/out/all10.lst" || fail "taking everything changed the list"

# ---- short classes --------------------------------------------------------------
run subset "$IN" -o "$T/short/x.lst" --per-class 5
expect_rc 1
expect_stderr "imshard: cannot take the subset of '$IN': 1 of 3 classes has fewer rows than wanted"
expect_stderr "'dog' (label 1): 4 rows, 5 wanted"
[ ! -e "$T/short" ] || fail "output written for short classes"
run subset "$IN" -o "$T/short/x.lst" --per-class 8
expect_rc 1
expect_stderr "2 of 3 classes have fewer rows"
expect_stderr "'dog' (label 1): 4 rows, 8 wanted"
expect_stderr "'Anas superciliosa × platyrhynchos' (label 2): 7 rows, 8 wanted"
grep -q "'cat'" "$T/stderr" && fail "a class with enough rows was named short"
run subset "$IN" -o "$T/short/x.lst" --per-class 5 --allow-short
expect_rc 0
expect_stderr "warning: 1 of 3 classes has fewer rows than wanted; took all their rows"
expect_stderr "'dog' (label 1): 4 rows, 5 wanted"
expect_stderr "14 of 21 rows, 3 classes, 4 to 5 per class"
expect_eq "short rows" "$(rows "$T/short/x.lst")" 14
expect_eq "short dog" "$(count_label "$T/short/x.lst" 1)" 4

# ---- --total ---------------------------------------------------------------------
# 10 over 3 classes: 3 each, the remainder 1 to label 0.
run subset "$IN" -o "$T/total/t.lst" --total 10
expect_rc 0
expect_eq "total 0" "$(count_label "$T/total/t.lst" 0)" 4
expect_eq "total 1" "$(count_label "$T/total/t.lst" 1)" 3
expect_eq "total 2" "$(count_label "$T/total/t.lst" 2)" 3
expect_stderr "10 of 21 rows, 3 classes, 3 to 4 per class"
check_sub_ordered "$T/total/t.lst" "$IN"
[ -f "$T/total/t.classes" ] || fail "t.classes not written"
# 14 over 3: 5 5 4; dog has 4 of 5.
run subset "$IN" -o "$T/total/u.lst" --total 14
expect_rc 1
expect_stderr "'dog' (label 1): 4 rows, 5 wanted"
run subset "$IN" -o "$T/total/u.lst" --total 14 --allow-short --quiet
expect_rc 0
expect_eq "total short rows" "$(rows "$T/total/u.lst")" 13

# ---- class names --------------------------------------------------------------------
# No classes file: labels in messages, none written.
cp "$IN" "$T/nonames.lst"
run subset "$T/nonames.lst" -o "$T/nn/out.lst" --per-class 5
expect_rc 1
expect_stderr "  label 1: 4 rows, 5 wanted"
run subset "$T/nonames.lst" -o "$T/nn/out.lst" --per-class 2
expect_rc 0
expect_stderr "no classes file beside"
[ ! -e "$T/nn/out.classes" ] || fail "classes file invented"
grep -qF "is not this list's" "$T/stderr" && fail "a stale-classes warning with none there"
# one left there earlier would name the new list's labels (pack takes
# it by name): warned of, even though nothing of it is read (before: not
# a word)
printf 'old\nnames\n' >"$T/nn/out.classes"
run subset "$T/nonames.lst" -o "$T/nn/out.lst" --per-class 2
expect_rc 0
expect_stderr "warning: '$T/nn/out.classes' is not this list's: it was there before, and pack would take its names for the new list's labels"
# --classes FILE.
printf 'kitten\npuppy\nduck\n' >"$T/names.txt"
run subset "$T/nonames.lst" -o "$T/nn/named_val.lst" --per-class 5 --classes "$T/names.txt"
expect_rc 1
expect_stderr "'puppy' (label 1): 4 rows, 5 wanted"
run subset "$T/nonames.lst" -o "$T/nn/named_val.lst" --per-class 1 --classes "$T/names.txt" --quiet
expect_rc 0
cmp -s "$T/names.txt" "$T/nn/named.classes" || fail "--classes not copied to named.classes"
# classes.txt beside the list (imshard convert's layout).
mkdir -p "$T/conv"
cp "$IN" "$T/conv/train.lst"
cp "$T/names.txt" "$T/conv/classes.txt"
run subset "$T/conv/train.lst" -o "$T/conv/small.lst" --per-class 1 --quiet
expect_rc 0
cmp -s "$T/names.txt" "$T/conv/small.classes" || fail "classes.txt not carried to small.classes"
# A classes file naming fewer classes than the labels: refused.
printf 'one\ntwo\n' >"$T/two.txt"
run subset "$IN" -o "$T/nn/y.lst" --per-class 1 --classes "$T/two.txt"
expect_rc 1
expect_stderr "names 2 classes but '$IN' has label 2"
# A classes file with a duplicate: its own error.
printf 'a\nb\na\n' >"$T/dup.txt"
run subset "$IN" -o "$T/nn/y.lst" --per-class 1 --classes "$T/dup.txt"
expect_rc 1
expect_stderr "line 3: class 'a' repeats line 1"
run subset "$IN" -o "$T/nn/y.lst" --per-class 1 --classes "$T/none.txt"
expect_rc 1
expect_stderr "none.txt"

# ---- im2rec float labels are normalised; extra labels kept --------------------------
printf '0\t3.000000\t0.250000\ta/1.jpg\n1\t3.000000\t0.500000\ta/2.jpg\n2\t0.000000\t1.000000\tb/1.jpg\n' >"$T/im2rec.lst"
run subset "$T/im2rec.lst" -o "$T/im2rec_out.lst" --per-class 1 --allow-short --quiet
expect_rc 0
expect_eq "im2rec rows" "$(rows "$T/im2rec_out.lst")" 2 # labels 0 and 3; 1 and 2 empty
grep -qxF "$(printf '2\t0\t1.000000\tb/1.jpg')" "$T/im2rec_out.lst" || fail "im2rec row not normalised"

# Extra labels that %f cannot hold are kept (before: 1e-07 became
# 0.000000 and 0.1234567 became 0.123457).
printf '0\t0\t1e-07\ta/1.jpg\n1\t0\t0.1234567\ta/2.jpg\n' >"$T/fine.lst"
run subset "$T/fine.lst" -o "$T/fine_out.lst" --per-class 2 --quiet
expect_rc 0
cmp -s "$T/fine.lst" "$T/fine_out.lst" || fail "extra labels changed: $(cat "$T/fine_out.lst")"

# ---- runtime errors ------------------------------------------------------------------
run subset "$T/missing.lst" -o "$T/e/x.lst" --per-class 1
expect_rc 1
expect_stderr "imshard: cannot open '$T/missing.lst': No such file or directory"
printf '0\t1\ta.jpg\n1\t2.5\tb.jpg\n' >"$T/bad.lst"
run subset "$T/bad.lst" -o "$T/e/x.lst" --per-class 1
expect_rc 1
expect_stderr "imshard: cannot read list '$T/bad.lst': line 2: label '2.5' is not an integer"
: >"$T/empty.lst"
run subset "$T/empty.lst" -o "$T/e/x.lst" --per-class 1
expect_rc 1
expect_stderr "the list is empty"
[ ! -e "$T/e" ] || fail "outputs written on failure"

# ---- usage errors -------------------------------------------------------------------
usage_error
usage_error "$IN"
usage_error "$IN" -o "$T/u/x.lst"
expect_stderr "exactly one of --per-class N and --total N"
usage_error "$IN" -o "$T/u/x.lst" --per-class 2 --total 6
usage_error "$IN" -o "$T/u/x.lst" --per-class 0
usage_error "$IN" -o "$T/u/x.lst" --total 0
# 2^64 - 1 was taken for "not given" (before: "give exactly one of").
for o in --per-class --total; do
	usage_error "$IN" -o "$T/u/x.lst" $o 18446744073709551615
	expect_stderr "$o must be between 1 and"
done
usage_error "$IN" -o "$T/u/x.lst" --per-class abc
usage_error "$IN" -o "$T/u/x.lst" --per-class -3
usage_error "$IN" --per-class 3
usage_error "$IN" -o "$T/u/x.lst" --per-class 3 --bogus
usage_error "$IN" "$IN" -o "$T/u/x.lst" --per-class 3
usage_error "$IN" -o "$T/u/x.lst" --per-class 3 --seed x
# -o naming a folder, not a file (it failed late with "Device or resource
# busy", exit 1, after making the folder)
for o in "$T/u/" "$T/u/." "$T/u/.."; do
	usage_error "$IN" -o "$o" --per-class 3
	grep -qF -- "-o takes a file name" "$T/stderr" || fail "-o $o: $(cat "$T/stderr")"
done
[ ! -e "$T/u" ] || fail "usage error created outputs"

# ---- outputs over inputs -----------------------------------------------------------
# -o naming the input list, by its name, another spelling or a link, or
# the classes file read, and an OUT whose classes file would be the input:
# refused before anything is read or written. The old code replaced the
# input with its own subset.
mkdir -p "$T/self"
cp "$IN" "$T/self/in_train.lst"
cp "$T/lists/data.classes" "$T/self/in.classes"
ln -s in_train.lst "$T/self/link.lst"
cp "$IN" "$T/self/names.classes"
cp "$T/lists/data.classes" "$T/self/names.txt"
before=$(cat "$T/self"/* | cksum)
for o in "$T/self/in_train.lst" "$T/self/./in_train.lst" "$T/self/link.lst" "$T/self/in.classes"; do
	usage_error "$T/self/in_train.lst" -o "$o" --per-class 2
	expect_stderr "write the subset elsewhere"
done
usage_error "$T/self/names.classes" -o "$T/self/names.lst" --per-class 2 --classes "$T/self/names.txt"
expect_stderr "would write its classes file over the input list"
expect_eq "inputs after refusals" "$(cat "$T/self"/* | cksum)" "$before"
expect_eq "files after refusals" "$(ls "$T/self" | paste -sd,)" "in.classes,in_train.lst,link.lst,names.classes,names.txt"

# ---- all or nothing -----------------------------------------------------------
# A folder at the classes file's name: one line, and no list written
# either (before: the list was written, then the classes file failed,
# exit 1, leaving a list without its class names).
mkdir -p "$T/aon/small.classes"
run subset "$IN" -o "$T/aon/small_train.lst" --per-class 2
expect_rc 1
[ "$(wc -l <"$T/stderr")" -eq 1 ] || fail "not one line: $(cat "$T/stderr")"
expect_stderr "small.classes' is a folder"
expect_eq "files after a failed subset" "$(ls "$T/aon" | paste -sd,)" "small.classes"
run subset "$IN" -o "$T/aon/small.classes" --per-class 2
expect_rc 1
expect_stderr "is a folder"
run subset "$IN" -o "$T/aon2/s_train.lst" --per-class 2 --quiet
expect_rc 0
cmp -s "$T/lists/data.classes" "$T/aon2/s.classes" || fail "classes not written beside the list"
expect_eq "files after a subset" "$(ls -A "$T/aon2" | paste -sd,)" "s.classes,s_train.lst"

# ---- labels are bounded class ids ---------------------------------------------
# A label of 2147483647 once sized subset's per-class arrays to 16 GB; run
# under a memory limit so that, unfixed, it fails instead.
mkdir -p "$T/lab"
printf '0\t2147483647\ta.jpg\n1\t0\tb.jpg\n' >"$T/lab/h.lst"
set +e
# ASan reserves terabytes: cap allocations instead. grep reads all of
# ldd's output: with -q it may exit first, and pipefail then reports
# ldd's SIGPIPE as "no libasan" (tests/cli/lib.sh's memcap)
if ldd "$IMSHARD" 2>/dev/null | grep libasan >/dev/null; then
	cap='export ASAN_OPTIONS="${ASAN_OPTIONS:-}:allocator_may_return_null=1:max_allocation_size_mb=4000"'
else
	cap='ulimit -v 4000000'
fi
(eval "$cap"; exec "$IMSHARD" subset "$T/lab/h.lst" -o "$T/lab/o/h.lst" --per-class 1) \
	>"$T/stdout" 2>"$T/stderr"
rc=$?
set -e
expect_rc 1
expect_stderr "cannot read list '$T/lab/h.lst': line 1: label 2147483647 is far beyond the 2 distinct labels"
[ "$(wc -l <"$T/stderr")" -eq 1 ] || fail "not one line: $(cat "$T/stderr")"
[ ! -e "$T/lab/o" ] || fail "output written for a huge label"
printf '0\t1e2\ta.jpg\n' >"$T/lab/e.lst"
run subset "$T/lab/e.lst" -o "$T/lab/o/e.lst" --per-class 1
expect_rc 1
expect_stderr "line 1: label '1e2' has an exponent"
# Sparse labels with --max-label: each label present is a class.
printf '0\t0\ta.jpg\n1\t0\tb.jpg\n2\t3000\tc.jpg\n3\t3000\td.jpg\n' >"$T/lab/sp.lst"
run subset "$T/lab/sp.lst" -o "$T/lab/o/sp.lst" --per-class 1 --max-label 3000 --allow-short --quiet
expect_rc 0
expect_eq "sparse rows" "$(cut -f2 "$T/lab/o/sp.lst" | sort -n | paste -sd,)" "0,3000"
run subset "$T/lab/sp.lst" -o "$T/lab/o/sp.lst" --per-class 1 --max-label 2999
expect_rc 1
expect_stderr "line 3: label 3000 is above --max-label 2999"
grep -qF -- "--max-label" <("$IMSHARD" subset --help) || fail "--help lacks --max-label"

# A row naming an image an earlier row names is kept, and may be taken
# more than once: a warning, even with --quiet, counts such rows in IN and
# in OUT, with the first of IN's and the row it repeats.
mkdir -p "$T/rep"
printf '0\t0\ta.jpg\n1\t0\tb.jpg\n2\t1\tc.jpg\n3\t0\t./a.jpg\n4\t1\ta.jpg\n' >"$T/rep/r.lst"
run subset "$T/rep/r.lst" -o "$T/rep/o.lst" --per-class 3 --allow-short --quiet
expect_rc 0
expect_eq "repeated rows kept" "$(rows "$T/rep/o.lst")" 5
expect_stderr "warning: 2 of 5 rows of '$T/rep/r.lst' repeat an earlier row's image (1 with another label), the first: row 3 './a.jpg' repeats row 0"
expect_stderr "the subset holds 2 such rows"
[ "$(wc -l <"$T/stderr")" -eq 1 ] || fail "repeats warning is not one line: $(cat "$T/stderr")"
run subset "$IN" -o "$T/rep/none.lst" --per-class 2 --quiet
expect_rc 0
expect_eq "no repeats, no warning" "$(wc -c <"$T/stderr" | tr -d ' ')" 0

# ---- a failed run leaves no folder it made -----------------------------------
# A write that fails (a file-size limit standing in for a full disk) takes
# back the folders made for -o, as extract and sample do, and keeps the
# folder that was there (before: they stayed, empty). SIGXFSZ is ignored
# so that the write fails with EFBIG.
mkdir -p "$T/big"
for i in $(seq 0 199); do
	printf '%d\t%d\tsome/long/folder/name/image_number_%05d.jpg\n' "$i" $((i % 2)) "$i"
done >"$T/big/b.lst"
set +e
(trap '' XFSZ; ulimit -f 4; exec "$IMSHARD" subset "$T/big/b.lst" -o "$T/big/new/deep/b.lst" --per-class 100) \
	>"$T/stdout" 2>"$T/stderr"
rc=$?
set -e
expect_rc 1
expect_stderr "File too large"
# the file named is the output, not a temporary of a temporary (before:
# "cannot write list 'b.lst.tmp.N': cannot write 'b.lst.tmp.N.tmp.N'")
expect_stderr "imshard: subset: cannot write '$T/big/new/deep/b.lst': File too large"
! grep -q '\.tmp\.' "$T/stderr" || fail "the message names a temporary: $(cat "$T/stderr")"
# and without the trap: an error, not a kill by SIGXFSZ (exit 153)
set +e
(ulimit -f 4; exec "$IMSHARD" subset "$T/big/b.lst" -o "$T/big/new/deep/b.lst" --per-class 100) \
	>"$T/stdout" 2>"$T/stderr"
rc=$?
set -e
expect_rc 1
[ ! -e "$T/big/new" ] || fail "a subset past a file-size limit left: $(find "$T/big/new")"
[ ! -e "$T/big/new" ] || fail "a failed subset left the folders it made: $(find "$T/big/new")"
[ -d "$T/big" ] || fail "a failed subset removed the folder that was there"
mkdir -p "$T/big/old"
set +e
(trap '' XFSZ; ulimit -f 4; exec "$IMSHARD" subset "$T/big/b.lst" -o "$T/big/old/b.lst" --per-class 100) \
	>"$T/stdout" 2>"$T/stderr"
rc=$?
set -e
expect_rc 1
[ -d "$T/big/old" ] || fail "a failed subset removed an empty folder it did not make"

if [ "$failures" -ne 0 ]; then
	echo "test_subset.sh: $failures failure(s)" >&2
	exit 1
fi
echo "test_subset.sh: ok"
