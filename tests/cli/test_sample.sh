#!/usr/bin/env bash
# test_sample.sh - `imshard sample`: --help, exit codes, one-line usage
# errors, what it writes (counts, formats by magic), refusal without
# --force, --force rules, and byte-identical output across runs.
# Environment: IMSHARD (the binary), IMS_TMP (scratch folder).
set -euo pipefail

: "${IMSHARD:?IMSHARD must name the imshard binary}"
source "$(dirname "$0")/scratch.sh" cli_sample
trap scratch_on_exit EXIT

fail() {
	echo "FAIL (line ${BASH_LINENO[0]}): $*" >&2
	exit 1
}

# run WANT_RC CMD...: runs CMD with stdout/stderr in $T/out, $T/err and
# checks its exit status.
run() {
	local want=$1
	shift
	local rc=0
	"$@" >"$T/out" 2>"$T/err" || rc=$?
	[ "$rc" -eq "$want" ] ||
		fail "expected exit $want, got $rc: $*; stderr: $(cat "$T/err")"
}

lines() { wc -l <"$1" | tr -d ' '; }

# One-line usage error on stderr, nothing on stdout.
usage_error() {
	run 2 "$IMSHARD" sample "$@"
	[ "$(lines "$T/err")" -eq 1 ] || fail "usage error for '$*' is not one line: $(cat "$T/err")"
	grep -q '^imshard: sample: ' "$T/err" || fail "usage error for '$*' lacks the prefix: $(cat "$T/err")"
	[ ! -s "$T/out" ] || fail "usage error for '$*' wrote to stdout"
}

count_files() { find "$1" -type f -name "$2" | wc -l | tr -d ' '; }
count_dirs() { find "$1" -mindepth 1 -maxdepth 1 -type d | wc -l | tr -d ' '; }
magic() { head -c "$2" "$1" | od -An -tx1 | tr -d ' \n'; }

# --help: every option documented, the class list, exit 0, stdout only.
run 0 "$IMSHARD" sample --help
for word in 'usage: imshard sample OUTDIR' --classes --per-class --seed \
	--force --threads --quiet circle checkerboard zigzag 'index % 5' Example; do
	grep -q -- "$word" "$T/out" || fail "--help does not mention '$word'"
done
[ ! -s "$T/err" ] || fail "--help wrote to stderr"
run 0 "$IMSHARD" sample -h
grep -q -- '--per-class' "$T/out" || fail "-h is not --help"

# Bad usage: exit 2, one line.
usage_error
usage_error --bogus "$T/x"
usage_error "$T/x" --classes 1
usage_error "$T/x" --classes 999
usage_error "$T/x" --classes ten
usage_error "$T/x" --per-class 0
usage_error "$T/x" --per-class 100001
usage_error "$T/x" --seed -1
usage_error "$T/x" --per-class
usage_error "$T/x" "$T/y"
usage_error "$T/x" --force=1
[ ! -e "$T/x" ] || fail "a usage error created the output folder"

# Defaults: 10 classes x 40 images, mostly JPEG, every 5th PNG.
run 0 "$IMSHARD" sample "$T/d"
[ ! -s "$T/out" ] || fail "sample wrote to stdout"
[ "$(lines "$T/err")" -eq 1 ] || fail "expected one summary line, got: $(cat "$T/err")"
grep -Eq "^imshard: wrote 400 images in 10 classes to '$T/d' \(" "$T/err" ||
	fail "unexpected summary: $(cat "$T/err")"
[ "$(count_dirs "$T/d")" -eq 10 ] || fail "expected 10 class folders"
[ "$(count_files "$T/d" '*')" -eq 400 ] || fail "expected 400 files"
[ "$(count_files "$T/d" '*.png')" -eq 80 ] || fail "expected 80 PNG files"
[ "$(count_files "$T/d" '*.jpg')" -eq 320 ] || fail "expected 320 JPEG files"
[ ! -e "$T/d/.imshard-sample.tmp" ] || fail "work folder left behind"
for dir in "$T"/d/*/; do
	[ "$(count_files "$dir" '*')" -eq 40 ] || fail "expected 40 files in $dir"
done
first=$(find "$T/d" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | LC_ALL=C sort | head -1)
[ "$first" = checkerboard ] || fail "first class is '$first', not checkerboard"
[ "$(magic "$T/d/circle/circle_0000.jpg" 3)" = ffd8ff ] || fail "circle_0000.jpg is not JPEG"
[ "$(magic "$T/d/circle/circle_0004.png" 8)" = 89504e470d0a1a0a ] || fail "circle_0004.png is not PNG"
for f in "$T"/d/*/*.jpg; do
	[ "$(magic "$f" 3)" = ffd8ff ] || fail "$f is not JPEG"
