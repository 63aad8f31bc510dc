#!/usr/bin/env bash
# imshard info: the human summary, the --json keys, and damaged inputs.
source "$IMS_TESTLIB"

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
