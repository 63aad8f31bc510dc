# bench/lib.sh - what the benchmark scripts (bench/*/run.sh,
# bench/train/memory.sh) share: where they are, the tools they need, timing
# one run the same way, interleaving rounds, pinning and the sample data.
# Sourced first thing after `set -euo pipefail`:
#
#     source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
#
# It sets LC_ALL=C (decimal points in EPOCHREALTIME and awk), here (the
# script's folder), repo (the repository root), me (the script's name, for
# messages) and TIME (GNU time's path).
# shellcheck shell=bash disable=SC2034 # the variables set are the caller's

export LC_ALL=C
here=$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
me=$(basename "${BASH_SOURCE[1]}")
TIME=/usr/bin/time

# abspath P: P, relative paths taken from the repository root.
abspath() { case "$1" in /*) echo "$1" ;; *) echo "$repo/$1" ;; esac; }

die() { echo "$me: $*" >&2; exit 1; }

# bench_help: the script's header comment (line 2 to `set -euo`) as its
# --help, then exit 0.
bench_help() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0; }

# bench_bad_arg ARG: exit 2 with one line.
bench_bad_arg() { echo "$me: unknown argument '$1' (see --help)" >&2; exit 2; }

# bench_args "$@": the arguments of a script that takes only --help.
bench_args() {
	local arg
	for arg in "$@"; do
		case "$arg" in
		-h | --help) bench_help ;;
		*) bench_bad_arg "$arg" ;;
		esac
	done
}

# bench_need_count NAME...: stop unless each named setting (a list: each
# of its words) is a whole number of 1 or more, before anything runs:
# ROUNDS=abc would otherwise stop deep in the script on "abc: unbound
# variable", ROUNDS=0 run nothing and exit 0, BATCH=0 go to every run.
bench_need_count() {
	local name w
	for name in "$@"; do
		for w in ${!name}; do
			[[ $w =~ ^[1-9][0-9]*$ ]] || die "$name must be a whole number of 1 or more, got '$w'"
		done
		[ -n "${!name// /}" ] || die "$name must be a whole number of 1 or more, got ''"
	done
}

# bench_need_whole NAME...: stop unless each named setting is a whole
# number of 0 or more (a seed, a limit where 0 means none).
bench_need_whole() {
	local name
	for name in "$@"; do
		[[ ${!name} =~ ^(0|[1-9][0-9]*)$ ]] || die "$name must be a whole number of 0 or more, got '${!name}'"
	done
}

# bench_need_flag NAME...: stop unless each named setting is 0 or 1.
bench_need_flag() {
	local name
	for name in "$@"; do
		case "${!name}" in 0 | 1) ;; *) die "$name must be 0 or 1, got '${!name}'" ;; esac
	done
}

# bench_need_number NAME...: stop unless each named setting is a number
# above 0 (0.05, 1e-3); bench_need_number_or_empty: or empty (not set).
bench_need_number_or_empty() {
	local name
	for name in "$@"; do
		[ -z "${!name}" ] || bench_need_number "$name"
	done
}
bench_need_number() {
	local name
	for name in "$@"; do
		[[ ${!name} =~ ^([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$ ]] &&
			awk -v x="${!name}" 'BEGIN { exit !(x + 0 > 0) }' ||
			die "$name must be a number above 0, got '${!name}'"
	done
}

# bench_own_work FILE...: stop unless $WORK is new, empty, or holds one of
# the FILEs (what the script writes there first): the script removes its
# logs and outputs there by name (WORK/logs/*, WORK/r1, WORK/out ...), so
# a folder of other things is refused rather than have a logs/ of its own
# emptied. The message names the first FILE.
bench_own_work() {
	[ ! -e "$WORK" ] || [ -d "$WORK" ] || die "WORK='$WORK' is not a folder"
	[ ! -d "$WORK" ] || [ -z "$(ls -A "$WORK")" ] || {
		local f
		for f in "$@"; do [ ! -e "$WORK/$f" ] || return 0; done
		die "WORK='$WORK' holds files of its own (no $1 of an earlier run): name a new or empty folder"
	}
}

# bench_mark_work MARK: WORK made and MARK written in it, so the next run
# knows the folder as its own (bench_own_work MARK).
bench_mark_work() {
	mkdir -p "$WORK" && touch "$WORK/$1" || die "cannot write in WORK='$WORK'"
}

# bench_need_bin PATH NAME HINT: stop unless PATH is an executable.
bench_need_bin() { [ -x "$1" ] || die "cannot find $2 at '$1' ($3)"; }

# bench_install PKG...: Debian packages a run needs, installed when this
# runs as root with apt-get; otherwise the run stops and says what to
# install. Nothing when no package is named.
bench_install() {
	[ $# -gt 0 ] || return 0
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		echo "$me: installing $* (apt-get)" >&2
		apt-get install -y "$@" >&2 || die "apt-get install $* failed"
	else
		die "missing $* (apt-get install $*)"
	fi
}

# bench_gnu_time: GNU time at $TIME (peak RSS, CPU seconds), installed
# when missing (bench_install).
bench_gnu_time() {
	{ [ -x "$TIME" ] && "$TIME" --version 2>&1 | grep -q GNU; } || bench_install time
}

# ---- timing one run -----------------------------------------------------------

# Busy clock ticks of the whole machine so far (user nice system irq
# softirq steal from /proc/stat).
bench_busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat; }
CLK_TCK=$(getconf CLK_TCK)

# bench_cpu_bg USR SYS BUSY0 BUSY1: cpu (the run's user + system seconds)
# and bg (cores the rest of the machine kept busy meanwhile: all busy time
# in /proc/stat minus the run's own, over $wall).
bench_cpu_bg() {
	cpu=$(awk -v u="$1" -v s="$2" 'BEGIN { printf "%.2f", u + s }')
	bg=$(awk -v a="$3" -v b="$4" -v hz="$CLK_TCK" -v c="$cpu" -v w="$wall" \
		'BEGIN { x = ((b - a) / hz - c) / (w > 0 ? w : 1); printf "%.2f", x < 0 ? 0 : x }')
}

# bench_timed OUT ERR TF CMD...: CMD under GNU time (-f '%e %M %U %S' into
# TF), stdout to OUT and stderr to ERR (both into OUT when ERR is OUT).
# Sets rc, wall (bash's microsecond clock around the run: %e has 10 ms
# steps), rss (peak KiB), cpu and bg (bench_cpu_bg).
bench_timed() {
	local out=$1 err=$2 tf=$3 busy0 busy1 t0 t1 usr sys
	shift 3
	rc=0
	busy0=$(bench_busy_ticks)
	t0=$EPOCHREALTIME
	if [ "$out" = "$err" ]; then
		"$TIME" -f '%e %M %U %S' -o "$tf" "$@" >"$out" 2>&1 || rc=$?
	else
		"$TIME" -f '%e %M %U %S' -o "$tf" "$@" >"$out" 2>"$err" || rc=$?
	fi
	t1=$EPOCHREALTIME
	busy1=$(bench_busy_ticks)
	read -r wall rss usr sys < <(tail -n1 "$tf")
	wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", b - a }')
	bench_cpu_bg "$usr" "$sys" "$busy0" "$busy1"
}

# ---- rounds, contenders, pinning ---------------------------------------------

# bench_order ROUND NAME...: the names in order, reversed in even rounds
# (ABBA), so drift over a run favours none; into the array order.
bench_order() {
	local r=$1 i
	shift
	order=("$@")
	if ((r % 2 == 0)); then
		order=()
		for ((i = $#; i >= 1; i--)); do order+=("${!i}"); done
	fi
}

# bench_only: keeps the contenders (array) that $ONLY names; all when ONLY
# is empty. Stops when it names none of them, and says which names it
# holds that are no contender (a typo, or one this machine left out).
bench_only() {
	[ -n "${ONLY:-}" ] || return 0
	local picked=() c
	for c in "${contenders[@]}"; do
		case " $ONLY " in *" $c "*) picked+=("$c") ;; esac
	done
	[ ${#picked[@]} -gt 0 ] || die "ONLY='$ONLY' names none of: ${contenders[*]}"
	for c in $ONLY; do
		case " ${contenders[*]} " in
		*" $c "*) ;;
		*) echo "$me: ONLY names $c, which is none of the contenders here: left out" >&2 ;;
		esac
	done
	contenders=("${picked[@]}")
}

# bench_prio NAME: with PRIO set, the command (array cmd) runs under
# chrt -f PRIO (real-time FIFO; needs root), and one-thread contenders
# (names ending _t1) under taskset -c 1 too, so other work on a shared
# machine cannot preempt them.
bench_prio() {
	[ -n "${PRIO:-}" ] || return 0
	case "$1" in
	*_t1) cmd=(chrt -f "$PRIO" taskset -c 1 "${cmd[@]}") ;;
	*) cmd=(chrt -f "$PRIO" "${cmd[@]}") ;;
	esac
}

# bench_mpi_setup OTHERWISE WORLD...: mpirun ($MPIRUN) is needed for any
# world above 1 (OTHERWISE: the setting that does without, for the
# message); lets it run as root (containers run as root).
bench_mpi_setup() {
	local otherwise=$1 w
	shift
	for w in "$@"; do
		[ "$w" = 1 ] || command -v "$MPIRUN" >/dev/null ||
			die "cannot find '$MPIRUN' for world $w (install openmpi-bin, set MPIRUN, or $otherwise)"
	done
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
}

# bench_ranks NP: the launch prefix of NP ranks into the array launch:
# with MPI_PIN=1 one core per rank (1 rank: taskset -c 0; more: mpirun
# --bind-to core), else nothing pinned (mpirun --bind-to none: the 1-rank
# run is not pinned either).
bench_ranks() {
	if [ "$1" = 1 ]; then
		launch=()
		[ "${MPI_PIN:-0}" = 1 ] && launch=(taskset -c 0)
	elif [ "${MPI_PIN:-0}" = 1 ]; then
		launch=("$MPIRUN" -np "$1" --bind-to core --map-by core)
	else
		launch=("$MPIRUN" -np "$1" --oversubscribe --bind-to none)
	fi
	return 0
}

# ---- the corpus -----------------------------------------------------------------

# bench_corpus N SEED: $CORPUS made by bench/pack/make_corpus.py (N
# JPEGs, SEED) when its stamp .corpus-nN-seedSEED is absent; a folder that
# holds other things (another size or seed) is refused, not used as if it
# were the corpus asked for.
bench_corpus() {
	local stamp="$CORPUS/.corpus-n$1-seed$2"
	[ ! -e "$stamp" ] || return 0
	[ ! -e "$CORPUS" ] || [ -z "$(ls -A "$CORPUS")" ] ||
		die "'$CORPUS' exists but is not a corpus of $1 images, seed $2 (remove it or set CORPUS)"
	mkdir -p "$CORPUS"
	"$PYTHON" "$repo/bench/pack/make_corpus.py" "$CORPUS" --n "$1" --seed "$2" --jobs 2
	touch "$stamp"
}

# ---- the sample data -------------------------------------------------------------

# bench_sample_data STAMP PER_CLASS [CONVERT ARGS...]: `imshard sample`
# (10 classes of PER_CLASS images) converted with --val-ratio 0.2 into
# $DATA/packed, made when $DATA/STAMP is absent (replacing another size
# this script made); sets train_json and val_json and reads the shards
# once, so that no contender pays for the first read.
bench_sample_data() {
	local stamp="$DATA/$1" per_class=$2
	shift 2
	if [ ! -e "$stamp" ]; then
		if compgen -G "$DATA/.data-pc*" >/dev/null; then
			rm -rf "${DATA:?}/images" "${DATA:?}/packed" "$DATA"/.data-pc*
		fi
		[ ! -e "$DATA" ] || [ -z "$(ls -A "$DATA")" ] ||
			die "'$DATA' exists but holds no sample of $per_class per class (remove it or set DATA)"
		"$IMSHARD" sample "$DATA/images" --classes 10 --per-class "$per_class" --quiet
		"$IMSHARD" convert folder "$DATA/images" -o "$DATA/packed" --val-ratio 0.2 "$@" --quiet
		touch "$stamp"
	fi
	train_json="$DATA/packed/train.json"
	val_json="$DATA/packed/val.json"
	{ [ -s "$train_json" ] && [ -s "$val_json" ]; } || die "no packed splits in '$DATA/packed'"
	# the mark without the whole sample: a run stopped while it was made,
	# a copy cut short
	local f missing=""
	for f in train.lst val.lst; do
		[ -s "$DATA/packed/$f" ] || missing="$missing, no $f"
	done
	compgen -G "$DATA/packed/*.mdb" >/dev/null || missing="$missing, no shards"
	[ -z "$missing" ] || die "'$DATA' holds an incomplete sample (${missing#, }): remove it, and the next run makes it again"
	cat "$DATA/packed"/*.mdb >/dev/null
}
