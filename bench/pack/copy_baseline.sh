#!/usr/bin/env bash
# copy_baseline.sh SRC DST - the plain file-copy baseline of bench/pack:
# `cp -r SRC DST` then `sync -f DST` (syncfs of DST's file system), so the
# copy is durably written as pack's fsync'd shards are. DST must not exist.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: copy_baseline.sh SRC DST" >&2; exit 2; }
[ ! -e "$2" ] || { echo "copy_baseline: '$2' exists" >&2; exit 2; }
cp -r -- "$1" "$2"
sync -f -- "$2"
