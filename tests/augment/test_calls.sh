#!/usr/bin/env bash
# The call graph between augment/'s source files is acyclic: each file
# calls only files below it (codec.c -> jpeg.c, png.c, resize.c ->
# image.c), so each can be read and tested from the bottom up. Read from
# the archive's symbol tables: who defines each global, who uses it.
# Usage: test_calls.sh libimshard_augment.a
set -euo pipefail
lib=$1
# nm -P: "lib[file.c.o]: symbol TYPE ..."
edges=$(nm -A -P "$lib" | awk '
  { f = $1; sub(/^.*\[/, "", f); sub(/\.o\]:$/, "", f) }
  $3 ~ /^[TDRB]$/ { def[$2] = f; next }
  $3 == "U" { n++; uf[n] = f; us[n] = $2 }
  END { for (i = 1; i <= n; i++)
          if ((us[i] in def) && def[us[i]] != uf[i]) print uf[i], def[us[i]] }' |
  sort -u)
[ -n "$edges" ] || { echo "no calls between augment's files found in $lib" >&2; exit 1; }
printf '%s\n' "$edges"
loops=$(printf '%s\n' "$edges" | tsort 2>&1 >/dev/null || true)
if [ -n "$loops" ]; then
  echo "augment's files call each other in a cycle:" >&2
  printf '%s\n' "$loops" >&2
  exit 1
fi
echo "acyclic"
