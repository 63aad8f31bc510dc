#!/usr/bin/env bash
# An interrupted pack (kill -9 at several points, or Ctrl-C) leaves no
# manifest; rerunning the same command gives a complete split identical to
# an uninterrupted pack.
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1

expect 0 "$IMSHARD" sample "$T/s" --classes 6 --per-class 100 --seed 9 --quiet
expect 0 "$IMSHARD" list "$T/s" -o "$T/s" --no-shuffle --quiet
args=(pack "$T/s_train.lst" "$T/s" --encoding jpeg --resize 96 --quality 90 --threads 1 --shard-size 256K --quiet)

expect 0 "$IMSHARD" "${args[@]}" -o "$T/ref/train"
nshards=$(json "$T/ref/train.json" 'len(j["shards"])')
checks=$((checks + 1))
[ "$nshards" -ge 4 ] || fail "reference pack has only $nshards shards"

# Kill after the k-th shard is compacted (and once before any is).
for k in 0 1 3; do
  out="$T/k$k"
  mkdir -p "$out"
  "$IMSHARD" "${args[@]}" -o "$out/train" &
  pid=$!
  for _ in $(seq 1 2000); do
    n=$(ls "$out" 2>/dev/null | grep -c '\.mdb\.compact$' || true)
    p=$(ls "$out" 2>/dev/null | grep -c '\.mdb\.partial$' || true)
    if [ "$k" = 0 ] && [ "$p" -gt 0 ]; then break; fi
    if [ "$k" -gt 0 ] && [ "$n" -ge "$k" ]; then break; fi
    sleep 0.005
  done
  kill -9 $pid 2>/dev/null
  wait $pid 2>/dev/null
  absent "$out/train.json"
  checks=$((checks + 1))
  ls "$out" | grep -qE '\.mdb\.(partial|compact)$' || fail "kill at point $k left no working files: it was not mid-run"
  expect 1 "$IMSHARD" info "$out/train.json"
  contains "$T/err" "incomplete"
  expect 0 "$IMSHARD" "${args[@]}" -o "$out/train"
  expect 0 "$IMSHARD" verify "$out/train.json" --decode
  checks=$((checks + 1))
  ls "$out" | grep -qE '\.mdb\.(partial|compact)$|\.lock$' && fail "leftovers after rerun at point $k"
  for f in $(cd "$T/ref" && ls *.mdb); do
    checks=$((checks + 1))
    cmp -s "$T/ref/$f" "$out/$f" || fail "$f differs from the uninterrupted pack (kill point $k)"
  done
done

# Ctrl-C: a clean stop with a message, nothing published, no leftovers.
"${heed_int[@]}" "$IMSHARD" "${args[@]}" -o "$T/int/train" 2>"$T/int.err" &
pid=$!
for _ in $(seq 1 2000); do
  ls "$T/int" 2>/dev/null | grep -q '\.mdb\.partial$' && break
  sleep 0.005
done
kill -INT $pid
wait $pid
rc=$?
same "$rc" 1 "(exit status after SIGINT)"
contains "$T/int.err" "interrupted"
absent "$T/int/train.json"
checks=$((checks + 1))
ls "$T/int" 2>/dev/null | grep -qE '\.mdb' && fail "SIGINT left shard files behind"
# The folder pack made for the split goes too: nothing looks begun.
checks=$((checks + 1))
[ -e "$T/int" ] && fail "SIGINT left the folder pack made: $(ls "$T/int")"

# SIGINT ignored from the start stays ignored (a script's background job,
# nohup: Ctrl-C is meant for the foreground): the pack goes on to the end
# (before: it stopped at the first SIGINT)
"$IMSHARD" "${args[@]}" -o "$T/ign/train" 2>"$T/ign.err" &
pid=$!
for _ in $(seq 1 2000); do
  ls "$T/ign" 2>/dev/null | grep -q '\.mdb\.partial$' && break
  sleep 0.005
done
kill -INT $pid
wait $pid
same "$?" 0 "(exit status of a pack ignoring SIGINT, sent one)"
expect 0 "$IMSHARD" verify "$T/ign/train.json"
for f in $(cd "$T/ref" && ls *.mdb); do
  checks=$((checks + 1))
  cmp -s "$T/ref/$f" "$T/ign/$f" || fail "$f differs from the uninterrupted pack (SIGINT ignored)"
done
finish
