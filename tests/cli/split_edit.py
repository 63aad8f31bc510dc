#!/usr/bin/env python3
"""Edits a packed split the way a careless or hostile user could, keeping
every check but the digest satisfied (docs/FORMAT.md; lmdb module).

usage: split_edit.py relabel MANIFEST.json INDEX LABEL
           record INDEX gets class LABEL; its header CRC and the manifest's
           class counts are fixed up to match (a LABEL the manifest has no
           class for leaves the counts as they were: they still add up)
       split_edit.py resize MANIFEST.json INDEX WIDTH HEIGHT
           record INDEX's header gives WIDTH x HEIGHT (its image unchanged);
           its header CRC is fixed up to match
       split_edit.py drop-last MANIFEST.json
           the split's last record is deleted; the manifest's counts, shard
           record count and byte size are fixed up to match
       split_edit.py damage MANIFEST.json INDEX...
           one payload byte of each record INDEX flipped (its header and the
           manifest untouched: the record reads as damaged)
       split_edit.py format1 MANIFEST.json
           rewrites the manifest as format 1, with the digests a format 1
           writer computed (CRC-32C chained over the records' headers)
"""
import json, os, struct, sys
import lmdb

T = [0] * 256
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    T[i] = c


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    for b in data:
        crc = T[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def shard_of(man, index):
    for s in man["shards"]:
        if s["first"] <= index < s["first"] + s["records"]:
            return s
    raise SystemExit("no record %d" % index)


def save(path, man):
    with open(path, "w") as f:
        json.dump(man, f, indent=1)


def relabel(mpath, index, label):
    man = json.load(open(mpath))
    s = shard_of(man, index)
    path = os.path.join(os.path.dirname(mpath), s["path"])
    env = lmdb.open(path, subdir=False, lock=False, map_size=max(1 << 24, 2 * os.path.getsize(path)))
    key = struct.pack(">Q", index)
    with env.begin(write=True) as txn:
        val = bytearray(txn.get(key))
        old = struct.unpack_from("<i", val, 12)[0]
        if old == label:
            raise SystemExit("record %d already has label %d" % (index, label))
        hlen = struct.unpack_from("<H", val, 6)[0]
        struct.pack_into("<i", val, 12, label)
        struct.pack_into("<I", val, 44, crc32c(val[48:hlen], crc32c(val[:44])))
        txn.put(key, bytes(val))
    env.close()
    if label < len(man["classes"]):
        man["class_counts"][old] -= 1
        man["class_counts"][label] += 1
    s["bytes"] = os.path.getsize(path)
    save(mpath, man)


def resize(mpath, index, width, height):
    man = json.load(open(mpath))
    s = shard_of(man, index)
    path = os.path.join(os.path.dirname(mpath), s["path"])
    env = lmdb.open(path, subdir=False, lock=False, map_size=max(1 << 24, 2 * os.path.getsize(path)))
    key = struct.pack(">Q", index)
    with env.begin(write=True) as txn:
        val = bytearray(txn.get(key))
        hlen = struct.unpack_from("<H", val, 6)[0]
        struct.pack_into("<II", val, 20, width, height)
        struct.pack_into("<I", val, 44, crc32c(val[48:hlen], crc32c(val[:44])))
        txn.put(key, bytes(val))
    env.close()
    s["bytes"] = os.path.getsize(path)
    save(mpath, man)


def drop_last(mpath):
    man = json.load(open(mpath))
    last = man["records"] - 1
    s = shard_of(man, last)
    path = os.path.join(os.path.dirname(mpath), s["path"])
    env = lmdb.open(path, subdir=False, lock=False, map_size=max(1 << 24, 2 * os.path.getsize(path)))
    key = struct.pack(">Q", last)
    with env.begin(write=True) as txn:
        label = struct.unpack_from("<i", txn.get(key), 12)[0]
        txn.delete(key)
    env.close()
    man["records"] -= 1
    s["records"] -= 1
    man["class_counts"][label] -= 1
    s["bytes"] = os.path.getsize(path)
    save(mpath, man)


def damage(mpath, indices):
    man = json.load(open(mpath))
    for index in indices:
        s = shard_of(man, index)
        path = os.path.join(os.path.dirname(mpath), s["path"])
        env = lmdb.open(path, subdir=False, lock=False, map_size=max(1 << 24, 2 * os.path.getsize(path)))
        key = struct.pack(">Q", index)
        with env.begin(write=True) as txn:
            val = bytearray(txn.get(key))
            hlen = struct.unpack_from("<H", val, 6)[0]
            val[hlen + (len(val) - hlen) // 2] ^= 0x20
            txn.put(key, bytes(val))
        env.close()
        s["bytes"] = os.path.getsize(path)
    save(mpath, man)


def format1(mpath):
    man = json.load(open(mpath))
    for s in man["shards"]:
        path = os.path.join(os.path.dirname(mpath), s["path"])
        env = lmdb.open(path, subdir=False, readonly=True, lock=False)
        digest = 0
        with env.begin() as txn:
            for _, val in txn.cursor():
                hlen = struct.unpack_from("<H", val, 6)[0]
                digest = crc32c(val[:hlen], digest)
        env.close()
        s["digest"] = digest
    man["format_version"] = 1
    save(mpath, man)


if __name__ == "__main__":
    cmd, mpath = sys.argv[1], sys.argv[2]
    if cmd == "relabel":
        relabel(mpath, int(sys.argv[3]), int(sys.argv[4]))
    elif cmd == "resize":
        resize(mpath, int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    elif cmd == "drop-last":
        drop_last(mpath)
    elif cmd == "damage":
        damage(mpath, [int(x) for x in sys.argv[3:]])
    elif cmd == "format1":
        format1(mpath)
    else:
        raise SystemExit("unknown command " + cmd)
