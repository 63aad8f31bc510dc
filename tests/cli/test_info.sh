#!/usr/bin/env bash
# imshard info: the human summary, the --json keys, damaged inputs, and
# edited manifests' strings escaped.
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1

expect 0 "$IMSHARD" sample "$T/s" --classes 3 --per-class 5 --quiet
expect 0 "$IMSHARD" list "$T/s" -o "$T/s" --no-shuffle --quiet
expect 0 "$IMSHARD" pack "$T/s_train.lst" "$T/s" -o "$T/p/train" --shards 2 --quiet
expect 0 "$IMSHARD" info "$T/p/train.json"
contains "$T/out" "records:    15"
contains "$T/out" "encoding:   keep"
contains "$T/out" "classes:    3 (5 to 5 records each)"
contains "$T/out" "train-00001-of-00002.mdb"
for c in $(ls "$T/s"); do contains "$T/out" "$c"; done

expect 0 "$IMSHARD" info "$T/p/train.json" --json
/usr/bin/python3 - "$T/out" <<'PY' || fail "info --json lacks keys"
import json, sys
j = json.load(open(sys.argv[1]))
for k in ("records", "classes", "class_counts", "shards", "encoding", "format_version"):
    assert k in j, k
assert j["records"] == 15 and j["format_version"] == 2 and j["encoding"] == "keep"
assert all(len(s["digest"]) == 16 and int(s["digest"], 16) >= 0 for s in j["shards"])
assert len(j["classes"]) == 3 and j["class_counts"] == [5, 5, 5]
assert [sorted(s) for s in j["shards"]][0] == ["bytes", "digest", "first", "path", "records"]
assert sum(s["records"] for s in j["shards"]) == 15
PY

# A format 1 manifest is described, with what its digests are worth.
cp "$T/p/train.json" "$T/p2.json"
expect 0 /usr/bin/python3 "$IMS_SRC/tests/cli/split_edit.py" format1 "$T/p/train.json"
expect 0 "$IMSHARD" info "$T/p/train.json"
contains "$T/out" "format:     version 1 (shard digests prove nothing: 'imshard verify --rehash' upgrades it)"
cp "$T/p2.json" "$T/p/train.json"
expect 0 "$IMSHARD" info "$T/p/train.json"
contains "$T/out" "format:     version 2"
lacks "$T/out" "prove nothing"

# A missing shard is reported (exit 1) while the rest is still described.
mv "$T/p/train-00001-of-00002.mdb" "$T/p/gone"
expect 1 "$IMSHARD" info "$T/p/train.json"
contains "$T/err" "train-00001-of-00002.mdb' is missing"
mv "$T/p/gone" "$T/p/train-00001-of-00002.mdb"

# Strings of an edited manifest never reach the terminal raw: ESC, BEL,
# DEL, C1 controls and a byte that is not UTF-8 in created_by,
# created_at and a class name come out as \xHH (before: created_by and
# created_at were printed raw, and --json printed DEL, C1 and bad bytes
# raw). --json stays JSON and keeps the values.
mkdir -p "$T/esc"
cp "$T/p/train-0000"[01]"-of-00002.mdb" "$T/esc/"
/usr/bin/python3 - "$T/p/train.json" "$T/esc/train.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
j["created_by"] = "\x1b]0;owned\x07\x1b[2J"
j["created_at"] = "\x7f\u009b31m@BAD@"
j["classes"][0] = "c\u009b2J\x1b[31m"
open(sys.argv[2], "wb").write(json.dumps(j).encode().replace(b"@BAD@", b"\xe9"))
PY
raw_bytes() { # raw_bytes FILE: ESC, BEL, DEL, a C1 control or a lone 0xe9 in FILE
  /usr/bin/python3 -c '
import sys
d = open(sys.argv[1], "rb").read()
sys.exit(0 if any(x in d for x in (b"\x1b", b"\x07", b"\x7f", b"\xc2\x9b", b"\xe9")) else 1)' "$1"
}
expect 0 "$IMSHARD" info "$T/esc/train.json"
checks=$((checks + 1))
! raw_bytes "$T/out" || fail "info printed a control or non-UTF-8 byte raw"
contains "$T/out" 'created:    \x7f\xc2\x9b31m\xe9 by \x1b]0;owned\x07\x1b[2J'
contains "$T/out" 'c\xc2\x9b2J\x1b[31m'
expect 0 "$IMSHARD" info "$T/esc/train.json" --json
checks=$((checks + 1))
! raw_bytes "$T/out" || fail "info --json printed a control or non-UTF-8 byte raw"
same "$(json "$T/out" 'ascii(j["created_by"]) + ascii(j["created_at"]) + ascii(j["classes"][0])')" \
  "'\x1b]0;owned\x07\x1b[2J''\x7f\x9b31m\\\\xe9''c\x9b2J\x1b[31m'"

echo '{"not": "a manifest"}' >"$T/x.json"
expect 1 "$IMSHARD" info "$T/x.json"
one_line "$T/err"
contains "$T/err" "not an imshard manifest"
expect 1 "$IMSHARD" info "$T/nothing.json"
one_line "$T/err"
head -c 100 "$T/p/train.json" >"$T/trunc.json"
expect 1 "$IMSHARD" info "$T/trunc.json"
one_line "$T/err"
contains "$T/err" "not valid JSON"
expect 2 "$IMSHARD" info "$T/p/train.json" extra
one_line "$T/err"
finish