done
for f in "$T"/d/*/*.png; do
	[ "$(magic "$f" 8)" = 89504e470d0a1a0a ] || fail "$f is not PNG"
done

# Not empty, no --force: exit 1, one line naming --force, nothing changed.
cp -a "$T/d" "$T/d.before"
run 1 "$IMSHARD" sample "$T/d" --classes 3
[ "$(lines "$T/err")" -eq 1 ] || fail "refusal is not one line: $(cat "$T/err")"
grep -q -- '--force' "$T/err" || fail "refusal does not mention --force"
grep -q '^imshard: ' "$T/err" || fail "refusal lacks the prefix"
diff -rq "$T/d" "$T/d.before" >/dev/null || fail "a refused run changed the folder"

# Determinism: same options, another run, another thread count: same bytes.
run 0 "$IMSHARD" sample "$T/e" --quiet --threads 1
[ ! -s "$T/err" ] || fail "--quiet printed: $(cat "$T/err")"
diff -rq "$T/d" "$T/e" >/dev/null || fail "two runs with the same seed differ"
cmp -s "$T/d/circle/circle_0000.jpg" "$T/e/circle/circle_0000.jpg" || fail "cmp disagrees"
# Each image depends only on (seed, class, index).
run 0 "$IMSHARD" sample "$T/small" -q --classes 2 --per-class=5
for f in "$T"/small/*/*; do
	rel=${f#"$T"/small/}
	cmp -s "$f" "$T/d/$rel" || fail "$rel differs between --classes 10 and 2"
done
# Another seed: different images.
run 0 "$IMSHARD" sample "$T/s1" -q --seed 1 --classes 2 --per-class 5
if cmp -s "$T/s1/circle/circle_0000.jpg" "$T/d/circle/circle_0000.jpg"; then
	fail "--seed 1 gave the same image as --seed 0"
fi

# --force replaces an earlier sample, also dropping classes beyond N.
echo notes >"$T/d/README.txt"
run 0 "$IMSHARD" sample "$T/d" --force --classes 3 --per-class 5 -q
[ "$(count_dirs "$T/d")" -eq 3 ] || fail "--force left $(count_dirs "$T/d") class folders"
[ "$(count_files "$T/d" '*.jpg')" -eq 12 ] || fail "--force: expected 12 JPEG"
[ "$(count_files "$T/d" '*.png')" -eq 3 ] || fail "--force: expected 3 PNG"
[ -f "$T/d/README.txt" ] || fail "--force removed a loose file"
rm "$T/d/README.txt"
run 0 "$IMSHARD" sample "$T/f" --classes 3 --per-class 5 -q
diff -rq "$T/d" "$T/f" >/dev/null || fail "--force output differs from a fresh run"

# --force refuses a folder it did not write, and keeps it.
mkdir "$T/d/holiday"
run 1 "$IMSHARD" sample "$T/d" --force -q
grep -q holiday "$T/err" || fail "refusal does not name the foreign folder"
[ -d "$T/d/holiday" ] || fail "foreign folder removed"
rmdir "$T/d/holiday"

# --force with a file or a link at the name of a class it writes: refused
# before anything changes (before: the earlier sample's folders were
# removed, then moving that class into place failed, leaving the classes
# before it, which looked like a whole smaller sample).
run 0 "$IMSHARD" sample "$T/g" --classes 4 --per-class 2 -q
rm -r "$T/g/crescent"
touch "$T/g/crescent"
cp -a "$T/g" "$T/g.before"
run 1 "$IMSHARD" sample "$T/g" --force --classes 4 --per-class 3 -q
[ "$(lines "$T/err")" -eq 1 ] || fail "refusal is not one line: $(cat "$T/err")"
grep -q "'crescent' is not a folder" "$T/err" || fail "refusal does not name crescent: $(cat "$T/err")"
diff -rq "$T/g" "$T/g.before" >/dev/null || fail "a refused --force changed the folder"
rm "$T/g/crescent"
ln -s "$T/d/circle" "$T/g/crescent"
run 1 "$IMSHARD" sample "$T/g" --force --classes 4 --per-class 3 -q
[ -d "$T/g/cross" ] || fail "a refused --force removed a class folder"
# a class this run does not write may be a file: it is left alone
run 0 "$IMSHARD" sample "$T/g" --force --classes 2 --per-class 3 -q
[ -L "$T/g/crescent" ] || fail "--force removed a link it does not write over"

# An existing empty folder is fine; an output that is a file is not.
mkdir "$T/empty"
run 0 "$IMSHARD" sample "$T/empty" -q --per-class 1 --classes 2
[ "$(count_files "$T/empty" '*')" -eq 2 ] || fail "expected 2 files in the empty folder"
touch "$T/afile"
run 1 "$IMSHARD" sample "$T/afile" -q
[ "$(lines "$T/err")" -eq 1 ] || fail "error is not one line: $(cat "$T/err")"

# CMD run with SIGINT's default action, as typed at a terminal (bash
# starts a script's background jobs ignoring it, and sample keeps it
# ignored); as lib.sh's heed_int, which this script does not source
heed_int=(/usr/bin/python3 -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execv(sys.argv[1], sys.argv[1:])')

# A run interrupted into a folder it created removes that folder again:
# nothing that looks begun is left (before: an empty OUTDIR stayed).
# interrupt DIR: a large sample into DIR, Ctrl-C once it is writing; its
# exit status in rc
interrupt() {
	"${heed_int[@]}" "$IMSHARD" sample "$1" --per-class 100000 --classes 10 -q 2>"$T/int.err" &
	local pid=$!
	for _ in $(seq 1 2000); do
		[ -e "$1/.imshard-sample.tmp" ] && break
		sleep 0.005
	done
	[ -e "$1/.imshard-sample.tmp" ] || fail "the interrupted sample never started writing"
	kill -INT $pid
	rc=0
	wait $pid || rc=$?
	[ "$rc" -eq 1 ] || fail "interrupted sample exited $rc, not 1"
	grep -q "interrupted" "$T/int.err" || fail "interrupted sample did not say so: $(cat "$T/int.err")"
}
interrupt "$T/int/new"
[ ! -e "$T/int/new" ] || fail "an interrupted sample left the folder it made: $(ls -A "$T/int/new")"
# int/ was made by that run too (a parent of new/): it goes as well
[ ! -e "$T/int" ] || fail "an interrupted sample left the parent folder it made: $T/int"
# ... but a folder that was there before stays.
mkdir -p "$T/int/kept"
interrupt "$T/int/kept"
[ -d "$T/int/kept" ] || fail "an interrupted sample removed a folder it did not make"
[ -z "$(ls -A "$T/int/kept")" ] || fail "an interrupted sample left files: $(ls -A "$T/int/kept")"

echo "cli_sample: all checks passed"
