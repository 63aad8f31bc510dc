# lib.sh - helpers for imshard's CLI tests (sourced by tests/cli/test_*.sh).
#
# Env from CTest: IMSHARD (binary), IMS_FIXTURES (make_images binary),
# IMS_TMP (scratch), IMS_SRC (source tree), IMS_MPI (1: built with MPI).
set -uo pipefail

: "${IMSHARD:?IMSHARD must point at the imshard binary}"
source "$(dirname "${BASH_SOURCE[0]}")/scratch.sh" cli
failures=0
checks=0

# have_mpi: several ranks can be run here: mpirun is on PATH and the
# binaries were built with MPI (a build without it refuses to run as one
# of several ranks, which test_train.sh checks).
have_mpi() {
  [ "${IMS_MPI:-1}" = 1 ] && command -v mpirun >/dev/null
}

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# run CMD...: runs a command, keeping its exit code in $rc, stdout in
# $T/out and stderr in $T/err.
run() {
  "$@" >"$T/out" 2>"$T/err"
  rc=$?
}

# expect CODE CMD...: runs a command and checks its exit code.
expect() {
  local want=$1
  shift
  run "$@"
  checks=$((checks + 1))
  if [ "$rc" != "$want" ]; then
    fail "exit $rc, expected $want: $*"
    sed 's/^/  stderr: /' "$T/err" | head -20 >&2
  fi
}

# contains FILE TEXT: FILE holds TEXT (fixed string).
contains() {
  checks=$((checks + 1))
  grep -qF -- "$2" "$1" || { fail "'$1' lacks '$2'"; sed 's/^/  | /' "$1" | head -20 >&2; }
}

lacks() {
  checks=$((checks + 1))
  ! grep -qF -- "$2" "$1" || fail "'$1' holds '$2'"
}

# one_line FILE: FILE is a single line starting with "imshard: ".
one_line() {
  checks=$((checks + 1))
  local n
  n=$(wc -l <"$1")
  [ "$n" = 1 ] && head -c 9 "$1" | grep -q '^imshard: ' ||
    { fail "'$1' is not one 'imshard: ' line ($n lines)"; sed 's/^/  | /' "$1" | head >&2; }
}

same() {
  checks=$((checks + 1))
  [ "$1" = "$2" ] || fail "'$1' != '$2' ${3:-}"
}

exists() {
  checks=$((checks + 1))
  [ -e "$1" ] || fail "missing '$1'"
}

absent() {
  checks=$((checks + 1))
  [ ! -e "$1" ] || fail "'$1' should not exist"
}

# wait_for CMD...: polls CMD every 0.05 s for up to 60 s; 1 if it never held.
wait_for() {
  local i
  for ((i = 0; i < 1200; i++)); do
    "$@" && return 0
    sleep 0.05
  done
  return 1
}

# "${heed_int[@]}" CMD...: execs CMD with SIGINT's default action, as a
# command typed at a terminal starts (bash starts a script's background
# jobs ignoring it); an array, not a function, so that $! is CMD's pid
heed_int=(/usr/bin/python3 -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execv(sys.argv[1], sys.argv[1:])')

# json FILE EXPR: evaluates a Python expression on the JSON in FILE (as j).
json() {
  /usr/bin/python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"
}

# memcap: shell words that cap a command's memory at about 4 GB, for tests
# whose unfixed failure was to exhaust it. AddressSanitizer builds reserve
# terabytes of address space, so there a cap on single allocations stands
# in for ulimit -v.
memcap() {
  # grep reads all of ldd's output: with -q it could exit first, and
  # pipefail would then report ldd's SIGPIPE as "no libasan"
  if ldd "$IMSHARD" 2>/dev/null | grep libasan >/dev/null; then
    echo 'export ASAN_OPTIONS="${ASAN_OPTIONS:-}:allocator_may_return_null=1:max_allocation_size_mb=4000";'
  else
    echo 'ulimit -v 4000000;'
  fi
}

# under_limits "LIMITS" "THREADS" PROGRAM ARGS...: PROGRAM ARGS --threads T
# under ulimit -v L, for each L (KB) and T, each killed after 20 s. Each
# run must end, with exit 0 or a word: imshard's line or libgomp's for what
# did not fit, the loader's for a library it could not map (127), or
# OpenBLAS's when it cannot start its threads (it raises SIGINT then). One
# spinning on a buffer that does not fit (timeout's 124) fails. Callers
# skip it in AddressSanitizer builds, which reserve terabytes of address
# space (asan_build).
under_limits() {
  local lim threads ok
  for lim in $1; do
    for threads in $2; do
      run bash -c 'ulimit -v "$1"; exec timeout 20 "${@:2}"' _ "$lim" "${@:3}" \
        --threads "$threads"
      checks=$((checks + 1))
      ok=0
      case $rc in
        0) ok=1 ;;
        1) grep -qE '^(imshard|libgomp): ' "$T/err" && ok=1 ;;
        127) grep -q 'error while loading shared libraries' "$T/err" && ok=1 ;;
        130) grep -q '^OpenBLAS blas_thread_init: ' "$T/err" && ok=1 ;;
      esac
      if [ "$rc" = 124 ]; then
        fail "ulimit -v $lim, --threads $threads: still running after 20 s: ${*:3}"
      elif [ "$ok" = 0 ]; then
        fail "ulimit -v $lim, --threads $threads: exit $rc: ${*:3}"
        sed 's/^/  | /' "$T/err" | head >&2
      fi
    done
  done
}

# asan_build: whether imshard was built with AddressSanitizer (grep reads
# all of ldd's output, see memcap).
asan_build() {
  ldd "$IMSHARD" 2>/dev/null | grep libasan >/dev/null
}

# as_user CMD...: runs CMD as a user whom file permissions bind: as root,
# with the two capabilities that pass them by (dac_override,
# dac_read_search) dropped by setpriv (util-linux); plainly otherwise.
as_user() {
  if [ "$(id -u)" = 0 ]; then
    setpriv --bounding-set=-dac_override,-dac_read_search \
      --inh-caps=-dac_override,-dac_read_search "$@"
  else
    "$@"
  fi
}

# permissions_bind: whether as_user meets file permissions here (a file
# of mode 000 cannot be read through it). Not so as root without setpriv
# or the right to drop capabilities: callers skip their checks with a note.
permissions_bind() {
  local f="$T/.permissions-probe" r
  as_user true >/dev/null 2>&1 || return 1 # setpriv missing or not allowed
  : >"$f" && chmod 000 "$f" || return 1
  as_user cat "$f" >/dev/null 2>&1
  r=$?
  rm -f "$f"
  [ "$r" != 0 ]
}

finish() {
  echo "$checks checks, $failures failed"
  if [ "$failures" = 0 ]; then
    scratch_done 1
    exit 0
  fi
  scratch_done 0
  exit 1
}
